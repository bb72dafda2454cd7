"""Comparison: whether two aligned events that differ say the same thing, and how that was
decided (the ``method`` / ``reason`` vocabulary of a report).

A pair matches when the keys are equal after normalization (``match``). Substituted pairs are
then compared by content (``similar`` when they pass; ``measure`` says how):

- free text (system, user, answer): embedding similarity >= ``divergence_cosine``
  (``embedding``), computed on sentence chunks (``embed.chunk_text``, the facts' chunking, so
  their cached vectors are reused) as a BERTScore-style F1 of the best chunk cosines, so a long
  text is not truncated to MiniLM's 256 wordpieces. Chunks present in both texts match without
  the model; only the others are embedded (at most 32 per side: the first and last 16).
  Given inputs (instructions, a user's words, a submission) are compared as text only, and two
  texts that say the same words the other way round differ by ``polarity`` (no cosine decides).
- tool results: different return codes never match (``returncode``); an output one harness cut
  (head ... tail) matches the full one when >= 90% of its lines are in it (``truncated``); the
  results of the same action run through different tools (the editor vs the shell) word their
  confirmations differently ("File created successfully" vs nothing), so unless they share
  content only success vs failure is compared (``tool_format``); two looks at the same file
  match when one shows a part of the other (``contained``); below 20% shared lines outputs
  differ without asking the model (``lines``: outputs are not paraphrased); otherwise
  embedding similarity >= ``divergence_cosine``.
- actions are structured: only equal keys match, except two views (or listings) of the same
  path whose outputs match (``same_output``: ``view f[1:240]`` of a short file is ``view f``).
  Otherwise a substitution's similarity is lexical (``difflib`` ratio of the canonical forms),
  for display.

Only substituted pairs are embedded, each unique chunk once, through the store's embedding
cache; the model is loaded only if some pair needs it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...matching.polarity import polarity_flip
from .events import GIVEN_TYPES, Event, failed

if TYPE_CHECKING:  # pragma: no cover
    from ...embed import Embedder, ProgressFn
    from ...store.db import Store

METHODS = ("exact", "text", "embedding", "lexical", "polarity", "status", "n/a")  # a row's ``method``
MAX_CHUNKS = 32  # per text, for embedding similarity: the first and last half of this
MIN_LINE_OVERLAP = 0.2  # tool results below this overlap are different without embedding
MIN_CONTAINED = 0.9  # share of one output's lines in the other's for the two to be the same look
NOT_EMBEDDED = "not embedded: outside the pairs that decide the divergence (--full compares them)"
NOT_COMPARABLE = "different harness result formats: not comparable"

Verdict = tuple[float | None, str, bool]  # (similarity, measure, same)


@dataclass(frozen=True)
class Pending:
    """A pair only the embedding model can decide."""

    texts: tuple[str, str]
    proxy: tuple[str, str] | None = None  # two view actions decided by their outputs


def _by_output(v: Verdict, key_a: str, key_b: str) -> Verdict:
    """The verdict on two looks at one file from the verdict on their outputs."""
    sim, _, same = v
    return (sim, "same_output", True) if same else (_lexical(key_a, key_b), "lexical", False)


class Comparer:
    """Content similarity of substituted event pairs: embeddings for free text and tool results
    (chunk-level F1, each unique chunk embedded once through the cache), lexical for actions."""

    def __init__(self, embedder: Embedder | Callable[[], Embedder] | None, store: Store | None = None, *,
                 threshold: float = 0.85, cache_enabled: bool = True, ttl_hours: float = 0,
                 progress: ProgressFn | None = None) -> None:
        self._embedder = embedder
        self.store = store
        self.threshold = threshold
        self.cache_enabled = cache_enabled
        self.ttl_hours = ttl_hours
        self.progress = progress
        self.embedded = 0  # chunks requested (for tests and benches)

    def embedder(self) -> Embedder:
        e = self._embedder
        if e is None:
            raise ValueError("no embedder")
        if callable(e) and not hasattr(e, "encode"):
            e = self._embedder = e()
        return e  # type: ignore[return-value]  # a factory (no ``encode``) was replaced by what it made

    def verdict(self, a: Event, b: Event) -> Verdict | Pending:
        """(similarity, measure, same) when the evidence suffices without the model, else the
        texts to embed (``Pending``)."""
        if a.key == b.key:
            return 1.0, "exact", True
        if a.type in GIVEN_TYPES or a.submission or b.submission:
            # given, not generated (instructions, a user's words, the harness's submission): the
            # texts are equal after whitespace normalization or they differ; no cosine
            return None, "text", False
        if a.type == "action":
            # a view of the same file with another range that showed the same thing is the same
            # look: decided by the two results, compared like any results
            if _same_target_read(a.key, b.key) and a.result is not None and b.result is not None:
                v = _result_verdict(a.result, b.result)
                if v is None:
                    return Pending((a.result.text, b.result.text), proxy=(a.key, b.key))
                return _by_output(v, a.key, b.key)
            return _lexical(a.key, b.key), "lexical", False
        if a.type == "result":
            v = _result_verdict(a, b)
            if v is not None:
                return v
        elif polarity_flip(a.text, b.text) is not None:
            return None, "polarity", False  # the same words said the other way round: no cosine decides
        return Pending((a.text, b.text))

    def resolve(self, pending: Sequence[Pending]) -> list[Verdict]:
        """Embed the pending pairs (one batch) and decide them."""
        if not pending:
            return []
        sims = self._embedding_similarity([p.texts for p in pending])
        out = []
        for p, sim in zip(pending, sims):
            v = (round(sim, 4), "embedding", sim >= self.threshold)
            out.append(_by_output(v, *p.proxy) if p.proxy else v)
        return out

    def compare(self, pairs: Sequence[tuple[Event, Event]]) -> list[Verdict]:
        """(similarity, measure, same) per pair, embedding whatever needs it."""
        out: list[Any] = [self.verdict(a, b) for a, b in pairs]
        need = [k for k, v in enumerate(out) if isinstance(v, Pending)]
        for k, v in zip(need, self.resolve([out[k] for k in need])):
            out[k] = v
        return out

    def _embedding_similarity(self, texts: list[tuple[str, str]]) -> list[float]:
        """BERTScore-style F1 over sentence chunks. A chunk present in both texts is matched
        (1.0) without the model; the others are matched by cosine among themselves (a chunk
        with no counterpart on the other side scores 0). At most ``MAX_CHUNKS`` unshared chunks
        per side are embedded (the first and last half); the rest take their sample's mean."""
        from ...embed import chunk_text, embed_texts

        half = MAX_CHUNKS // 2
        plans = []
        index: dict[str, int] = {}
        allc: list[str] = []
        for ta, tb in texts:
            ca, cb = [c.text for c in chunk_text(ta)], [c.text for c in chunk_text(tb)]
            shared = set(ca) & set(cb)
            ua = [c for c in ca if c not in shared]
            ub = [c for c in cb if c not in shared]
            sa = ua if len(ua) <= MAX_CHUNKS else ua[:half] + ua[-half:]
            sb = ub if len(ub) <= MAX_CHUNKS else ub[:half] + ub[-half:]
            if sa and sb:
                for c in (*sa, *sb):
                    if c not in index:
                        index[c] = len(allc)
                        allc.append(c)
            plans.append((ca, cb, ua, ub, sa, sb, ta, tb))
        self.embedded += len(allc)
        vecs = embed_texts(allc, self.embedder(), self.store, cache_enabled=self.cache_enabled,
                           ttl_hours=self.ttl_hours, progress=self.progress) if allc else None
        out = []
        for ca, cb, ua, ub, sa, sb, ta, tb in plans:
            if not ca or not cb:
                out.append(1.0 if not ca and not cb and ta.strip() == tb.strip() else 0.0)
                continue
            best_a = best_b = 0.0
            if sa and sb and vecs is not None:
                sim = np.clip(vecs[[index[c] for c in sa]] @ vecs[[index[c] for c in sb]].T, 0.0, 1.0)
                best_a = float(sim.max(axis=1).mean())  # mean best match of A's unshared chunks
                best_b = float(sim.max(axis=0).mean())
            prec = (len(ca) - len(ua) + best_a * len(ua)) / len(ca)
            rec = (len(cb) - len(ub) + best_b * len(ub)) / len(cb)
            out.append(0.0 if prec + rec == 0 else 2 * prec * rec / (prec + rec))
        return out


