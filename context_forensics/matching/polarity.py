"""Polarity: does a text say a fact the same way round, or negate it, permit what it requires?

Cosine similarity sees topic, not polarity: MiniLM scores "Do not rename any public function"
0.89 against "You may rename any public function". ``polarity_conflict(fact, text)`` is the
check that runs beside the numbers/identifiers check wherever a text is taken to state a fact
(``ctxf facts``, ``ctxf calibrate``, the free-text matching of ``ctxf diverge``). It is a small
deterministic rule, no model:

1. **Clauses.** Both texts are cut into clauses at ``, ; :``, sentence ends, line breaks,
   brackets and dashes, and before ``but``, ``whereas``, ``while``, ``although``, ``though``,
   ``however``, ``because``, ``so``. ``and`` / ``or`` alone do not cut (``do not rename or
   delete X`` is one negated list), but a comma does (``…, and nobody can eat peanuts``).
2. **Markers** in a clause: negators (``not`` and every ``n't``, ``never``, ``no``, ``nobody``,
   ``nothing``, ``none``, ``neither``, ``nor``, ``nowhere``, ``without``, ``avoid``, ``refrain``,
   ``forbid``, ``prohibit``, ``forbidden``, ``prohibited``, ``banned``, ``disallowed``; ``fail``
   and ``forget`` only before ``to``), modals of obligation (``must``, ``shall``, ``should``,
   ``always``, ``ought``), of need (``required``, ``require(s)``, ``mandatory``, ``necessary``,
   ``need(s) to``, ``need not``, ``no need to``, ``have/has/had to``, ``obliged``) and of permission (``may``, ``can``,
   ``allowed``, ``permitted``, ``optional``, ``free to``, ``welcome to``). Markers in a row
   (skipping auxiliaries, pronouns, determiners and a few adverbs) form one group: ``must
   never``, ``may not``, ``are not allowed to``, ``don't have to``, ``never fail to``.
   Bounds are not negations: ``no more than 3``, ``not later than 16:00`` (``no``/``not`` +
   comparative + ``than``), ``not only``, ``not just``, ``no matter`` carry no marker.
3. **Stance** of a group: an odd number of negators is ``negated`` — except a negated *need*
   (``don't have to``, ``not required``, ``need not``), which is ``optional``; an even number
   (``never fail to``) is affirmative: ``required`` with an obligation or need, ``permitted``
   with a permission, else ``affirmed``. A negated group followed later in its clause by
   ``without``, ``unless``, ``until`` or ``except`` is a condition, not a ban (``do not send any
   email without confirmation`` = send only with it): the pair cancels, both affirmative.
4. **Scope.** A group governs its *anchor*, the first content word after it, and words joined
   to the anchor by ``or`` / ``and`` / ``nor`` (``do not rename or delete``); a clause that is
   only a group and its anchor passes its stance to the head of the next clause (``do not
   rename, move or delete X``). A predicative ``allowed``, ``permitted``, ``forbidden``,
   ``required``, ``optional``… with no ``to`` after it governs the words before it in its clause
   (``direct pushes to main are not allowed``). A content word governed by no group and with no
   marker before it in its clause is implicitly ``affirmed`` (``Pushed the hotfix to main``).
5. **Comparison.** Words are compared by Snowball stem (``rename`` = ``renaming``). For every
   stem governed by a group in one text and governed or implicitly affirmed in the other, the
   clauses holding it (governed or implicitly affirmed) are paired by how many content stems
   they share with each other; when every best-paired clause on the other side takes an
   incompatible stance, the texts conflict. So a text never conflicts with itself.
   Compatible stances: ``negated`` only with ``negated``; ``required`` with ``affirmed``;
   ``permitted`` with ``affirmed`` and ``optional``; ``affirmed`` with ``required`` and
   ``permitted``. So ``must`` vs ``may`` is a flip, and so is ``don't have to`` vs ``do``.

Precision comes first (a false flip hides a fact that is there): a stem the two texts share only
as ungoverned words never conflicts, and a paraphrase with other verbs (``Avoid renaming`` vs
``Do not rename``: both ``negated``; ``Don't break X`` vs ``Keep X compatible``: no shared
governed stem) is left to the embedding. Limits: no parsing, so a negation reaching a subject
after its verb (``the tests are not passing``) is caught only through implicit affirmation of
the other side, and irony, questions and reported speech read as statements.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

NEGATED, OPTIONAL, REQUIRED, PERMITTED, AFFIRMED = "negated", "optional", "required", "permitted", "affirmed"
_COMPATIBLE = {
    NEGATED: {NEGATED},
    OPTIONAL: {OPTIONAL, PERMITTED},
    REQUIRED: {REQUIRED, AFFIRMED},
    PERMITTED: {PERMITTED, AFFIRMED, OPTIONAL},
    AFFIRMED: {AFFIRMED, REQUIRED, PERMITTED},
}

_NEG_WORDS = {"not", "never", "no", "nobody", "nothing", "none", "neither", "nor", "nowhere", "noone",
              "without"}  # "cannot" and every "n't" are split into their verb and "not" by _tokens
_NEG_VERBS = {"avoid", "avoids", "avoiding", "avoided", "refrain", "refrains", "refraining", "forbid",
              "forbids", "prohibit", "prohibits", "forbidden", "prohibited", "banned", "disallowed"}
_NEG_BEFORE_TO = {"fail", "fails", "failing", "forget", "forgets"}  # "never fail to run" = always run
_MUST = {"must", "shall", "should", "always", "ought"}
_NEED = {"required", "require", "requires", "mandatory", "necessary", "obliged"}
_NEED_BEFORE_TO = {"need", "needs", "have", "has", "had"}  # "need to", "have to"; "no need to"
_MAY = {"may", "can", "allowed", "permitted", "optional", "optionally"}
_MAY_BEFORE_TO = {"free", "welcome"}
# A stance adjective with no "to" after it is predicative: it governs its clause's subject.
_PREDICATIVE = {"allowed", "permitted", "forbidden", "prohibited", "banned", "disallowed", "required",
                "mandatory", "optional", "necessary"}
_CONDITION = {"without", "unless", "until", "except"}
_COMPARATIVE = {"more", "less", "fewer", "longer", "later", "earlier", "greater", "higher", "lower",
                "shorter", "bigger", "larger", "smaller", "older", "newer", "faster", "slower", "sooner",
                "worse", "better", "many", "much"}
# Skipped between the words of a group and before its anchor.
_FILLER = {
    "be", "is", "are", "was", "were", "been", "being", "am", "do", "does", "did", "to", "will", "would",
    "the", "a", "an", "any", "anything", "ever", "directly", "also", "just", "really", "yet", "even",
    "please", "all", "every", "each", "this", "that", "these", "those", "your", "my", "our", "their",
    "its", "his", "her", "you", "we", "i", "they", "he", "she", "it", "us", "them", "me", "him", "one",
    "from", "at", "simply", "actually", "still", "currently", "again", "else", "of", "yourself",
    "ourselves", "themselves", "anyone", "anybody", "someone", "somebody", "then", "first", "now",
    "here", "there", "so", "and", "or", "ok", "okay",
}
_STOP = _FILLER | {"in", "on", "for", "with", "by", "as", "if", "when", "than", "into", "onto", "over",
                   "under", "about", "after", "before", "which", "who", "what", "where", "how", "why",
                   "only", "very", "too", "out", "up", "down", "off", "per", "via", "instead", "have",
                   "has", "had", "can", "may", "but", "because", "while", "whereas", "although",
                   "though", "however", "s", "t", "d", "ll", "re", "ve", "m"}
_CLAUSE_WORDS = {"but", "whereas", "while", "although", "though", "however", "because", "so"}
_LEAD = {"you", "we", "i", "they", "he", "she", "it", "everyone", "everybody", "do", "does", "did", "will",
         "would", "is", "are", "was", "were", "be"}

_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:['\u2019][A-Za-z]+)*|\d[\d,._]*")
# Clause cuts: punctuation, a full stop not inside a number or name, line breaks, dashes.
_CUT = re.compile(r"[,;:!?()\[\]{}\n\u2014\u2013]|\.(?=\s|$)|\s-\s|\.\.\.")


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=1 << 15)
def stem(word: str) -> str:
    """The Snowball (Porter2) stem of a lower-case word: ``renaming`` -> ``renam``."""
    return _stemmer().stemWord(word)


@dataclass(frozen=True)
class _Tok:
    word: str  # lower case, contraction expanded ("n't" -> "not")
    start: int  # offsets of the source token, for quoting
    end: int


def _tokens(text: str, lo: int, hi: int) -> list[_Tok]:
    out: list[_Tok] = []
    for m in _TOKEN.finditer(text, lo, hi):
        w = m.group().lower().replace("\u2019", "'")
        s, e = m.span()
        if w in ("cannot", "can't"):
            out += [_Tok("can", s, e), _Tok("not", s, e)]
        elif w in ("won't", "shan't"):
            out += [_Tok("will" if w == "won't" else "shall", s, e), _Tok("not", s, e)]
        elif w.endswith("n't"):
            out += [_Tok(w[:-3], s, e), _Tok("not", s, e)]
        elif "'" in w:
            out.append(_Tok(w.split("'")[0], s, e))  # user's -> user, it's -> it
        else:
            out.append(_Tok(w, s, e))
    return out


def clause_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the clauses of ``text`` (rule 1 of the module docstring), in order."""
    cuts = [0]
    for m in _CUT.finditer(text):
        cuts += [m.start(), m.end()]
    cuts.append(len(text))
    spans: list[tuple[int, int]] = []
    for lo, hi in zip(cuts[::2], cuts[1::2]):
        start = lo
        for m in re.finditer(r"\b(" + "|".join(sorted(_CLAUSE_WORDS)) + r")\b", text[lo:hi], re.I):
            spans.append((start, lo + m.start()))
            start = lo + m.start()
        spans.append((start, hi))
    return [(a, b) for a, b in spans if text[a:b].strip()]


