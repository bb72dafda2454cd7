"""importers/_text.clip: a cut made before the redactor never keeps part of a word (so part of
a secret no rule recognises any more); a property test over generated texts."""

from __future__ import annotations

from hypothesis import given, strategies as st

from context_forensics.importers._text import clip, title_line

WORDS = st.lists(st.text(alphabet=st.characters(blacklist_categories=("Zs", "Cc", "Zl", "Zp")), min_size=1,
                         max_size=30), min_size=1, max_size=20)


@given(WORDS, st.sampled_from([" ", "  ", "\n", "\t"]), st.integers(min_value=1, max_value=120))
def test_clip_keeps_whole_words_within_the_limit(words, sep, limit):
    text = sep.join(words)
    out = clip(text, limit)
    if len(text) <= limit:
        assert out == text
        return
    assert len(out) <= limit
    kept = out.split()
    assert kept == words[:len(kept)]  # whole words, in order: none cut
    if len(words[0]) > limit:
        assert out == ""  # no head of a word that may be a token


def test_clip_drops_the_word_the_limit_falls_in():
    text = "the AWS secret key is q8Vt2Lr9Xm4Kp7Wz1Nc5Hb3Jd6Fg0Sa8Ye2Ru4Ti ok"
    assert clip(text, 30) == "the AWS secret key is"
    assert clip(text, 21) == "the AWS secret key is"
    assert clip(text, 22) == "the AWS secret key is"
    assert clip(text, 30, "...") == "the AWS secret key is..."
    assert clip("x" * 50, 20) == "" and clip("  " + "x" * 50, 20) == ""


def test_title_line_is_the_first_non_blank_line_clipped():
    assert title_line("\n\n  Fix the build  \nthen test") == "Fix the build"
    assert title_line("   \n ") is None
    assert title_line("a " * 80, 10) == "a a a a a"
