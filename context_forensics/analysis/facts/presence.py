"""Fact presence: which texts support a fact, at chunk and sub-sentence span level.

Presence rule (``score_presence``): a text supports a fact when it holds the fact verbatim
(``matching.verbatim``: the fact's words in order, whole, up to case, line breaks, spacing and
punctuation between them, and its clauses said the same way round; looked up in the whole text
before anything is embedded, so a sentence of a task statement wrapped over lines, which
chunking cuts apart, is found), or when one of its chunks (``embed.chunk_text``,
sentence-sized), or a sub-sentence span of one,

1. is semantically close: cosine(fact, chunk or span) >= ``threshold`` (``fact_presence_cosine``).
   A chunk with more words than the fact that could hold it (cosine >= ``SPAN_FLOOR`` and at
   least ``SPAN_OVERLAP`` of the fact's content words) is also scored on its clauses and on the
   windows of the fact's length that start with its first word or end with its last
   (``embed.sub_spans``), so a fact stated verbatim inside a compound sentence scores ~1
   whatever surrounds it; the best candidate that passes 2, 3 and 4 counts (a chunk that
   already holds the fact as a whole is not split: the verdict cannot change);
2. passes the lexical check, for facts that carry lexical tokens: every number, identifier and
   quoted string of the fact (``lexical_tokens``) appears in the span that matched (for a whole
   chunk: in that chunk or the chunk next to it in the same text). A budget of "4,500" is not
   present in a chunk saying "3,000", however close the embeddings are;
3. passes the polarity check (``polarity.polarity_conflict``, on the clauses the candidate lies
   in): "You may rename any public function" does not hold "Do not rename any public function",
   nor "may" a "must";
4. passes the statement check, for a fact of several statements or a ban
   (``clauses.dropped_clause``, on the text the lexical check reads): it carries every statement
   of the fact, its bans in a negated clause. A compaction summary line "SQLite migrations
   generated with `mix ash_sqlite.generate_migrations`" (0.76) keeps the topic of "Use Ash
   resources and SQLite migrations; no ad-hoc SQL outside migrations." and drops the ban.

A close text failing 2, 3 or 4 is a near miss that says why. A verbatim occurrence needs none of
them (its clauses are the fact's); the text's score is then the better of the occurrence's own
cosine and a passing chunk's or span's.

Limits: cosine similarity sees topic, not negation or intent; the polarity check catches the
flips it can see (negators, must vs may, an action against a ban: "Pushing. git push origin main"
scores 0.63 against "Never push directly to the main branch; open a pull request instead" and
is turned down as "polarity differs: 'Never push' vs 'push'"), not antonyms ("keep" vs "delete")
or a dropped condition. A loose paraphrase can score below the threshold ("no longer than 300
words each" 0.58 against "Keep every reply to the user under 300 words"). ``ctxf calibrate``
measures all of it on labelled pairs, per subset (``negation``, ``compound``, ``statements``,
``verbatim``) where the pairs file has a ``subset`` column.

Cost: each unique chunk is embedded once per model (and cached by content hash), the facts are
scored against every chunk as one matrix product, reduced per message with ``group_max``; spans
only for the few chunks past the span gate, each unique span once (cached like chunks); only the
few supporting messages are expanded over the steps (``Timeline.states``). Nothing is encoded per
step, and a warm run encodes nothing but new facts (and their spans). The verbatim lookup reads
each text holding a fact's longest word as words once (1.1-1.4 s over the whole corpus with its
suggested and 12 hand-written facts); a verbatim occurrence that differs from the fact in layout
is embedded once to score it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ...embed import (
    ChunkedTexts,
    EmbedStats,
    ProgressFn,
    chunk_many,
    edge_words,
    embed_texts,
    group_max,
    has_clause_cut,
    similarity,
    sub_spans,
    word_count,
)
from ...embed.progress import part, steps_only
from ...matching.clauses import Statement, dropped_clause, needs_check
from ...matching.lexical import LexicalTokens, lexical_tokens, missing_tokens, text_numbers
from ...matching.polarity import Conflict, clause_scope, content_stems, polarity_conflict
from ...matching.verbatim import Words, fact_key, find_verbatim, screen, words
from .prefilter import _neighbourhood  # chunk c and its neighbours in the same text

if TYPE_CHECKING:  # pragma: no cover
    from ...embed import Embedder
    from ...store.db import Store

# The version of the JSON reports built on the presence rule (``ctxf facts``, ``ctxf calibrate``).
FACTS_VERSION = 1

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


@dataclass
class Presence:
    """Facts x texts: the best supporting chunk (or span of a chunk) of each text, and near misses.

    ``score[f, t]`` is the best cosine of a chunk of text t, or of a sub-sentence span of one,
    that supports fact f (-inf when none does); ``chunk[f, t]`` is that chunk's index in
    ``chunked`` and ``span[(f, t)]``, when present, the (start, end) of the span inside the
    chunk's text that matched (absent: the whole chunk). ``near[f]`` maps a text to (cosine,
    chunk, missing tokens) for texts that are semantically close but support nothing: they fail
    the lexical check (missing tokens), the polarity check (no missing tokens, the
    ``conflicts[f][t]`` says why) or carry only some statements of the fact (``dropped[f][t]``,
    the first one the text drops: ``clauses.dropped_clause``); ``near_span`` is the span of such
    a near miss. ``cosine[f, t]`` is the best cosine over the text's chunks and spans whatever
    the checks say (-inf where not judged). ``verbatim[(f, t)]`` is (start, end, matched text,
    shown) of an exact or normalized occurrence of the fact in text t (``matching.verbatim``):
    the text supports the fact whatever its cosine; ``score[f, t]`` is the better of that
    text's cosine and a passing chunk's or span's, measured like any other, and ``shown`` says
    the occurrence is the better one (``matched_text`` returns it).
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
    # which method ran: {"method": "exhaustive" | "prefiltered", "chunks": unique chunk texts,
    # "encoded": those embedded (or read from the cache), ...} (``prefilter.EncodePlan.to_dict``)
    plan: dict = field(default_factory=dict)
    dropped: list[dict[int, Statement]] = field(default_factory=list)
    verbatim: dict[tuple[int, int], tuple[int, int, str, bool]] = field(default_factory=dict)

    def supporters(self, f: int) -> np.ndarray:
        """The texts that support fact ``f`` (indices, in order): at or above the threshold after
        the checks, or holding the fact verbatim."""
        hit = self.score[f] >= self.threshold
        for (g, t) in self.verbatim:
            if g == f:
                hit[t] = True
        return np.flatnonzero(hit)

    def matched_text(self, f: int, t: int, *, near: bool = False) -> str:
        """The text that matched: the span of the chunk, the whole chunk, or the fact's verbatim
        occurrence."""
        if not near and self.verbatim.get((f, t), (0, 0, "", False))[3]:
            return self.verbatim[(f, t)][2]
        if near:
            c = self.near[f][t][1]
            sp = self.near_span.get((f, t))
        else:
            c = int(self.chunk[f, t])
            sp = self.span.get((f, t))
        text = self.chunked.chunks[c].text
        return text if sp is None else text[sp[0] : sp[1]]