def clause_scope(text: str, start: int, end: int, *, reach: int = 400) -> str:
    """The clauses of ``text`` that ``text[start:end]`` lies in: a negator just outside a span
    still scopes over it ("Do not | rename any public function"). Only ``reach`` characters
    either side are read (a clause is a sentence part; a long text is not cut whole)."""
    lo = max(0, start - reach)
    hi = min(len(text), end + reach)
    part = text[lo:hi]
    a, b = start - lo, end - lo
    s, e = a, b
    for x, y in clause_spans(part):
        if x < b and y > a:
            s, e = min(s, x), max(e, y)
    return part[s:e]


def _marker(toks: list[_Tok], i: int) -> tuple[str, str] | None:
    """(kind, class) of the marker at ``toks[i]``: kind ``neg`` or ``modal``; None if no marker."""
    w = toks[i].word
    nxt = toks[i + 1].word if i + 1 < len(toks) else ""
    if w in ("no", "not"):
        # bounds and idioms: "no more than 3", "not later than", "not only", "no matter"
        if nxt in _COMPARATIVE and any(t.word == "than" for t in toks[i + 2 : i + 4]):
            return None
        if nxt in ("only", "just", "matter", "doubt"):
            return None
        return ("neg", "")
    if w in _NEG_WORDS or w in _NEG_VERBS:
        return ("neg", "")
    if w in _NEG_BEFORE_TO and nxt == "to":
        return ("neg", "")
    if w in _MUST:
        return ("modal", "must")
    if w in _NEED:
        return ("modal", "need")
    if w in _NEED_BEFORE_TO and (nxt == "to" or (w in ("need", "needs") and (
            nxt == "not" or (i > 0 and toks[i - 1].word == "no")))):
        return ("modal", "need")
    if w in _MAY:
        return ("modal", "may")
    if w in _MAY_BEFORE_TO and nxt == "to":
        return ("modal", "may")
    return None