_READ = re.compile(r"^action:(view|list) (\S+)")


def _same_target_read(a: str, b: str) -> bool:
    """Two action keys that view (or list) the same path, whatever the line range."""
    ma, mb = _READ.match(a), _READ.match(b)
    if not ma or not mb or ma.group(1) != mb.group(1):
        return False
    return ma.group(2).split("[")[0] == mb.group(2).split("[")[0]


def _result_verdict(a: Event, b: Event) -> Verdict | None:
    """Decide two tool results without embeddings where the evidence suffices (None: embed)."""
    if a.key == b.key:
        return 1.0, "exact", True
    if a.rc is not None and b.rc is not None and a.rc != b.rc:
        return round(line_overlap(a.text, b.text), 4), "returncode", False
    if a.parent_key and b.parent_key and a.parent_key != b.parent_key \
            and _same_target_read(a.parent_key, b.parent_key) and a.text and b.text:
        # two looks at the same file or folder: the same when one shows a part of the other
        # (a line range of the whole file, a head-and-tail cut of a long output)
        la, lb = _shown_lines(a.text), _shown_lines(b.text)
        small, big = (la, set(lb)) if len(la) <= len(lb) else (lb, set(la))
        contained = _share_in(small, big)
        return round(contained, 4), "contained", contained >= MIN_CONTAINED
    if a.truncated != b.truncated:  # one harness cut a long output (head ... tail), the other not
        short, full = (a, b) if a.truncated else (b, a)
        lines = _shown_lines(short.text)
        if lines:
            contained = _share_in(lines, set(full.text.split("\n")))
            return round(contained, 4), "truncated", contained >= MIN_CONTAINED
    if a.via and b.via and a.via != b.via and line_overlap(a.text, b.text) < MIN_LINE_OVERLAP:
        # the same action through different tools (an editor vs the shell): each words its own
        # confirmation ("File created successfully at: f" vs nothing), so only success vs
        # failure compares; printed content (a view) is compared as usual
        same = failed(a) == failed(b)
        return (1.0 if same else 0.0), "tool_format", same
    overlap = line_overlap(a.text, b.text)
    if overlap < MIN_LINE_OVERLAP:
        return round(overlap, 4), "lines", False
    return None


