"""Fact timelines: for each fact (a constraint, a number, a name), its state at every step.

The question this answers: "the agent broke constraint X at step 57 — was X even in its window
then, and when did it leave?" A fact is judged inside each step's replayed window.

Presence rule (``score_presence``): a text supports a fact when one of its chunks
(``embed.chunk_text``, sentence-sized), or a sub-sentence span of one,

1. is semantically close: cosine(fact, chunk or span) >= ``threshold`` (``fact_presence_cosine``).
   A chunk with more words than the fact that could hold it (cosine >= ``SPAN_FLOOR`` and at
   least ``SPAN_OVERLAP`` of the fact's content words) is also scored on its clauses and on the
   windows of the fact's length that start with its first word or end with its last
   (``embed.sub_spans``), so a fact stated verbatim inside a compound sentence scores ~1
   whatever surrounds it; the best candidate that passes 2 and 3 counts (a chunk that already
   holds the fact as a whole is not split: the verdict cannot change);
2. passes the lexical check, for facts that carry lexical tokens: every number, identifier and
   quoted string of the fact (``lexical_tokens``) appears in the span that matched (for a whole
   chunk: in that chunk or the chunk next to it in the same text). A budget of "4,500" is not
   present in a chunk saying "3,000", however close the embeddings are;
3. passes the polarity check (``polarity.polarity_conflict``, on the clauses the candidate lies
   in): "You may rename any public function" does not hold "Do not rename any public function",
   nor "may" a "must". A close text failing 2 or 3 is a near miss that says why.

Lexical tokens of a fact:

- numbers written with digits, normalised: ``4,500`` == ``4500`` == ``4.5k`` == ``4500.00``
  (thousands separators ``,`` ``_`` and thin/no-break spaces are dropped; a ``k``/``K`` suffix
  is x1,000, ``M`` x1,000,000; other unit letters are ignored, so ``16GB`` is 16; the sign is
  ignored). In the searched text, number words (``zero`` .. ``twenty``, ``thirty`` ..
  ``ninety``, ``hundred``, ``thousand``) count as their digits, so "at most 3 retries" is
  found in "three retries at most"; number words in the fact itself are not required.
- times (``16:00``), dates (``2024-05-01``) and versions (``3.11.2``), verbatim;
- identifiers: ``snake_case``, ``camelCase`` / ``PascalCase``, dotted names (``os.path``,
  ``pricing.py``), paths (``tests/``, ``src/app.py``, ``/etc/hosts``), URLs, and names mixing
  letters and digits that start with a letter (``VIP0``, ``gpt-4o``);
- anything in backticks, double quotes or single quotes (``'...'`` not inside a word).

Identifiers and quoted strings match case-insensitively, whitespace-normalised, and not as part
of a longer identifier (``apply_discount`` is not found in ``apply_discount_v2``).

States at step k (``STATES``), from the replayed window of that step:

``present``     a supporting message is in the window, within local attention and not deep in
                the middle of a long window;
``at_risk``     every supporting message in the window is either outside a local attention
                window (``outside_local_window``: only global layers reach it) or deep in the
                middle of a long window (``middle_of_long_window``: the window holds at least
                ``middle_min_tokens`` and the supporting chunk sits between ``middle_band``, by
                default 25%-75%, of it — "lost in the middle");
``summarized``  no original source is in the window, but a compaction summary in the window
                supports the fact (recorded compactions: judged on the summary's own text), or
                its sources were summarized by a simulated compaction (what-if: the simulated
                summary's content is unknown, so this is an assumption);
``gone``        none of the above, after it had been in the window before;
``not_yet``     before it first appeared.

A cleared tool result's content is gone (its placeholder stays), unless the log recorded the
clearing, in which case the stored text is the placeholder the model saw. When a step's sources
are at risk for both reasons, the reason given is ``middle_of_long_window`` (local attention still
reaches that one). A message's position is its in-window token offset plus the supporting chunk's
share of the message; a simulated compaction's summary is counted at the front of the window.

Per fact: ``first_appeared`` (first step not ``not_yet``), ``last_present`` (last step
``present`` or ``at_risk``), ``disappeared_at`` and ``cause`` (the first step it lost ground:
present/at_risk -> summarized/gone, or summarized -> gone; the cause names the policy event —
eviction, clearing, compaction recorded or simulated — and the seqs whose state change removed
it; ``departures`` lists every such step), ``restated`` (a new supporting message joins the
history while the fact is gone or only summarized), ``recollections`` (the model's own message at
a step whose window no longer holds the fact supports it: recalled without the source in view),
``near_misses`` (texts semantically close but missing the fact's numbers or names, a changed
budget, or saying it the other way round: "polarity differs: 'Do not rename' vs 'You may
rename'"). Per step, ``score`` is the best cosine of a supporting text in view (a recorded summary
counts), null when none is.

Limits: cosine similarity sees topic, not negation or intent; the polarity check catches the
flips it can see (negators, must vs may, an action against a ban: "Pushing. git push origin main"
scores 0.63 against "Never push directly to the main branch; open a pull request instead" and
is turned down as "polarity differs: 'Never push' vs 'push'"), not antonyms ("keep" vs "delete")
or a dropped condition. A loose paraphrase can score below the threshold ("no longer than 300
words each" 0.58 against "Keep every reply to the user under 300 words"). ``ctxf calibrate``
measures all of it on labelled pairs, per subset (``negation``, ``compound``) where the pairs
file has a ``subset`` column.

Cost: each unique chunk is embedded once per model (and cached by content hash), the facts are
scored against every chunk as one matrix product, reduced per message with ``group_max``; spans
only for the few chunks past the span gate, each unique span once (cached like chunks); only the
few supporting messages are expanded over the steps (``Timeline.states``). Nothing is encoded per
step, and a warm run encodes nothing but new facts (and their spans).
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import numpy as np

from ..embed import (
    ChunkedTexts,
    EmbedStats,
    chunk_many,
    edge_words,
    embed_texts,
    group_max,
    has_clause_cut,
    similarity,
    sub_spans,
    word_count,
)
from ..errors import InputError, UsageError
from .polarity import Conflict, clause_spans, content_stems, polarity_conflict
from ..records import KIND_CLEARED_TOOL_RESULT, KIND_COMPACTION_BOUNDARY, KIND_COMPACTION_SUMMARY, Message

if TYPE_CHECKING:  # pragma: no cover
    from ..embed import Embedder
    from ..replay import Prepared, Timeline
    from ..store.db import Store

FACTS_VERSION = 1
ProgressFn = Callable[[int, int], None]

STATES = ("not_yet", "present", "at_risk", "summarized", "gone")
NOT_YET, PRESENT, AT_RISK, SUMMARIZED_F, GONE = range(5)
REASON_OUTSIDE_LOCAL = "outside_local_window"
REASON_MIDDLE = "middle_of_long_window"

# "Lost in the middle" (Liu et al., 2023) is a U-shaped recall curve over position; it is worth a
# warning only once a window is long. Both are parameters of ``track_facts``.
MIDDLE_MIN_TOKENS = 32_000
MIDDLE_BAND = (0.25, 0.75)

DEFAULT_THRESHOLD = 0.6

# Sub-sentence spans (``score_presence``): mean pooling dilutes a fact inside a long sentence, so
# a chunk with more words than the fact is also scored on its clauses and on every window of the
# fact's length (``embed.sub_spans``). Only chunks that could hold the fact are split: cosine >=
# SPAN_FLOOR as a whole and holding >= SPAN_OVERLAP of the fact's content stems. A fact stated
# inside a compound sentence clears both (the compound pairs of tests/fixtures/facts/pairs.csv:
# whole-sentence cosine 0.36-0.77, its content words present). Windows are anchored on the
# fact's first or last word (``embed.sub_spans``): on a real agent log (django-11206 from
# mini-swe-agent, its 20 suggested facts, ~820 unique chunks) that is 82 span texts instead of
# 325 for the same verdicts on the calibration pairs; three quarters of the stems instead of
# half would leave 18, but lose two base pairs to the old chunk scores ("Do not push to main
# directly; always open a pull request." 0.5996 for "Never push directly to the main branch.").
SPAN_FLOOR = 0.3
SPAN_OVERLAP = 0.5

# ============================================================================================
# fact sources


def _clean_fact(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"a fact must be a non-empty string, got {value!r}", where=where)
    return " ".join(value.split())


def parse_facts_text(text: str, where: str = "<facts>") -> list[str]:
    """Facts from a facts file's text: a YAML list, a ``facts:`` mapping, or one fact per line.

    A file whose first meaningful line starts with ``- `` or ``facts:`` is read as YAML; any other
    is plain text, one fact per line (blank lines and ``#`` comments skipped), so a fact line
    with a colon in it is never mistaken for a YAML mapping.
    """
    import yaml

    lines = [ln.strip() for ln in text.splitlines()]
    meaningful = [ln for ln in lines if ln and not ln.startswith("#")]
    if not meaningful:
        return []
    head = meaningful[0]
    if head.startswith("- ") or head == "-" or head.startswith("facts:") or head.startswith("["):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            loc = f"{where}:{mark.line + 1}:{mark.column + 1}" if mark else where
            raise InputError(f"invalid YAML: {getattr(e, 'problem', None) or e}", where=loc) from None
        if isinstance(data, dict):
            unknown = sorted(set(data) - {"facts"})
            if unknown:
                raise InputError(f"unknown key(s) {unknown}", where=where, hint="a facts file holds `facts: [...]`")
            data = data.get("facts") or []
        if not isinstance(data, list):
            raise InputError("expected a list of facts", where=where)
        return [_clean_fact(v, f"{where}: facts[{i}]") for i, v in enumerate(data)]
    return [" ".join(ln.split()) for ln in meaningful]


def load_facts_file(path: str | Path) -> list[str]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the facts file: {e}", where=str(p)) from None
    return parse_facts_text(text, str(p))


def gather_facts(given: Iterable[str] | None = None, files: Iterable[str | Path] | None = None,
                 config_facts: Iterable[str] | None = None) -> list[str]:
    """Facts from ``--fact``, then ``--facts-file``, then the config, deduplicated in order."""
    out: list[str] = []
    for f in given or []:
        out.append(_clean_fact(f, "--fact"))
    for path in files or []:
        out.extend(load_facts_file(path))
    for f in config_facts or []:
        out.append(_clean_fact(f, "config: facts"))
    seen: set[str] = set()
    return [f for f in out if not (f in seen or seen.add(f))]


# ============================================================================================
# lexical tokens

_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split())}
_NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
                      "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000})

_SEP = "[,_\u2009\u202f\u00a0]"
_LEX = re.compile(
    r"(?P<url>\bhttps?://[^\s<>\"'`)\]]+)"
    r"|`(?P<tick>[^`\n]{1,120})`"
    r"|\"(?P<dq>[^\"\n]{1,120})\""
    r"|\u201c(?P<cq>[^\u201d\n]{1,120})\u201d"
    r"|(?<![\w'])'(?P<sq>[^'\n]{1,120})'(?![\w])"
    r"|(?<![\w.:/-])(?P<date>\d{4}-\d{2}-\d{2})(?![\w])"
    r"|(?<![\w.:])(?P<time>\d{1,2}:\d{2}(?::\d{2})?)(?![\w:])"
    r"|(?<![\w.])(?P<version>v?\d+\.\d+\.\d+(?:\.\d+)*)(?![\w]|\.\w)"
    rf"|(?<![\w.,])(?P<num>\d{{1,3}}(?:{_SEP}\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?)(?P<unit>[A-Za-z]{{1,3}})?(?![\w])(?!\.\d)"
    r"|(?P<path>(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]*)"
    r"|(?P<word>[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*)"
)
# Numbers in a searched text: dates, times and versions are consumed first so their parts are
# not read as numbers; numbers inside quotes or paths still count.
_NUMS = re.compile(
    r"(?<![\w.:/-])(?P<date>\d{4}-\d{2}-\d{2})(?![\w])"
    r"|(?<![\w.:])(?P<time>\d{1,2}:\d{2}(?::\d{2})?)(?![\w:])"
    r"|(?<![\w.])(?P<version>v?\d+\.\d+\.\d+(?:\.\d+)*)(?![\w]|\.\w)"
    rf"|(?<![\w.,])(?P<num>\d{{1,3}}(?:{_SEP}\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?)(?P<unit>[A-Za-z]{{1,3}})?(?![\w])(?!\.\d)"
)
_SNAKE = re.compile(r"^_*[A-Za-z0-9]+(?:_+[A-Za-z0-9]+)+_*$|^__\w+__$")
_CAMEL = re.compile(r"^[a-z]+[A-Z]\w*$|^[A-Z][a-z0-9]+[A-Z]\w*$")
_MIXED = re.compile(r"^[A-Za-z][\w-]*\d[\w-]*$")
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.I)


def _norm_number(digits: str, unit: str | None) -> str | None:
    raw = re.sub(_SEP, "", digits)
    try:
        value = Decimal(raw)
    except InvalidOperation:
        return None
    if unit in ("k", "K"):
        value *= 1000
    elif unit == "M":
        value *= 1_000_000
    value = value.normalize()
    if value == value.to_integral_value():
        return str(int(value))
    return format(value, "f")


def _is_path(tok: str) -> bool:
    if tok.startswith(("/", "./", "../", "~/")) or tok.endswith("/"):
        return len(tok.strip("/.~")) > 0
    segments = [s for s in tok.split("/") if s]
    return len(segments) >= 3 or (len(segments) >= 2 and "." in segments[-1].strip("."))


def _is_dotted(tok: str) -> bool:
    parts = tok.split(".")
    return len(parts) >= 2 and all(parts) and max(map(len, parts)) >= 2


def _norm_literal(s: str) -> str:
    return " ".join(s.split()).lower()


@dataclass(frozen=True)
class LexicalTokens:
    """What the lexical check requires of a supporting chunk: numbers (normalised) and literals."""

    numbers: tuple[str, ...] = ()
    literals: tuple[str, ...] = ()  # identifiers, quoted strings, times, dates, versions, URLs

    def __bool__(self) -> bool:
        return bool(self.numbers or self.literals)

    def to_dict(self) -> dict[str, list[str]]:
        return {"numbers": list(self.numbers), "literals": list(self.literals)}


def lexical_tokens(fact: str) -> LexicalTokens:
    """The numbers, identifiers and quoted strings of a fact (see the module docstring)."""
    numbers: list[str] = []
    literals: list[str] = []
    for m in _LEX.finditer(fact):
        kind = m.lastgroup
        if kind == "unit":  # lastgroup is the last group that matched: a number with a unit
            kind = "num"
        if kind == "num":
            n = _norm_number(m.group("num"), m.group("unit"))
            if n is not None:
                numbers.append(n)
        elif kind in ("tick", "dq", "cq", "sq"):
            lit = _norm_literal(m.group(kind))
            if lit:
                literals.append(lit)
        elif kind in ("url", "date", "time", "version"):
            literals.append(m.group(kind).lower().rstrip(".,;:"))
        elif kind == "path":
            tok = m.group("path").rstrip(".,;:")
            if _is_path(tok):
                literals.append(tok.lower())
        elif kind == "word":
            tok = m.group("word").rstrip(".-")
            if _SNAKE.match(tok) or _CAMEL.match(tok) or _MIXED.match(tok) or (
                    "." in tok and _is_dotted(tok)):
                literals.append(tok.lower())
    return LexicalTokens(tuple(dict.fromkeys(numbers)), tuple(dict.fromkeys(literals)))


def text_numbers(text: str) -> set[str]:
    """Every number in a text, normalised like a fact's, with number words as digits."""
    out: set[str] = set()
    for m in _NUMS.finditer(text):
        if m.group("num") is not None:
            n = _norm_number(m.group("num"), m.group("unit"))
            if n is not None:
                out.add(n)
    if any(c.isalpha() for c in text):
        for m in _NUMBER_WORD.finditer(text):
            out.add(str(_NUMBER_WORDS[m.group(1).lower()]))
    return out


_literal_patterns: dict[str, re.Pattern[str]] = {}


def _literal_pattern(lit: str) -> re.Pattern[str]:
    pat = _literal_patterns.get(lit)
    if pat is None:
        body = r"\s+".join(re.escape(w) for w in lit.split())
        head = r"(?<![A-Za-z0-9_])" if re.match(r"\w", lit) else ""
        tail = r"(?![A-Za-z0-9_])" if re.search(r"\w$", lit) else ""
        pat = _literal_patterns[lit] = re.compile(head + body + tail, re.I)
    return pat


def missing_tokens(tokens: LexicalTokens, text: str, numbers: set[str] | None = None) -> list[str]:
    """The fact tokens not found in ``text`` (empty: the lexical check passes)."""
    missing = []
    if tokens.numbers:
        have = text_numbers(text) if numbers is None else numbers
        missing += [n for n in tokens.numbers if n not in have]
    missing += [lit for lit in tokens.literals if not _literal_pattern(lit).search(text)]
    return missing


# ============================================================================================
# presence


def presence_text(m: Message) -> str:
    """What a message shows the model, as text to search: its text and tool-call arguments
    (string values of JSON arguments, so an edit's content reads as text, not escaped JSON)."""
    if m.kind == KIND_COMPACTION_BOUNDARY:
        return ""
    parts = [m.text] if m.text else []
    for call in m.tool_calls:
        args = call.arguments or ""
        try:
            value = json.loads(args) if args.lstrip().startswith(("{", "[")) else args
        except ValueError:
            value = args
        parts.extend(_strings(value))
    return "\n".join(p for p in parts if p and not p.isspace())


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


@dataclass
class Presence:
    """Facts x texts: the best supporting chunk (or span of a chunk) of each text, and near misses.

    ``score[f, t]`` is the best cosine of a chunk of text t, or of a sub-sentence span of one,
    that supports fact f (-inf when none does); ``chunk[f, t]`` is that chunk's index in
    ``chunked`` and ``span[(f, t)]``, when present, the (start, end) of the span inside the
    chunk's text that matched (absent: the whole chunk). ``near[f]`` maps a text to (cosine,
    chunk, missing tokens) for texts that are semantically close but support nothing: they fail
    the lexical check (missing tokens) or the polarity check (no missing tokens, the
    ``conflicts[f][t]`` says why); ``near_span`` is the span of such a near miss.
    ``cosine[f, t]`` is the best cosine over the text's chunks and spans whatever the checks
    say (-inf where not judged).
    """

    facts: list[str]
    tokens: list[LexicalTokens]
    chunked: ChunkedTexts
    score: np.ndarray  # float32 (F, T)
    chunk: np.ndarray  # int64 (F, T)
    near: list[dict[int, tuple[float, int, list[str]]]]
    threshold: float
    span: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    conflicts: list[dict[int, Conflict]] = field(default_factory=list)
    near_span: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    cosine: np.ndarray | None = None  # float32 (F, T)
    spans_scored: int = 0  # (fact, chunk) pairs whose sub-sentence spans were scored
    span_texts: int = 0  # unique span texts embedded (or read from the cache) for them

    def supporters(self, f: int) -> np.ndarray:
        return np.flatnonzero(self.score[f] >= self.threshold)

    def matched_text(self, f: int, t: int, *, near: bool = False) -> str:
        """The text that matched: the span of the chunk, or the whole chunk."""
        if near:
            c = self.near[f][t][1]
            sp = self.near_span.get((f, t))
        else:
            c = int(self.chunk[f, t])
            sp = self.span.get((f, t))
        text = self.chunked.chunks[c].text
        return text if sp is None else text[sp[0] : sp[1]]


def _neighbourhood(chunked: ChunkedTexts, texts: Sequence[str], c: int) -> str:
    """Chunk c and its neighbours in the same text (a fact's tokens may straddle a cut)."""
    owner = chunked.owner
    lo = c - 1 if c > 0 and owner[c - 1] == owner[c] else c
    hi = c + 1 if c + 1 < len(owner) and owner[c + 1] == owner[c] else c
    src = texts[int(owner[c])]
    return src[chunked.chunks[lo].start : chunked.chunks[hi].end]


def _scope(text: str, start: int, end: int) -> str:
    """The clauses of ``text`` a span lies in: a negator just outside a window of the fact's
    length still scopes over it ("Do not | rename any public function")."""
    lo, hi = start, end
    for a, b in clause_spans(text):
        if a < end and b > start:
            lo, hi = min(lo, a), max(hi, b)
    return text[lo:hi]


def score_presence(facts: Sequence[str], texts: Sequence[str], embedder: Embedder,
                   store: Store | None = None, *, threshold: float = DEFAULT_THRESHOLD,
                   skip: Sequence[bool] | None = None, mask: np.ndarray | None = None,
                   all_spans: bool = False, cache_enabled: bool = True, ttl_hours: float = 0,
                   progress: ProgressFn | None = None, stats: EmbedStats | None = None,
                   block: int = 4096) -> Presence:
    """Score every fact against every text (chunk and span level), applying the presence rule.

    Texts marked in ``skip`` are not chunked or embedded (they cannot matter); with ``mask``
    (facts x texts, bool) only the marked pairs are judged. Unique chunk texts are embedded
    once, in blocks (bounded memory), each block scored against the facts as one matrix
    product; then the sub-sentence spans of the few chunks that pass the span gate (see
    ``SPAN_FLOOR``), each unique span once. A chunk whose own text already holds the fact at
    ``threshold`` is not split (the verdict cannot change; its score stays the chunk's) unless
    ``all_spans`` asks for every chunk's best score (``calibrate``: the score at any
    threshold). The lexical and polarity checks run only on candidates at or above
    ``threshold``, best first, until one passes.
    """
    facts = list(facts)
    texts = list(texts)
    stats = stats if stats is not None else EmbedStats()
    toks = [lexical_tokens(f) for f in facts]
    use = texts if skip is None else ["" if s else t for t, s in zip(texts, skip)]
    chunked = chunk_many(use)
    F, C, T = len(facts), len(chunked), len(texts)
    # Unique chunk texts (chunk_many already shares chunk lists of identical texts); a chunk
    # identical to a fact reuses the fact's vector: no text is looked up or encoded twice.
    fact_vecs = embed_texts(facts, embedder, store, cache_enabled=cache_enabled, ttl_hours=ttl_hours,
                            stats=stats)
    is_fact = {f: i for i, f in enumerate(facts)}
    index: dict[str, int] = {}
    inverse = np.empty(C, dtype=np.int64)
    for k, ch in enumerate(chunked.chunks):
        j = is_fact.get(ch.text)
        inverse[k] = -1 - j if j is not None else index.setdefault(ch.text, len(index))
    uniq = list(index)
    U = len(uniq)
    # columns: the unique chunks, then the facts themselves
    sims_u = np.empty((F, U + F), dtype=np.float32)
    sims_u[:, U:] = similarity(fact_vecs, fact_vecs)
    inverse[inverse < 0] = U + (-1 - inverse[inverse < 0])
    done = 0
    if progress:
        progress(0, U)
    for lo in range(0, U, block):
        part = uniq[lo : lo + block]
        vecs = embed_texts(part, embedder, store, cache_enabled=cache_enabled, ttl_hours=ttl_hours,
                           stats=stats)
        sims_u[:, lo : lo + len(part)] = similarity(fact_vecs, vecs)
        done += len(part)
        if progress:
            progress(done, U)
    col_text = uniq + facts
    judged = None  # (F, U + F) bool: the (fact, unique chunk) pairs some masked text holds
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        judged = np.zeros((F, U + F), dtype=bool)
        for f, t in zip(*np.nonzero(mask)):
            lo_c, hi_c = np.searchsorted(chunked.owner, [t, t + 1])
            judged[f, inverse[lo_c:hi_c]] = True

    # Sub-sentence spans of the (fact, chunk) pairs past the gate, each unique span embedded once.
    gate = sims_u >= SPAN_FLOOR
    if judged is not None:
        gate &= judged
    fact_words = [word_count(f) for f in facts]
    fact_stems = [content_stems(f) for f in facts]
    fact_cut = [has_clause_cut(f) for f in facts]
    fact_edges = [edge_words(f) for f in facts]
    words_of: dict[int, int] = {}
    stems_of: dict[int, set[str]] = {}
    plans: list[tuple[int, int, list[tuple[int, int]]]] = []
    polarity_cache: dict[tuple[int, int], Conflict | None] = {}

    def chunk_conflict(f: int, k: int) -> Conflict | None:
        key = (f, k)
        if key not in polarity_cache:
            polarity_cache[key] = polarity_conflict(facts[f], col_text[k])
        return polarity_cache[key]

    def _holds(f: int, k: int) -> bool:
        # the chunk's own text passes both checks, so every occurrence does (its neighbourhood
        # only adds text for the lexical check)
        return not (toks[f] and missing_tokens(toks[f], col_text[k])) and chunk_conflict(f, k) is None

    for f, k in zip(*np.nonzero(gate)):
        f, k = int(f), int(k)
        if k >= U and k - U == f:
            continue  # the fact itself
        n = words_of.get(k)
        if n is None:
            n = words_of[k] = word_count(col_text[k])
        if n <= fact_words[f] or not fact_stems[f]:
            continue
        st = stems_of.get(k)
        if st is None:
            st = stems_of[k] = content_stems(col_text[k])
        if len(fact_stems[f] & st) < SPAN_OVERLAP * len(fact_stems[f]):
            continue
        if not all_spans and sims_u[f, k] >= threshold and _holds(f, k):
            continue  # the whole chunk holds the fact wherever it occurs: no span can change that
        spans = sub_spans(col_text[k], fact_words[f], cross_clauses=fact_cut[f], anchors=fact_edges[f])
        if spans:
            plans.append((f, k, spans))
    span_index: dict[str, int] = {}
    for f, k, spans in plans:
        for a, b in spans:
            span_index.setdefault(col_text[k][a:b], len(span_index))
    span_vecs = (embed_texts(list(span_index), embedder, store, cache_enabled=cache_enabled,
                             ttl_hours=ttl_hours, stats=stats) if span_index else None)
    # per (fact, column): its spans, best first, as (cosine, start, end)
    span_cands: dict[tuple[int, int], list[tuple[float, int, int]]] = {}
    span_max = np.full((F, U + F), -np.inf, dtype=np.float32)
    for f, k, spans in plans:
        idx = [span_index[col_text[k][a:b]] for a, b in spans]
        cos = span_vecs[idx] @ fact_vecs[f]
        cands = sorted(((float(s), a, b) for s, (a, b) in zip(cos, spans)), key=lambda x: -x[0])
        span_cands[(f, k)] = cands
        span_max[f, k] = cands[0][0]

    sims = sims_u[:, inverse] if C else np.zeros((F, 0), dtype=np.float32)
    best_cos = np.maximum(sims, span_max[:, inverse]) if C else sims

    # The checks, only where some candidate reaches the threshold (a few pairs).
    passed = np.full((F, C), -np.inf, dtype=np.float32)
    near: list[dict[int, tuple[float, int, list[str]]]] = [{} for _ in facts]
    conflicts: list[dict[int, Conflict]] = [{} for _ in facts]
    near_span: dict[tuple[int, int], tuple[int, int]] = {}
    chunk_span: dict[tuple[int, int], tuple[int, int]] = {}
    number_cache: dict[int, set[str]] = {}
    span_checks: dict[tuple[int, int, int, int], tuple[list[str], Conflict | None]] = {}
    candidate = best_cos >= threshold
    if mask is not None:
        candidate &= mask[:, chunked.owner]
    for f, c in zip(*np.nonzero(candidate)):
        f, c = int(f), int(c)
        k = int(inverse[c])
        chunk_text = col_text[k]
        cands: list[tuple[float, int, int]] = []
        if sims[f, c] >= threshold:
            cands.append((float(sims[f, c]), -1, -1))
        cands += [x for x in span_cands.get((f, k), ()) if x[0] >= threshold]
        cands.sort(key=lambda x: -x[0])
        fail: tuple[float, int, int, list[str], Conflict | None] | None = None
        for s, a, b in cands:
            if a < 0:  # the whole chunk: its tokens may straddle a cut into the next chunk
                miss: list[str] = []
                if toks[f]:
                    hood = _neighbourhood(chunked, use, c)
                    nums = None
                    if toks[f].numbers:
                        nums = number_cache.get(c)
                        if nums is None:
                            nums = number_cache[c] = text_numbers(hood)
                    miss = missing_tokens(toks[f], hood, nums)
                conflict = None if miss else chunk_conflict(f, k)
            else:
                key4 = (f, k, a, b)
                got = span_checks.get(key4)
                if got is None:
                    miss = missing_tokens(toks[f], chunk_text[a:b]) if toks[f] else []
                    conflict = None if miss else polarity_conflict(facts[f], _scope(chunk_text, a, b))
                    got = span_checks[key4] = (miss, conflict)
                miss, conflict = got
            if not miss and conflict is None:
                passed[f, c] = s
                if a >= 0:
                    chunk_span[(f, c)] = (a, b)
                break
            if fail is None:
                fail = (s, a, b, miss, conflict)
        if not np.isfinite(passed[f, c]) and fail is not None:
            t = int(chunked.owner[c])
            best = near[f].get(t)
            if best is None or fail[0] > best[0]:
                near[f][t] = (fail[0], c, fail[3])
                if fail[4] is not None:
                    conflicts[f][t] = fail[4]
                else:
                    conflicts[f].pop(t, None)
                if fail[1] >= 0:
                    near_span[(f, t)] = (fail[1], fail[2])
                else:
                    near_span.pop((f, t), None)
    score, arg = group_max(passed, chunked.owner, T)
    cosine, _ = group_max(best_cos, chunked.owner, T)
    for f in range(F):  # a text that supports the fact is no near miss
        for t in [t for t in near[f] if np.isfinite(score[f, t])]:
            del near[f][t]
            conflicts[f].pop(t, None)
            near_span.pop((f, t), None)
    span = {(f, int(t)): chunk_span[(f, int(arg[f, t]))] for f in range(F)
            for t in np.flatnonzero(np.isfinite(score[f])) if (f, int(arg[f, t])) in chunk_span}
    return Presence(facts, toks, chunked, score, arg, near, threshold, span=span, conflicts=conflicts,
                    near_span=near_span, cosine=cosine, spans_scored=len(plans), span_texts=len(span_index))


# ============================================================================================
# timelines


@dataclass
class FactTimeline:
    """One fact over a session's steps."""

    fact: str
    tokens: LexicalTokens
    state: np.ndarray  # int8 per step, index into STATES
    score: np.ndarray  # float32 per step, nan when no supporting text is in view
    source: np.ndarray  # int64 per step: seq of the best supporting message in view, -1 if none
    reason: list[str | None]  # per step: why at_risk
    first_appeared: int | None = None
    last_present: int | None = None
    first_at_risk: int | None = None
    disappeared_at: int | None = None
    cause: dict[str, Any] | None = None
    departures: list[dict[str, Any]] = field(default_factory=list)
    restated: list[dict[str, Any]] = field(default_factory=list)
    recollections: list[dict[str, Any]] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    near_misses: list[dict[str, Any]] = field(default_factory=list)

    def state_at(self, step: int) -> str:
        return STATES[int(self.state[step - 1])]

    @property
    def final_state(self) -> str | None:
        return STATES[int(self.state[-1])] if len(self.state) else None

    def to_dict(self, step_seqs: Sequence[int]) -> dict[str, Any]:
        timeline = []
        for k in range(len(self.state)):
            sc = self.score[k]
            src = int(self.source[k])
            timeline.append({
                "step": k + 1,
                "message_seq": int(step_seqs[k]),
                "state": STATES[int(self.state[k])],
                "score": None if np.isnan(sc) else round(float(sc), 4),
                "source_seq": src if src >= 0 else None,
                "reason": self.reason[k],
            })
        return {
            "fact": self.fact,
            "tokens": self.tokens.to_dict(),
            "first_appeared": self.first_appeared,
            "last_present": self.last_present,
            "first_at_risk": self.first_at_risk,
            "disappeared_at": self.disappeared_at,
            "cause": self.cause,
            "final_state": self.final_state,
            "departures": self.departures,
            "restated": self.restated,
            "recollections": self.recollections,
            "sources": self.sources,
            "near_misses": self.near_misses,
            "timeline": timeline,
        }


@dataclass
class FactReport:
    facts: list[FactTimeline]
    step_seqs: list[int]
    threshold: float
    model: str
    policy: str
    embedding: dict[str, str]
    stats: EmbedStats
    middle_min_tokens: int
    middle_band: tuple[float, float]
    spans: dict[str, Any] = field(default_factory=dict)  # what span scoring cost (score_presence)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "policy": self.policy,
            "threshold": self.threshold,
            "embedding": self.embedding,
            "middle": {"min_tokens": self.middle_min_tokens, "band": list(self.middle_band)},
            "steps": len(self.step_seqs),
            "facts": [f.to_dict(self.step_seqs) for f in self.facts],
            "embed_stats": self.stats.to_dict(),
            "spans": self.spans,
        }