def _verbatim(facts: list[str], texts: list[str], chunked: ChunkedTexts,
              mask: np.ndarray | None) -> dict[tuple[int, int], tuple[int, int, int]]:
    """(fact, text) -> (start, end, chunk) of each fact's verbatim occurrence in each text
    (``matching.verbatim``; text coordinates, and the text's chunk the occurrence starts in).
    Each distinct text is read as words once."""
    out: dict[tuple[int, int], tuple[int, int, int]] = {}
    read: dict[str, Words] = {}
    for t, text in enumerate(texts):
        if not text:
            continue
        fs = range(len(facts)) if mask is None else np.flatnonzero(mask[:, t]).tolist()
        if not fs:
            continue
        lo_c, hi_c = np.searchsorted(chunked.owner, [t, t + 1])
        if lo_c == hi_c:
            continue  # nothing of it is judged (only noise)
        low = screen(text)
        fs = [f for f in fs if fact_key(facts[f]) in low]
        if not fs:
            continue
        w = read.get(text)
        if w is None:
            w = read[text] = words(text)
        for f in fs:
            sp = find_verbatim(facts[f], text, w)
            if sp is not None:
                c = next((c for c in range(lo_c, hi_c) if chunked.chunks[c].end > sp[0]), hi_c - 1)
                out[(f, t)] = (sp[0], sp[1], int(c))
    return out