def _stance(negs: int, mood: str) -> str:
    if negs % 2:
        return OPTIONAL if mood == "need" else NEGATED
    if mood in ("must", "need"):
        return REQUIRED
    if mood == "may":
        return PERMITTED
    return AFFIRMED


@dataclass
class _Clause:
    start: int
    end: int
    stems: set[str]  # content stems
    # stem -> (stance, explicit, phrase (start, end) in the text)
    stance: dict[str, tuple[str, bool, tuple[int, int]]]
    # a negated group the clause's condition cancelled (rule 3: "do not send email without
    # confirmation"): a ban with an exception, which ``clauses`` asks a text to keep restricted
    conditional: bool = False


def _content(w: str) -> bool:
    return w not in _STOP and not w[0].isdigit() and len(w) > 1


@lru_cache(maxsize=1 << 16)
def _token_stems(raw: str) -> tuple[str, ...]:
    """The content stems one source token contributes (as ``_tokens`` splits it)."""
    return tuple(stem(t.word) for t in _tokens(raw, 0, len(raw)) if _content(t.word))


def content_stems(text: str) -> set[str]:
    """The stems of a text's content words (no function words, markers count): what two
    clauses are paired by, and what ``facts`` asks of a chunk before scoring its spans."""
    # per source token, cached: a session repeats its words, and the facts prefilter asks this
    # of every chunk (the same set as stemming ``_tokens(text, ...)`` word by word)
    out: set[str] = set()
    for raw in _TOKEN.findall(text):
        out.update(_token_stems(raw))
    return out