def _cost_fn(inp: Any) -> Callable[[int, int], int]:
    from ..replay.policies import CLEARED, KEPT, OUTSIDE_LOCAL

    pre = [k == KIND_CLEARED_TOOL_RESULT for k in inp.kinds]
    tokens = inp.tokens

    def cost(i: int, state: int) -> int:
        if state in (KEPT, OUTSIDE_LOCAL):
            return int(tokens[i])
        if state == CLEARED:
            return int(tokens[i]) if pre[i] else min(int(tokens[i]), inp.placeholder_tokens)
        return 0

    return cost


class _Positions:
    """Token offsets of messages within each step's window, for the "middle" test.

    ``offsets(seqs)`` gives, for each asked message, the in-window tokens before it at every
    step: the join/transition deltas of earlier messages accumulated, without an n x m pass.
    Synthetic content (a simulated compaction's summary) is counted at the front.
    """

    def __init__(self, inp: Any, timeline: Timeline) -> None:
        from ..replay.policies import KEPT

        m = len(timeline.steps)
        cost = _cost_fn(inp)
        seqs, steps, deltas = [], [], []
        for j in range(inp.n):
            join = int(timeline.joins[j])
            if join == 0:
                continue
            prev = cost(j, KEPT)
            seqs.append(j)
            steps.append(join)
            deltas.append(prev)
            for step, state in timeline.changes.get(j, []):
                now = cost(j, state)
                if now != prev:
                    seqs.append(j)
                    steps.append(step)
                    deltas.append(now - prev)
                prev = now
        self.seq = np.asarray(seqs, dtype=np.int64)
        self.step = np.asarray(steps, dtype=np.int64)
        self.delta = np.asarray(deltas, dtype=np.int64)
        per_step = np.zeros(m + 1, dtype=np.int64)
        np.add.at(per_step, self.step, self.delta)
        self.in_window = np.cumsum(per_step)[1:]  # tokens of messages in the window, per step
        results = timeline.results
        window = np.array([r.window_tokens for r in results], dtype=np.int64)
        fixed = inp.fixed[: m] if inp.fixed is not None else np.zeros(m, dtype=np.int64)
        self.extra = np.maximum(window - self.in_window - fixed, 0)
        self.window = window
        self.m = m

    def offsets(self, seqs: Sequence[int]) -> np.ndarray:
        """(len(seqs), m) in-window tokens before each message, plus the synthetic front."""
        seqs = np.asarray(seqs, dtype=np.int64)
        order = np.argsort(seqs, kind="stable")
        ss = seqs[order]
        # a transition of message j shifts every asked message after j
        row = np.searchsorted(ss, self.seq, side="right")
        acc = np.zeros((len(ss) + 1, self.m + 1), dtype=np.int64)
        np.add.at(acc, (row, self.step), self.delta)
        acc = np.cumsum(np.cumsum(acc, axis=0), axis=1)[: len(ss), 1:]
        out = np.empty_like(acc)
        out[order] = acc
        return out + self.extra[None, :]