def _shown_lines(text: str) -> list[str]:
    """A result's non-blank lines, without the marks where a harness cut it."""
    return [x for x in text.split("\n") if x and x != "<elided>"]


def _share_in(lines: list[str], other: set[str]) -> float:
    """The share of ``lines`` that are in ``other`` (0.0 for no lines)."""
    return sum(x in other for x in lines) / max(len(lines), 1)


def _lexical(a: str, b: str) -> float:
    """The ``difflib`` ratio of two actions' canonical forms (their first 2,000 characters)."""
    return round(difflib.SequenceMatcher(None, a[:2000], b[:2000], autojunk=False).ratio(), 4)


def line_overlap(a: str, b: str) -> float:
    """Shared distinct lines over the smaller side's distinct lines (1.0 for two empty texts)."""
    la, lb = set(a.split("\n")) - {""}, set(b.split("\n")) - {""}
    if not la and not lb:
        return 1.0
    if not la or not lb:
        return 0.0
    return len(la & lb) / min(len(la), len(lb))


def describe(measure: str | None, similarity: float | None, same: bool, a: Event | None, b: Event | None, *,
             threshold: float, embedded: bool = False) -> tuple[str, str, float | None]:
    """(method, reason, similarity to report) of a comparison: how it was made and what it rests
    on. A figure is reported only where it was computed and is what the verdict rests on."""
    if measure == "exact":
        return "exact", "equal after normalization", 1.0
    if measure == "text":
        what = "the final submissions (patches: see `patches`)" if (a and a.submission) or (b and b.submission) \
            else "given inputs"
        return "text", f"{what} compared as text, whitespace normalized: {'equal' if same else 'differ'}", None
    if measure == "polarity":  # facts' polarity rule: "I renamed X" vs "I did not rename X"
        flip = polarity_flip(a.text, b.text) if a and b else None
        return "polarity", f"{flip.reason if flip else 'polarity differs'} (a rule on the words, no cosine)", None
    if measure == "embedding":
        rel = "≥" if same else "<"
        return "embedding", f"cosine (chunk F1, MiniLM) {similarity:.2f} {rel} threshold {threshold:.2f}", similarity
    if measure == "same_output":
        how = "embedding" if embedded else "lexical"
        return how, "two looks at the same file: the same when their outputs are", similarity
    if measure == "lexical":
        return ("lexical", "difflib ratio of the two actions' canonical forms (display only: different actions "
                           "never match)", similarity)
    if measure == "lines":
        return "lexical", "share of shared lines below 0.20: different outputs", similarity
    if measure == "contained":
        return "lexical", "share of the shorter look's lines in the other (0.90 or more: the same look)", similarity
    if measure == "truncated":
        return "lexical", "share of the cut output's lines in the full one (0.90 or more: the same)", similarity
    if measure == "returncode":
        return "status", f"return codes differ ({a.rc if a else '–'} vs {b.rc if b else '–'})", None
    if measure == "tool_format":
        if same:
            return "n/a", f"{NOT_COMPARABLE} (both succeeded)", None
        status = {True: "failed", False: "succeeded"}
        a_status, b_status = status[failed(a)], status[failed(b)]  # type: ignore[arg-type]  # tool_format: both sides
        return "status", f"{NOT_COMPARABLE}; only success vs failure compared: A {a_status}, B {b_status}", None
    if measure == "not_compared":
        return "n/a", NOT_EMBEDDED, None
    return "n/a", f"not compared ({measure})", similarity