# The polarity markers as words: what a clause says about its content, not content itself.
_MARKER_WORDS = (_NEG_WORDS | _NEG_VERBS | _NEG_BEFORE_TO | _MUST | _NEED | _NEED_BEFORE_TO | _MAY | _MAY_BEFORE_TO
                 | _CONDITION)


@lru_cache(maxsize=1)
def _marker_stems() -> frozenset[str]:
    return frozenset(stem(w) for w in _MARKER_WORDS)


def claim_stems(text: str) -> set[str]:
    """``content_stems`` without the polarity markers (not, never, must, may, allowed, ...) and
    condition words (without, unless, until, except): the words a statement is about, which a
    text restating it with another negator still holds."""
    return content_stems(text) - _marker_stems()


def analyse(text: str) -> list[_Clause]:
    """Clauses of ``text`` with the stance of each content stem (see the module docstring)."""
    clauses: list[_Clause] = []
    inherit: tuple[str, tuple[int, int]] | None = None
    for lo, hi in clause_spans(text):
        toks = _tokens(text, lo, hi)
        stance: dict[str, tuple[str, bool, tuple[int, int]]] = {}
        groups: list[dict[str, Any]] = []  # negs, mood, start, anchor index, governed indexes
        i = 0
        n = len(toks)
        marked_before = [False] * n
        seen_marker = False
        while i < n:
            mk = _marker(toks, i)
            marked_before[i] = seen_marker
            if mk is None:
                i += 1
                continue
            seen_marker = True
            negs, mood, start, words = 0, "", i, []
            j = i
            while j < n:
                mk = _marker(toks, j)
                if mk is not None:
                    if mk[0] == "neg":
                        negs += 1
                    if mk[1]:
                        mood = mk[1]
                    words.append(j)
                elif toks[j].word not in _FILLER:
                    break
                marked_before[j] = True
                j += 1
            # "no" before a group word starts it: "No, you may ..." has no anchor
            group = {"negs": negs, "mood": mood, "start": start, "words": words, "anchor": None,
                     "governed": [], "last": words[-1]}
            if j < n and _content(toks[j].word):
                gov = [j]
                k = j + 1
                while k + 1 < n and toks[k].word in ("or", "and", "nor") and _content(toks[k + 1].word):
                    gov.append(k + 1)
                    k += 2
                group["anchor"], group["governed"] = j, gov
                for w in gov:
                    marked_before[w] = True
                j = k
            elif toks[words[-1]].word in _PREDICATIVE:
                group["predicative"] = True
            groups.append(group)
            i = j
        # a subject negator with no anchor of its own ("Nobody in the group can eat") negates
        # the next group of its clause
        for gi in range(len(groups) - 1):
            g = groups[gi]
            if g["negs"] and g["anchor"] is None and not g.get("predicative"):
                nxt_g = groups[gi + 1]
                nxt_g["negs"] += g["negs"]
                nxt_g["start"] = g["start"]
                g["negs"] = 0
        # rule 3: a negated group followed by a condition word in its clause cancels with it
        words_at = [t.word for t in toks]
        conditional = False
        for gi, g in enumerate(groups):
            after = (g["last"] if g["anchor"] is None else g["anchor"]) + 1
            if g["negs"] % 2 and any(w in _CONDITION for w in words_at[after:]):
                g["negs"] += 1
                conditional = True
                for later in groups[gi + 1 :]:
                    if any(words_at[w] == "without" for w in later["words"]):
                        later["negs"] += 1
                        break
        stems = {stem(t.word) for t in toks if _content(t.word)}

        def quote(g: dict[str, Any], upto: int) -> tuple[int, int]:
            # the group from its subject or auxiliary: "Do not rename", "You may rename"
            s = g["start"]
            for _ in range(2):
                if s > 0 and toks[s - 1].word in _LEAD:
                    s -= 1
            return toks[s].start, toks[upto].end

        for g in groups:
            st = _stance(g["negs"], g["mood"])
            if g["anchor"] is not None:
                for idx in g["governed"]:
                    stance[stem(toks[idx].word)] = (st, True, quote(g, idx))
            elif g.get("predicative"):
                for idx in range(g["start"]):
                    if _content(toks[idx].word):
                        stance.setdefault(stem(toks[idx].word), (st, True, (toks[idx].start, toks[g["last"]].end)))
        # a list after "do not rename, ..." shares its stance
        if inherit is not None:
            head = next((k for k in range(n) if _content(toks[k].word)), None)
            if head is not None and not marked_before[head]:
                st, ph = inherit
                k = head
                while True:
                    stance.setdefault(stem(toks[k].word), (st, True, ph))
                    marked_before[k] = True
                    if k + 2 < n and toks[k + 1].word in ("or", "and", "nor") and _content(toks[k + 2].word):
                        k += 2
                    else:
                        break
        inherit = None
        if groups and groups[-1]["anchor"] is not None:
            g = groups[-1]
            rest = [t for t in toks[g["governed"][-1] + 1 :] if _content(t.word)]
            if not rest:
                inherit = (_stance(g["negs"], g["mood"]), quote(g, g["governed"][-1]))
        # implicit affirmation: content words with no marker before them in the clause
        for k, t in enumerate(toks):
            if _content(t.word) and not marked_before[k]:
                stance.setdefault(stem(t.word), (AFFIRMED, False, (t.start, t.end)))
        clauses.append(_Clause(lo, hi, stems, stance, conditional))
    return clauses