def track_facts(
    prepared: Prepared,
    facts: Sequence[str],
    embedder: Embedder,
    store: Store | None = None,
    *,
    timeline: Timeline | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    middle_min_tokens: int = MIDDLE_MIN_TOKENS,
    middle_band: tuple[float, float] = MIDDLE_BAND,
    cache_enabled: bool = True,
    ttl_hours: float = 0,
    progress: ProgressFn | None = None,
    stats: EmbedStats | None = None,
) -> FactReport:
    """Each fact's state at every step of a replay (see the module docstring for the rules)."""
    from ..replay.policies import CLEARED, KEPT, OUTSIDE_LOCAL, SUMMARIZED
    from ..replay import Timeline as _Timeline

    if not facts:
        raise UsageError("no facts to track",
                         hint="give --fact TEXT, --facts-file FILE or a `facts:` list in the config; "
                              "`ctxf facts suggest SESSION` proposes some")
    lo_band, hi_band = middle_band
    if not 0 <= lo_band <= hi_band <= 1:
        raise UsageError(f"middle_band must be 0 <= lo <= hi <= 1, got {middle_band!r}")
    if timeline is None:
        results, _ = prepared.run()
        timeline = _Timeline.from_results(prepared.inp, results)
    inp = prepared.inp
    msgs = prepared.messages
    m = len(timeline.steps)
    step_seqs = [int(s) for s in timeline.steps]
    step_of_seq = {s: k + 1 for k, s in enumerate(step_seqs)}
    stats = stats if stats is not None else EmbedStats()

    # Only messages that enter some window, or that make a call (recollection), can matter.
    texts = [presence_text(sm.message) for sm in msgs]
    skip = [not (int(timeline.joins[i]) > 0 or i in step_of_seq) for i in range(len(msgs))]
    pres = score_presence(facts, texts, embedder, store, threshold=threshold, skip=skip,
                          cache_enabled=cache_enabled, ttl_hours=ttl_hours, progress=progress,
                          stats=stats)
    simulated = prepared.policy != "recorded"
    precleared = {i for i, sm in enumerate(msgs) if sm.message.kind == KIND_CLEARED_TOOL_RESULT}
    window = np.array([r.window_tokens for r in timeline.results], dtype=np.int64)
    long_steps = window >= middle_min_tokens
    positions = _Positions(inp, timeline) if long_steps.any() else None

    out: list[FactTimeline] = []
    for f, fact in enumerate(facts):
        sup = [int(i) for i in pres.supporters(f)]
        summaries = [i for i in sup if msgs[i].message.kind == KIND_COMPACTION_SUMMARY]
        sources = [i for i in sup if msgs[i].message.kind != KIND_COMPACTION_SUMMARY]
        state_rows = {i: timeline.states(i) for i in sup}
        sc = {i: float(pres.score[f, i]) for i in sup}

        best = np.full(m, -np.inf, dtype=np.float32)
        best_src = np.full(m, -1, dtype=np.int64)
        kept_ok = np.zeros(m, dtype=bool)
        kept_mid = np.zeros(m, dtype=bool)
        outside = np.zeros(m, dtype=bool)
        in_view: dict[int, np.ndarray] = {}

        mid_rows: dict[int, np.ndarray] = {}
        if positions is not None and sources:
            cand = [i for i in sources if np.any((state_rows[i] == KEPT) & long_steps)]
            if cand:
                offs = positions.offsets(cand)
                total = positions.extra + positions.in_window
                for row, i in zip(offs, cand):
                    ch = pres.chunked.chunks[int(pres.chunk[f, i])]
                    inside = ch.start / max(len(texts[i]), 1)
                    pos = row + inside * int(inp.tokens[i])
                    rel = np.divide(pos, total, out=np.zeros(m), where=total > 0)
                    mid_rows[i] = long_steps & (rel >= lo_band) & (rel <= hi_band)

        for i in sources:
            st = state_rows[i]
            kept = st == KEPT
            if i in precleared:
                kept = kept | (st == CLEARED)
            out_l = st == OUTSIDE_LOCAL
            view = kept | out_l
            in_view[i] = view
            mid = mid_rows.get(i)
            if mid is not None:
                kept_ok |= kept & ~mid
                kept_mid |= kept & mid
            else:
                kept_ok |= kept
            outside |= out_l
            better = view & (sc[i] > best)
            best[better] = sc[i]
            best_src[better] = i
        summary_view = np.zeros(m, dtype=bool)
        summary_best = np.full(m, -np.inf, dtype=np.float32)
        summary_src = np.full(m, -1, dtype=np.int64)
        for i in summaries:
            st = state_rows[i]
            view = (st == KEPT) | (st == OUTSIDE_LOCAL)
            in_view[i] = view
            summary_view |= view
            better = view & (sc[i] > summary_best)
            summary_best[better] = sc[i]
            summary_src[better] = i
        assumed = np.zeros(m, dtype=bool)
        if simulated:
            for i in sources:
                assumed |= state_rows[i] == SUMMARIZED

        state = np.full(m, NOT_YET, dtype=np.int8)
        present = kept_ok
        at_risk = ~present & (kept_mid | outside)
        summarized = ~present & ~at_risk & (summary_view | assumed)
        has = present | at_risk | summarized
        seen_before = np.concatenate([[False], np.cumsum(has)[:-1] > 0]) if m else np.zeros(0, bool)
        state[present] = PRESENT
        state[at_risk] = AT_RISK
        state[summarized] = SUMMARIZED_F
        state[~has & seen_before] = GONE
        reason: list[str | None] = [None] * m
        for k in np.flatnonzero(at_risk).tolist():
            reason[k] = REASON_MIDDLE if kept_mid[k] else REASON_OUTSIDE_LOCAL
        score = np.where(present | at_risk, best, np.nan).astype(np.float32)
        source = np.where(present | at_risk, best_src, -1)
        by_summary = summarized & summary_view
        score[by_summary] = summary_best[by_summary]
        source[by_summary] = summary_src[by_summary]

        ft = FactTimeline(fact=fact, tokens=pres.tokens[f], state=state, score=score, source=source,
                          reason=reason)
        idx = np.flatnonzero(has)
        if idx.size:
            ft.first_appeared = int(idx[0]) + 1
        idx = np.flatnonzero(present | at_risk)
        if idx.size:
            ft.last_present = int(idx[-1]) + 1
        idx = np.flatnonzero(at_risk)
        if idx.size:
            ft.first_at_risk = int(idx[0]) + 1
        _departures(ft, prepared, timeline, msgs, in_view, state_rows)
        if ft.departures:
            ft.disappeared_at = ft.departures[0]["step"]
            ft.cause = ft.departures[0]["cause"]
        # Restated: a new source joins while the fact is gone or only summarized.
        for i in sources:
            j = int(timeline.joins[i])
            if j >= 2 and state[j - 2] in (GONE, SUMMARIZED_F) and state[j - 1] in (PRESENT, AT_RISK):
                ft.restated.append({"step": j, "seq": i, "role": msgs[i].message.role,
                                    "score": round(sc[i], 4)})
        ft.restated.sort(key=lambda r: (r["step"], r["seq"]))
        # Recollection: the model states the fact at a step whose window no longer holds it.
        for i in sup:
            k = step_of_seq.get(i)
            if k is not None and state[k - 1] == GONE:
                ft.recollections.append({"step": k, "seq": i, "score": round(sc[i], 4)})
        ft.sources = [{"seq": i, "role": msgs[i].message.role, "kind": msgs[i].message.kind,
                       "joins_step": int(timeline.joins[i]) or None, "score": round(sc[i], 4),
                       "chunk": pres.chunked.chunks[int(pres.chunk[f, i])].text,
                       "span": pres.matched_text(f, i)}
                      for i in sup]
        near = sorted(pres.near[f].items(), key=lambda kv: -kv[1][0])
        ft.near_misses = []
        for t, (s, c, miss) in near[:10]:
            conflict = pres.conflicts[f].get(t)
            ft.near_misses.append({
                "seq": t, "role": msgs[t].message.role, "joins_step": int(timeline.joins[t]) or None,
                "score": round(s, 4), "missing": miss,
                "polarity": conflict.to_dict() if conflict is not None else None,
                "reason": conflict.reason if conflict is not None else "missing " + ", ".join(miss),
                "chunk": pres.chunked.chunks[c].text, "span": pres.matched_text(f, t, near=True)})
        out.append(ft)
    return FactReport(
        facts=out, step_seqs=step_seqs, threshold=threshold, model=prepared.spec.name,
        policy=prepared.policy,
        embedding={"model": embedder.name, "revision": str(embedder.revision)},
        stats=stats, middle_min_tokens=middle_min_tokens, middle_band=(lo_band, hi_band),
        spans={"pairs_split": pres.spans_scored, "span_texts": pres.span_texts, "floor": SPAN_FLOOR,
               "overlap": SPAN_OVERLAP},
    )


