"""Content terms: the words a drift explanation and the goal assessment compare.

``terms`` counts a text's content words and identifiers (stop words out, plurals folded);
``goal_keywords`` ranks the goal's most telling ones; ``content_words`` lists a text's distinct
content words, any script (the measure of whether a goal says enough to be judged).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

GOAL_KEYWORDS = 12  # goal keywords tracked per session

_TERM = re.compile(r"[A-Za-z][A-Za-z0-9_]*[A-Za-z0-9]|[A-Za-z]{3,}")

# English function words and the stock vocabulary of assistant replies: never a topic.
STOPWORDS = frozenset("""
a about above after again against all almost also although always am among an and another any anybody
anyone anything anyway are around as ask asked at away back be became because become been before being
below best better between both but by came can cannot could did do does doing done don down during each
either else enough etc even ever every everything few first for from further get gets getting give given
go goes going good got great had has have having he her here hers herself him himself his how however i
if in into is isn it its itself just keep kind know last least less let lets like likely ll look lot
made make makes many may maybe me might mine more most much must my myself need needs never new next no
nor not nothing now of off often oh ok okay on once one only or other others otherwise our ours
ourselves out over own per perhaps please put quite rather re really right said same say says see seem
seems should since so some something sometimes still such sure take than thank thanks that the their
theirs them themselves then there these they thing things think this those though through thus to
together too toward try two under until up upon us use used uses using usually ve very via want was
way we well were what whatever when where whether which while who whom whose why will with within
without would yes yet you your yours yourself yourselves
able actually already added adding add answer anyone appreciate assist assistance below certainly
check course currently definitely feel find fine following happy help helpful hope hi hello instead
let’s means mention note okay particular possible provide provided question questions quick sorry
start step steps suggest tell today understand wanted welcome work works write create give explain fix
show none true false null self return def import elif except raise print len str int
""".split())


def _stem(word: str) -> str:
    """A crude plural fold so 'letters' meets 'letter' (no stemmer dependency)."""
    w = word.lower()
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def _is_identifier(term: str) -> bool:
    return "_" in term or any(c.isdigit() for c in term) or (
        any(c.isupper() for c in term[1:]) and any(c.islower() for c in term))


@dataclass
class Terms:
    """Content terms of one text: stem -> count, and each stem's first surface form."""

    counts: Counter[str]
    surface: dict[str, str]
    special: set[str]  # identifiers and capitalised names
    parts: dict[str, tuple[str, ...]] = field(default_factory=dict)  # identifier stem -> its words' stems

    def words(self) -> set[str]:
        """Every stem the text uses, and the words inside its identifiers (``baseLmstudioUrl``:
        base, lmstudio, url)."""
        return set(self.counts).union(*self.parts.values())


# The words of an identifier: camelCase humps, ALLCAPS runs, snake_case pieces.
_HUMP = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+")


def identifier_parts(token: str) -> tuple[str, ...]:
    """The content words inside an identifier, as stems (``handleLocalChat`` -> handle, local, chat;
    ``NEXT_PUBLIC_LMSTUDIO_URL`` -> next, public, lmstudio, url); () for a plain word."""
    words = [_stem(w) for w in _HUMP.findall(token) if len(w) >= 3]
    words = [w for w in words if w not in STOPWORDS]
    return tuple(words) if len(_HUMP.findall(token)) > 1 else ()


@lru_cache(maxsize=1 << 16)
def _term(t: str) -> tuple[str, str, bool, tuple[str, ...]] | None:
    """What ``terms`` keeps of one matched token (None: a stop word, or under 3 letters): its stem,
    its surface form, whether it is an identifier, the words inside it. A text repeats its words,
    and replies repeat each other's: each token is worked out once."""
    low = t.lower()
    if low in STOPWORDS or sum(c.isalpha() for c in t) < 3:  # not "T10" of a timestamp
        return None
    stem = _stem(low)
    if stem in STOPWORDS:
        return None
    ident = _is_identifier(t)
    return stem, (t if ident else low), ident, identifier_parts(t)


def terms(text: str) -> Terms:
    """The content terms of a text: stop words and 2-letter words out, plurals folded."""
    counts: Counter[str] = Counter()
    surface: dict[str, str] = {}
    special: set[str] = set()
    parts: dict[str, tuple[str, ...]] = {}
    for m in _TERM.finditer(text):
        t = m.group()
        got = _term(t)
        if got is None:
            continue
        stem, shown, ident, inside = got
        counts[stem] += 1
        surface.setdefault(stem, shown)
        if ident:
            special.add(stem)
        elif t[0].isupper():
            start = m.start()
            if start > 1 and text[start - 2] not in ".!?\n" and text[start - 1] == " ":  # mid-sentence
                special.add(stem)
        if stem not in parts:
            parts[stem] = inside
    return Terms(counts, surface, special, {k: v for k, v in parts.items() if v})


def goal_keywords(parts: Sequence[tuple[str, str]], limit: int = GOAL_KEYWORDS) -> list[tuple[str, str]]:
    """The goal's most telling terms as (stem, surface): words of user messages count double
    (a system prompt is mostly boilerplate), identifiers and names double again; ties go to
    the longer word (a crude stand-in for rarity)."""
    weight: defaultdict[str, float] = defaultdict(float)  # stem -> weight
    surface: dict[str, str] = {}
    for role, text in parts:
        t = terms(text)
        factor = 2.0 if role == "user" else 1.0
        for stem, n in t.counts.items():
            weight[stem] += n * factor * (2.0 if stem in t.special else 1.0)
            surface.setdefault(stem, t.surface[stem])
    ranked = sorted(weight, key=lambda s: (-weight[s], -len(s), s))
    return [(s, surface[s]) for s in ranked[:limit]]


# A word of ``content_words`` and of the openings ``templates`` compares.
WORD_TOKEN = re.compile(r"\w+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def content_words(text: str) -> list[str]:
    """The distinct content words of a text, as first written: words of 3+ letters (any script;
    a run of CJK characters counts one word per two characters) that are not stop words, plurals
    folded. "Implement spotter-gqc" -> implement, spotter, gqc."""
    seen: dict[str, str] = {}
    for m in WORD_TOKEN.finditer(text):
        w = m.group()
        if _CJK.search(w):
            for i in range(0, len(w) - 1, 2):
                seen.setdefault(w[i:i + 2], w[i:i + 2])
            continue
        low = w.lower()
        if low in STOPWORDS or sum(c.isalpha() for c in w) < 3:
            continue
        stem = _stem(low)
        if stem not in STOPWORDS:
            seen.setdefault(stem, w)
    return list(seen.values())