def score_presence(facts: Sequence[str], texts: Sequence[str], embedder: Embedder,
                   store: Store | None = None, *, threshold: float = DEFAULT_THRESHOLD,
                   skip: Sequence[bool] | None = None, mask: np.ndarray | None = None,
                   all_spans: bool = False, cache_enabled: bool = True, ttl_hours: float = 0,
                   progress: ProgressFn | None = None, stats: EmbedStats | None = None,
                   block: int = 4096, prefilter: bool = False) -> Presence:
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

    With ``prefilter``, only the chunks that could support some fact (``prefilter.plan_encoding``:
    an exact lexical gate for facts with numbers or names, a measured stem / static-embedding gate
    for the others) are embedded; the others score -inf (not judged), so the verdicts are those of
    the full method as long as the gate keeps every chunk that passes (bench/facts_recall.py
    measures it); near misses are then searched among the encoded chunks only
    (``Presence.plan``).
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
    # the facts' few texts are not counted, but a model load they cause is shown
    fact_vecs = embed_texts(facts, embedder, store, cache_enabled=cache_enabled, ttl_hours=ttl_hours,
                            stats=stats, progress=steps_only(progress))
    # a fact copied into a text, exactly or up to layout, is in it: looked up before any embedding
    verbatim = _verbatim(facts, use, chunked, None if mask is None else np.asarray(mask, dtype=bool))
    # facts of several statements, bans, restrictions and sentences: each must be carried (``clauses``)
    stated = [needs_check(f) for f in facts]
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
    enc_plan = None
    enc_cols = np.arange(U)
    if prefilter:
        from .prefilter import plan_encoding

        enc_plan = plan_encoding(facts, toks, chunked, use, inverse, uniq,
                                 embedder_name=str(getattr(embedder, "name", "")), threshold=threshold,
                                 overlap=SPAN_OVERLAP,
                                 mask=None if mask is None else np.asarray(mask, dtype=bool))
        enc_cols = np.flatnonzero(enc_plan.encode)
        sims_u[:, :U] = -np.inf  # a chunk the gate leaves out is not judged: it cannot support a fact
    n_enc = len(enc_cols)
    if progress:
        progress(0, n_enc)
    for lo in range(0, n_enc, block):
        cols = enc_cols[lo : lo + block]
        block_texts = [uniq[k] for k in cols]
        # reported after each encoder batch (a block is thousands of texts: minutes on a CPU)
        vecs = embed_texts(block_texts, embedder, store, cache_enabled=cache_enabled, ttl_hours=ttl_hours,
                           stats=stats, progress=part(progress, lo, len(block_texts), n_enc))
        sims_u[:, cols] = similarity(fact_vecs, vecs)
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
        # the chunk's own text passes the checks, so every occurrence does (its neighbourhood
        # only adds text for the lexical and statement checks)
        return (not (toks[f] and missing_tokens(toks[f], col_text[k])) and chunk_conflict(f, k) is None
                and not (stated[f] and dropped_clause(facts[f], col_text[k], float(sims_u[f, k]))))

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
                             ttl_hours=ttl_hours, stats=stats) if span_index else fact_vecs[:0])  # none: no plans
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
    dropped: list[dict[int, Statement]] = [{} for _ in facts]
    near_span: dict[tuple[int, int], tuple[int, int]] = {}
    chunk_span: dict[tuple[int, int], tuple[int, int]] = {}
    number_cache: dict[int, set[str]] = {}
    span_checks: dict[tuple[int, int, int, int], tuple[list[str], Conflict | None, Statement | None]] = {}
    candidate = best_cos >= threshold
    if mask is not None:
        candidate &= mask[:, chunked.owner]
    for f, c in zip(*np.nonzero(candidate)):
        f, c = int(f), int(c)
        k = int(inverse[c])
        chunk_text = col_text[k]
        cands = []
        if sims[f, c] >= threshold:
            cands.append((float(sims[f, c]), -1, -1))
        cands += [x for x in span_cands.get((f, k), ()) if x[0] >= threshold]
        cands.sort(key=lambda x: -x[0])
        fail: tuple[float, int, int, list[str], Conflict | None, Statement | None] | None = None
        for s, a, b in cands:
            drop: Statement | None = None
            if a < 0:  # the whole chunk: its tokens may straddle a cut into the next chunk
                miss: list[str] = []
                hood = _neighbourhood(chunked, use, c) if toks[f] or stated[f] else chunk_text
                if toks[f]:
                    nums = None
                    if toks[f].numbers:
                        nums = number_cache.get(c)
                        if nums is None:
                            nums = number_cache[c] = text_numbers(hood)
                    miss = missing_tokens(toks[f], hood, nums)
                conflict = None if miss else chunk_conflict(f, k)
                if stated[f] and not miss and conflict is None:
                    # the carrier is the chunk itself; its statements may run into the next one
                    drop = dropped_clause(facts[f], hood, s, carrier=chunk_text)
            else:
                key4 = (f, k, a, b)
                got = span_checks.get(key4)
                if got is None:
                    miss = missing_tokens(toks[f], chunk_text[a:b]) if toks[f] else []
                    scope = clause_scope(chunk_text, a, b, reach=len(chunk_text))
                    conflict = None if miss else polarity_conflict(facts[f], scope)
                    drop = (dropped_clause(facts[f], scope, s, carrier=chunk_text[a:b])
                            if stated[f] and not miss and conflict is None else None)
                    got = span_checks[key4] = (miss, conflict, drop)
                miss, conflict, drop = got
            if not miss and conflict is None and drop is None:
                passed[f, c] = s
                if a >= 0:
                    chunk_span[(f, c)] = (a, b)
                break
            if fail is None:
                fail = (s, a, b, miss, conflict, drop)
        if not np.isfinite(passed[f, c]) and fail is not None:
            t = int(chunked.owner[c])
            best = near[f].get(t)
            if best is None or fail[0] > best[0]:
                near[f][t] = (fail[0], c, fail[3])
                fail_conflict, fail_drop = fail[4], fail[5]
                if fail_conflict is not None:
                    conflicts[f][t] = fail_conflict
                else:
                    conflicts[f].pop(t, None)
                if fail_drop is not None:
                    dropped[f][t] = fail_drop
                else:
                    dropped[f].pop(t, None)
                if fail[1] >= 0:
                    near_span[(f, t)] = (fail[1], fail[2])
                else:
                    near_span.pop((f, t), None)
    score, arg = group_max(passed, chunked.owner, T)
    cosine, _ = group_max(best_cos, chunked.owner, T)
    # A verbatim occurrence supports the fact whatever its cosine; the text's score is the better
    # of that occurrence's cosine (the fact's own vector when it is the fact up to whitespace) and
    # of a chunk or span that passed the checks (MiniLM: "never push directly to the main
    # branch" 0.92 against the fact, the same words with the comma after them 0.97).
    found: dict[tuple[int, int], tuple[int, int, str, bool]] = {}
    if verbatim:
        quoted = {key: use[key[1]][a:b] for key, (a, b, _) in verbatim.items()}
        flat = {key: " ".join(q.split()) for key, q in quoted.items()}
        others = list(dict.fromkeys(v for (f, _), v in flat.items() if v != facts[f]))
        other_vecs = (embed_texts(others, embedder, store, cache_enabled=cache_enabled, ttl_hours=ttl_hours,
                                  stats=stats) if others else fact_vecs[:0])  # none: every quote is its fact
        row = {v: i for i, v in enumerate(others)}
        for (f, t), (a, b, c) in verbatim.items():
            v = flat[(f, t)]
            cos = float(sims_u[f, U + f]) if v == facts[f] else float(other_vecs[row[v]] @ fact_vecs[f])
            shown = not cos <= score[f, t]
            if shown:
                score[f, t], arg[f, t] = cos, c
            cosine[f, t] = max(float(cosine[f, t]), cos)
            found[(f, t)] = (a, b, quoted[(f, t)], shown)
    for f in range(F):  # a text that supports the fact is no near miss
        for t in [t for t in near[f] if np.isfinite(score[f, t]) or (f, t) in found]:
            del near[f][t]
            conflicts[f].pop(t, None)
            dropped[f].pop(t, None)
            near_span.pop((f, t), None)
    span = {(f, int(t)): chunk_span[(f, int(arg[f, t]))] for f in range(F)
            for t in np.flatnonzero(np.isfinite(score[f]))
            if not found.get((f, int(t)), (0, 0, "", False))[3] and (f, int(arg[f, t])) in chunk_span}
    return Presence(facts, toks, chunked, score, arg, near, threshold, span=span, conflicts=conflicts,
                    near_span=near_span, cosine=cosine, spans_scored=len(plans), span_texts=len(span_index),
                    dropped=dropped, verbatim=found,
                    plan=enc_plan.to_dict() if enc_plan is not None else
                    {"method": "exhaustive", "chunks": U, "encoded": U, "static_gate": None,
                     "facts_without_gate": 0, "near_misses": "all chunks"})