_CAUSE_OF_STATE = {"evicted": "eviction", "cleared": "clearing", "summarized": "compaction"}


def _departures(ft: FactTimeline, prepared: Prepared, timeline: Timeline, msgs: list,
                in_view: dict[int, np.ndarray], state_rows: dict[int, np.ndarray]) -> None:
    """Each step where the fact lost ground (present/at_risk -> summarized/gone, or
    summarized -> gone), with the policy event and the messages whose change caused it."""
    from ..replay.policies import STATE_NAMES

    rank = {PRESENT: 2, AT_RISK: 2, SUMMARIZED_F: 1, GONE: 0, NOT_YET: 0}
    st = ft.state
    for k in range(1, len(st)):
        before, after = int(st[k - 1]), int(st[k])
        if rank[after] >= rank[before]:
            continue
        removed = [i for i, v in in_view.items() if v[k - 1] and not v[k]]
        by_type: dict[str, list[int]] = {}
        for i in sorted(removed):
            name = STATE_NAMES[int(state_rows[i][k])]
            by_type.setdefault(_CAUSE_OF_STATE.get(name, name), []).append(i)
        events = timeline.results[k].events
        cause = None
        for kind in ("compaction", "eviction", "clearing"):
            if kind in by_type:
                ev = next((e for e in events if e.get("type") == kind), None)
                cause = {
                    "type": kind,
                    "policy": (ev or {}).get("policy", prepared.policy),
                    "recorded": bool((ev or {}).get("recorded", prepared.policy == "recorded")),
                    "seqs": by_type[kind],
                    "roles": [msgs[i].message.role for i in by_type[kind]],
                    "event": ev,
                }
                break
        if cause is None and by_type:  # e.g. a source outside the local window, then evicted
            kind, seqs = next(iter(by_type.items()))
            cause = {"type": kind, "policy": prepared.policy, "recorded": prepared.policy == "recorded",
                     "seqs": seqs, "roles": [msgs[i].message.role for i in seqs], "event": None}
        ft.departures.append({"step": k + 1, "from": STATES[before], "to": STATES[after], "cause": cause})