@dataclass(frozen=True)
class Conflict:
    """Why a text does not state a fact the same way round."""

    fact_phrase: str
    text_phrase: str
    fact_stance: str
    text_stance: str
    word: str

    @property
    def reason(self) -> str:
        return f"polarity differs: '{self.fact_phrase}' vs '{self.text_phrase}'"

    def to_dict(self) -> dict[str, str]:
        return {"fact": self.fact_phrase, "text": self.text_phrase, "fact_stance": self.fact_stance,
                "text_stance": self.text_stance, "word": self.word, "reason": self.reason}


def _phrase(text: str, span: tuple[int, int]) -> str:
    return " ".join(text[span[0] : span[1]].split())[:60]


@lru_cache(maxsize=1 << 12)
def _analysed(text: str) -> tuple[_Clause, ...]:
    return tuple(analyse(text))


def analysed(text: str) -> tuple[_Clause, ...]:
    """``analyse(text)``, cached: the clauses of a text with their offsets, content stems and
    stances (``clauses`` reads a fact's and a matched text's)."""
    return _analysed(text)


def _comparable(a: _Clause, b: _Clause) -> int:
    """Shared content stems of two clauses, or 0 when they share under half of the smaller
    one's (two clauses about other things: "rename private helpers" vs "rename public API")."""
    shared = len(a.stems & b.stems)
    return shared if 2 * shared >= min(len(a.stems), len(b.stems)) else 0


def polarity_conflict(fact: str, text: str) -> Conflict | None:
    """The polarity conflict of ``text`` with ``fact`` (rule 5 of the module docstring), or None
    when they agree or cannot be compared. The best-paired clause pair wins."""
    fc, tc = _analysed(fact), _analysed(text)
    best: tuple[int, Conflict] | None = None
    for a in fc:
        for s, (st_a, explicit_a, ph_a) in a.stance.items():
            cands = []
            for b in tc:
                got = b.stance.get(s)
                # every clause holding the stem competes, implicit ones too: two implicit
                # affirmations agree, and a clause saying the word the same way round that pairs
                # as well as a flipped one keeps a text from conflicting with itself ("For
                # unrelated changes, ... No unrelated changes were implemented.")
                if got is not None:
                    overlap = _comparable(a, b)
                    if overlap:
                        cands.append((overlap, b))
            if not cands:
                continue
            top = max(o for o, _ in cands)
            tops = [b for o, b in cands if o == top]
            if any(b.stance[s][0] in _COMPATIBLE[st_a] for b in tops):
                continue
            st_b, _, ph_b = tops[0].stance[s]
            if best is None or top > best[0]:
                best = (top, Conflict(_phrase(fact, ph_a), _phrase(text, ph_b), st_a, st_b, s))
    return best[1] if best else None


# Two free texts are compared for polarity only while both are about a paragraph long: a long
# answer is many statements, and its chunks' cosines compare it better than one flipped clause.
MAX_FLIP_TEXT = 2000


def polarity_flip(a: str, b: str) -> Conflict | None:
    """A polarity conflict between two texts either way round (``ctxf diverge``'s free text,
    where neither is the fact), or None: they agree, cannot be compared, or one is longer than
    ``MAX_FLIP_TEXT`` characters."""
    if len(a) > MAX_FLIP_TEXT or len(b) > MAX_FLIP_TEXT:
        return None
    return polarity_conflict(a, b) or polarity_conflict(b, a)