# ============================================================================================
# suggestions

_CONSTRAINT = re.compile(
    r"\b(must|never|always|only|at most|at least|no more than|no less than|do not|don't|"
    r"mustn't|shall|should not|shouldn't|required?|forbidden|prohibited|exactly|limit(?:ed)?|"
    r"maximum|minimum|max|min|budget|deadline|before|after|unless|without|avoid|keep|ensure|"
    r"make sure|not allowed|cannot|can't|important)\b",
    re.I,
)
_STRONG = {"must", "never", "always", "only", "at most", "at least", "no more than", "do not", "don't",
           "mustn't", "forbidden", "prohibited", "exactly", "not allowed", "cannot", "can't"}
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|[a-z][.)])\s+")
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'`(])")


@dataclass(frozen=True)
class Suggestion:
    text: str
    seq: int
    role: str
    score: float
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "seq": self.seq, "role": self.role, "score": self.score,
                "reasons": list(self.reasons)}


def _sentences(text: str) -> Iterable[str]:
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip()
        if not line:
            continue
        for s in _SENT_SPLIT.split(line):
            s = s.strip()
            if s:
                yield s


def suggest_facts(messages: Sequence[Any], *, limit: int = 20) -> list[Suggestion]:
    """Constraint-like sentences from the system prompt(s) and the first user message.

    A sentence scores for constraint words (must, never, always, only, at most, ...), numbers,
    identifiers and quoted strings; sentences with none are not proposed. Best first, then in
    order of appearance; at most ``limit``.
    """
    picked: list[tuple[int, str, str]] = []
    for sm in messages:
        m = sm.message if hasattr(sm, "message") else sm
        seq = getattr(sm, "seq", len(picked))
        if m.kind != "message":
            continue
        if m.role in ("system", "developer"):
            picked.append((seq, m.role, m.text or ""))
        elif m.role == "user":
            picked.append((seq, m.role, m.text or ""))
            break
        else:
            break
    out: list[tuple[float, int, Suggestion]] = []
    seen: set[str] = set()
    order = 0
    for seq, role, text in picked:
        for s in _sentences(text):
            words = s.split()
            if len(words) < 3 or len(s) > 300:
                continue
            key = s.lower()
            if key in seen:
                continue
            seen.add(key)
            reasons: list[str] = []
            score = 0.0
            found = {w.lower() for w in _CONSTRAINT.findall(s)}
            strong = sorted(found & _STRONG)
            weak = sorted(found - _STRONG)
            if strong:
                score += 2.0 + 0.5 * (len(strong) - 1)
                reasons += strong
            if weak:
                score += 0.5 * len(weak)
                reasons += weak
            tok = lexical_tokens(s)
            if tok.numbers:
                score += 1.0
                reasons.append("numbers")
            if tok.literals:
                score += 1.0
                reasons.append("names")
            if score < 1.0:
                continue
            if role in ("system", "developer"):
                score += 0.25
            out.append((score, order, Suggestion(s, seq, role, round(score, 2), tuple(reasons))))
            order += 1
    out.sort(key=lambda x: (-x[0], x[1]))
    return [s for _, _, s in out[:limit]]


# ============================================================================================
# calibration


@dataclass(frozen=True)
class Pair:
    fact: str
    text: str
    present: bool
    subset: str = ""  # a label to report separately (``negation``, ``compound``, ...)


_YES = {"yes", "y", "true", "1", "present", "t"}
_NO = {"no", "n", "false", "0", "absent", "f"}


def _truth(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    s = str(value).strip().lower()
    if s in _YES:
        return True
    if s in _NO:
        return False
    raise InputError(f"`present` must be yes/no (or true/false, 1/0), got {value!r}", where=where)


def _pair(row: Any, where: str) -> Pair:
    if not isinstance(row, dict):
        raise InputError("each pair must be a mapping with fact, text, present", where=where)
    missing = [k for k in ("fact", "text", "present") if k not in row or row[k] is None]
    if missing:
        raise InputError(f"missing {', '.join(missing)}", where=where, hint="each pair needs fact, text, present")
    subset = row.get("subset")
    return Pair(_clean_fact(row["fact"], where), str(row["text"]), _truth(row["present"], where),
                "" if subset is None else str(subset).strip())


def load_pairs(path: str | Path) -> list[Pair]:
    """Labelled pairs from CSV/TSV (a header with fact, text, present), JSONL, JSON or YAML."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the pairs file: {e}", where=str(p)) from None
    suffix = p.suffix.lower()
    rows: list[tuple[Any, str]] = []
    if suffix in (".csv", ".tsv"):
        reader = csv.DictReader(io.StringIO(text), delimiter="\t" if suffix == ".tsv" else ",")
        fields = {f.strip().lower() for f in reader.fieldnames or []}
        if not {"fact", "text", "present"} <= fields:
            raise InputError(f"the header must name fact, text, present; got {sorted(fields)}", where=f"{p}:1")
        for n, row in enumerate(reader, start=2):
            rows.append(({(k or "").strip().lower(): v for k, v in row.items()}, f"{p}:{n}"))
    elif suffix == ".jsonl":
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append((json.loads(line), f"{p}:{n}"))
                except ValueError as e:
                    raise InputError(f"invalid JSON: {e}", where=f"{p}:{n}") from None
    elif suffix in (".json", ".yaml", ".yml"):
        try:
            data = yaml.safe_load(text)  # JSON is YAML
        except yaml.YAMLError as e:
            raise InputError(f"invalid YAML/JSON: {e}", where=str(p)) from None
        if isinstance(data, dict) and set(data) == {"pairs"}:
            data = data["pairs"]
        if not isinstance(data, list):
            raise InputError("expected a list of pairs (or `pairs: [...]`)", where=str(p))
        rows = [(r, f"{p}: pairs[{i}]") for i, r in enumerate(data)]
    else:
        raise UsageError(f"cannot read pairs from {p.name!r}", hint="use .csv, .tsv, .jsonl, .json or .yaml")
    pairs = [_pair(r, w) for r, w in rows]
    if not pairs:
        raise InputError("the pairs file holds no pairs", where=str(p))
    return pairs


def calibration_thresholds() -> list[float]:
    return [round(0.30 + 0.05 * i, 2) for i in range(14)]  # 0.30 .. 0.95


# Subsets of a pairs file (its optional ``subset`` column) are reported at these thresholds and
# the config's current one: 0.6 is the default, 0.75 a stricter setting users try.
SUBSET_THRESHOLDS = (0.6, 0.75)


def _metrics(score: np.ndarray, truth: np.ndarray, th: float) -> dict[str, Any]:
    pred = score >= th
    tp = int(np.sum(pred & truth))
    fp = int(np.sum(pred & ~truth))
    fn = int(np.sum(~pred & truth))
    tn = int(np.sum(~pred & ~truth))
    prec = tp / (tp + fp) if tp + fp else 1.0
    rec = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return {"threshold": th, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
            "precision": round(prec, 4), "recall": round(rec, 4), "f1": round(f1, 4)}


def calibrate(pairs: Sequence[Pair], embedder: Embedder, store: Store | None = None, *,
              thresholds: Sequence[float] | None = None, current: float | None = None,
              cache_enabled: bool = True, stats: EmbedStats | None = None) -> dict[str, Any]:
    """Precision/recall of the presence rule per threshold on labelled pairs, and a recommendation.

    Each pair is scored by ``score_presence``, the rule ``ctxf facts`` applies: the best cosine
    over the text's chunks and their sub-sentence spans among those that pass the lexical and
    the polarity checks (a pair with none is absent at every threshold); only each pair's own
    (fact, text) is judged, never the cross product. The recommendation is the threshold with
    the best F1; among ties, the middle one of the tied run (most margin). Pairs carrying a
    ``subset`` are also reported per subset at ``SUBSET_THRESHOLDS`` and ``current``.
    """
    thresholds = list(thresholds or calibration_thresholds())
    facts = list(dict.fromkeys(p.fact for p in pairs))
    texts = list(dict.fromkeys(p.text for p in pairs))
    stats = stats if stats is not None else EmbedStats()
    fi = {f: i for i, f in enumerate(facts)}
    ti = {t: i for i, t in enumerate(texts)}
    mask = np.zeros((len(facts), len(texts)), dtype=bool)
    for p in pairs:
        mask[fi[p.fact], ti[p.text]] = True
    # every candidate of a pair is checked (threshold -inf): the score a pair would reach at any
    # threshold of the table
    pres = score_presence(facts, texts, embedder, store, threshold=-np.inf, mask=mask, all_spans=True,
                          cache_enabled=cache_enabled, stats=stats)
    scored = []
    for p in pairs:
        f, t = fi[p.fact], ti[p.text]
        best = float(pres.score[f, t])
        ok = bool(np.isfinite(best))
        cos = float(pres.cosine[f, t]) if pres.cosine is not None else -np.inf
        nm = None if ok else pres.near[f].get(t)
        conflict = None if ok else pres.conflicts[f].get(t)
        missing = nm[2] if nm else []
        matched = pres.matched_text(f, t) if ok else (pres.matched_text(f, t, near=True) if nm else None)
        scored.append({"fact": p.fact, "text": p.text, "present": p.present, "subset": p.subset,
                       "score": round(best, 4) if ok else None,
                       "cosine": round(cos, 4) if np.isfinite(cos) else None,
                       "lexical_ok": not missing, "missing": missing,
                       "polarity_ok": conflict is None,
                       "polarity": conflict.to_dict() if conflict is not None else None,
                       "span": matched})
    truth = np.array([p.present for p in pairs], dtype=bool)
    score = np.array([s["score"] if s["score"] is not None else -np.inf for s in scored], dtype=np.float64)
    table = [_metrics(score, truth, th) for th in thresholds]
    best_f1 = max(r["f1"] for r in table)
    tied = [i for i, r in enumerate(table) if r["f1"] == best_f1]
    # the longest consecutive run of tied thresholds, then its middle
    runs: list[list[int]] = []
    for i in tied:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    run = max(runs, key=len)
    rec_row = table[run[(len(run) - 1) // 2]]
    at = list(SUBSET_THRESHOLDS)
    if current is not None and all(abs(current - x) > 1e-9 for x in at):
        at.append(current)
    subsets = []
    names = list(dict.fromkeys(p.subset for p in pairs))
    if names != [""]:
        for name in names:
            sel = np.array([p.subset == name for p in pairs], dtype=bool)
            subsets.append({"subset": name or "base", "pairs": int(sel.sum()), "positives": int(truth[sel].sum()),
                            "at": [_metrics(score[sel], truth[sel], th) for th in at]})
        subsets.append({"subset": "all", "pairs": len(pairs), "positives": int(truth.sum()),
                        "at": [_metrics(score, truth, th) for th in at]})
    return {
        "version": FACTS_VERSION,
        "embedding": {"model": embedder.name, "revision": str(embedder.revision)},
        "pairs": len(pairs),
        "positives": int(truth.sum()),
        "lexical_failures": int(sum(1 for s in scored if not s["lexical_ok"])),
        "polarity_failures": int(sum(1 for s in scored if not s["polarity_ok"])),
        "spans": {"pairs_split": pres.spans_scored, "span_texts": pres.span_texts,
                  "floor": SPAN_FLOOR, "overlap": SPAN_OVERLAP},
        "table": table,
        "recommended": rec_row,
        "current": _metrics(score, truth, current) if current is not None else None,
        "subsets": subsets,
        "scores": scored,
    }
