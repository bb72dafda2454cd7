"""Alignment: two runs' events lined up, and row by row what matches, what differs by
construction between harnesses, what is a detour, and where the runs diverge.

A global alignment (Needleman-Wunsch, linear gaps) over the event keys, where only events of
the same type can be paired: +2 for equal keys, -1 for a substitution, -1 per gap. The DP runs
on the reversed sequences and the traceback walks forward preferring pairs, so among the
best-scoring alignments the one with the longest common start is chosen (the divergence is as
late as the evidence allows). Each DP row is vectorized with numpy (the left gap chain is a
running maximum, ``np.maximum.accumulate``); an exact common start skips the DP. Two
2,000-event runs align in well under a second (``bench/diverge.py``).

Harness differences. Runs from different harnesses (format, or text vs tool-calling protocol)
get different system prompts and different task templates by construction. Then differences in
the **preamble** (system and user events before either run's first action) are reported under
``preexisting`` (with their line overlap, not embedded) and do not count as the divergence: the
earliest *meaningful* divergence is searched in what happened after the task was given. For runs
of the same harness a preamble difference is the divergence (``system_prompt`` /
``user_input``).

Detours. A stretch where both runs only looked around (read-only actions: views, listings,
``grep``/``find``/``git diff``... and their own results) and then took the same step again is a
*detour*: listed under ``detours``, not the divergence, like a retry (``--strict`` counts it).

The divergence is the first aligned row that is not a match, similar, preexisting or a detour.
Its *block* runs to the next matching row that is not a tool result (``block_end``: where the
runs line up again). Pairs only the embedding model can decide are resolved in rounds, only as
far as the first diverging block (``full`` resolves them all).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .actions import is_read_only
from .compare import NOT_EMBEDDED, Comparer, Pending, Verdict, describe, line_overlap
from .events import EVENT_TYPES, Event, RunEvents

# ``not_comparable``: results of one action worded by different harnesses (both succeeded); the
# alignment goes on, but no similarity is claimed
OPS_SAME = ("match", "similar", "preexisting", "not_comparable")
MATCH, MISMATCH, GAP, FORBIDDEN = 2, -1, -1, -1_000_000  # alignment scores (FORBIDDEN: pairs of two types)


def align(a_types: Sequence[int], a_keys: Sequence[int], b_types: Sequence[int], b_keys: Sequence[int], *,
          match: int = MATCH, mismatch: int = MISMATCH, gap: int = GAP) -> list[tuple[int, int]]:
    """Global alignment of two event sequences: ``(i, j)`` pairs in order, -1 for a gap.

    Only equal types pair up. Among the best-scoring alignments, the traceback prefers pairs
    as early as possible (the DP runs on the reversed sequences, the traceback walks forward).
    """
    ta, ka = np.asarray(a_types, dtype=np.int64), np.asarray(a_keys, dtype=np.int64)
    tb, kb = np.asarray(b_types, dtype=np.int64), np.asarray(b_keys, dtype=np.int64)
    n, m = len(ka), len(kb)
    # exact common prefix: no DP needed
    p = 0
    while p < n and p < m and ka[p] == kb[p] and ta[p] == tb[p]:
        p += 1
    out = [(i, i) for i in range(p)]
    if p == n or p == m:
        out += [(i, -1) for i in range(p, n)] + [(-1, j) for j in range(p, m)]
        return out
    ra_t, ra_k = ta[p:][::-1], ka[p:][::-1]
    rb_t, rb_k = tb[p:][::-1], kb[p:][::-1]
    n2, m2 = len(ra_k), len(rb_k)
    idx = np.arange(m2 + 1, dtype=np.int64)
    h_prev = idx * gap
    dirs = np.zeros((n2 + 1, m2 + 1), dtype=np.int8)
    dirs[0, 1:] = 4
    dirs[1:, 0] = 2
    for i in range(1, n2 + 1):
        same_type = rb_t == ra_t[i - 1]
        s = np.where(same_type, np.where(rb_k == ra_k[i - 1], match, mismatch), FORBIDDEN)
        diag = h_prev[:-1] + s
        up = h_prev[1:] + gap
        best = np.maximum(diag, up)
        arr = np.empty(m2 + 1, dtype=np.int64)
        arr[0] = i * gap
        arr[1:] = best
        h = gap * idx + np.maximum.accumulate(arr - gap * idx)
        row = (h[1:] == diag).astype(np.int8)
        row |= (h[1:] == up).astype(np.int8) << 1
        row |= (h[1:] == h[:-1] + gap).astype(np.int8) << 2
        dirs[i, 1:] = row
        h_prev = h
    i, j = n2, m2
    while i > 0 or j > 0:
        d = dirs[i, j]
        if i > 0 and j > 0 and d & 1:
            out.append((p + n2 - i, p + m2 - j))
            i -= 1
            j -= 1
        elif i > 0 and (j == 0 or d & 2):
            out.append((p + n2 - i, -1))
            i -= 1
        else:
            out.append((-1, p + m2 - j))
            j -= 1
    return out


@dataclass
class Row:
    """One aligned row: an event of each run (or a gap) and what the comparison made of them."""

    op: str  # match | similar | preexisting | detour | mismatch | a_only | b_only
    a: Event | None
    b: Event | None
    similarity: float | None = None
    measure: str | None = None
    verdict: str = ""  # the op before detours are marked
    pending: Pending | None = None  # not decided yet: needs the embedding model
    method: str | None = None  # how the pair was compared (METHODS); None for a gap
    reason: str | None = None  # what the comparison rests on, or why none was made

    @property
    def type(self) -> str:
        return (self.a or self.b).type  # type: ignore[union-attr]  # a row holds at least one side

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "type": self.type,
            "a_seq": self.a.seq if self.a else None,
            "b_seq": self.b.seq if self.b else None,
            "a_step": self.a.step if self.a else None,
            "b_step": self.b.step if self.b else None,
            "a": self.a.display if self.a else None,
            "b": self.b.display if self.b else None,
            "similarity": self.similarity,
            "measure": self.measure,
            "method": self.method,
            "reason": self.reason,
        }


@dataclass
class Alignment:
    """Two runs aligned: the rows, the first diverging one, and what was set aside before it."""

    rows: list[Row]
    first: int | None  # index of the first diverging row
    cross_harness: bool
    preexisting: list[dict[str, Any]]
    detours: list[dict[str, Any]] = field(default_factory=list)


def preamble_end(events: list[Event]) -> int:
    """Index (in the aligned events) of the first action or answer."""
    return next((e.index for e in events if e.type in ("action", "answer")), 1 << 60)


def in_preamble(row: Row, end_a: int, end_b: int) -> bool:
    """The row is among the inputs given before either run's first action or answer (``end_a``,
    ``end_b``: each run's ``preamble_end``)."""
    return (row.a is None or row.a.index < end_a) and (row.b is None or row.b.index < end_b)


def align_runs(a: RunEvents, b: RunEvents, comparer: Comparer, *, tolerate_detours: bool = True,
               full: bool = False) -> Alignment:
    """Align two runs' events and decide, row by row, what matches.

    With ``tolerate_detours``, a stretch where both runs only looked around (read-only actions:
    views, listings, searches, and their results) and then took the same step again is a
    *detour* (listed, not the divergence), like a retry.
    """
    ea, eb = a.aligned(), b.aligned()
    codes: dict[str, int] = {}
    tcode = {t: k for k, t in enumerate(EVENT_TYPES)}
    ka = [codes.setdefault(e.key, len(codes)) for e in ea]
    kb = [codes.setdefault(e.key, len(codes)) for e in eb]
    pairs = align([tcode[e.type] for e in ea], ka, [tcode[e.type] for e in eb], kb)
    rows: list[Row] = []
    for i, j in pairs:
        ev_a = ea[i] if i >= 0 else None
        ev_b = eb[j] if j >= 0 else None
        if ev_a is not None and ev_b is not None:
            same = ev_a.key == ev_b.key
            rows.append(Row("match" if same else "mismatch", ev_a, ev_b, 1.0 if same else None,
                            "exact" if same else None, method="exact" if same else None,
                            reason="equal after normalization" if same else None))
        else:
            rows.append(Row("a_only" if ev_a is not None else "b_only", ev_a, ev_b,
                            reason=f"only in {'A' if ev_a is not None else 'B'}"))
    cross = a.harness != b.harness
    pre: list[dict[str, Any]] = []
    if cross:
        # Harness framing differs by construction: not compared by the model (these texts are
        # long, and no similarity would change the verdict); line overlap is shown for reference.
        end_a, end_b = preamble_end(a.events), preamble_end(b.events)
        for r in rows:
            ev = r.a or r.b
            if ev is None or ev.type not in ("system", "user") or r.op == "match":
                continue
            if in_preamble(r, end_a, end_b):
                r.op = "preexisting"
                r.method = "text"
                r.reason = "given inputs compared as text: differ (by construction between harnesses)"
                if r.a is not None and r.b is not None:
                    r.similarity, r.measure = round(line_overlap(r.a.text, r.b.text), 4), "lines"
                pre.append({"cause": "system_prompt" if ev.type == "system" else "user_input",
                            "a_seq": r.a.seq if r.a else None, "b_seq": r.b.seq if r.b else None,
                            "similarity": r.similarity, "measure": r.measure, "method": "text",
                            "note": "differs between harnesses by construction "
                                    f"({a.harness} vs {b.harness}); not counted as the divergence"})
    for r in rows:
        if r.op == "mismatch":
            v = comparer.verdict(r.a, r.b)  # type: ignore[arg-type]  # a mismatch row has both sides
            if isinstance(v, Pending):
                r.pending = v
            else:
                _decide(r, v, comparer.threshold)
        r.verdict = r.op
    # The model decides only what decides the divergence: pairs up to the end of the first
    # diverging block, resolved in rounds (a pair found similar can move the divergence on).
    # With ``full``, every pending pair is embedded.
    if full:
        _resolve(comparer, [r for r in rows if r.pending is not None])
    while True:
        first, detours = _scan(rows, tolerate_detours)
        if first is None:
            break
        need = [r for r in rows[first:block_end(rows, first)] if r.pending is not None]
        if not need:
            break
        _resolve(comparer, need)
    for r in rows:
        if r.pending is not None:  # after the divergence, left undecided: not worth the model
            r.measure = "not_compared"
            r.method, r.reason = "n/a", NOT_EMBEDDED
    return Alignment(rows, first, cross, pre, detours)


def _decide(r: Row, v: Verdict, threshold: float, embedded: bool = False) -> None:
    """Record a verdict on a substituted pair: its measure, method, reason and op."""
    r.measure = v[1]
    r.method, r.reason, r.similarity = describe(v[1], v[0], v[2], r.a, r.b, threshold=threshold, embedded=embedded)
    if v[2]:
        r.op = "not_comparable" if r.method == "n/a" else "similar"
    else:
        r.op = "mismatch"
    r.verdict = r.op
    r.pending = None


def _resolve(comparer: Comparer, rows: list[Row]) -> None:
    """Embed the rows' pending pairs (one batch) and decide them."""
    for r, v in zip(rows, comparer.resolve([r.pending for r in rows])):  # type: ignore[misc]  # every row is pending
        _decide(r, v, comparer.threshold, embedded=True)


def _scan(rows: list[Row], tolerate_detours: bool) -> tuple[int | None, list[dict[str, Any]]]:
    """The first diverging row and the detours before it (rows still pending count as different)."""
    for r in rows:
        r.op = r.verdict
    detours: list[dict[str, Any]] = []
    k = 0
    while k < len(rows):
        if rows[k].op in OPS_SAME:
            k += 1
            continue
        end = block_end(rows, k)
        if tolerate_detours and end < len(rows) and _is_detour(rows[k:end]):
            for r in rows[k:end]:
                if r.op not in OPS_SAME:
                    r.op = "detour"
            a_ev = [r.a for r in rows[k:end] if r.a is not None]
            b_ev = [r.b for r in rows[k:end] if r.b is not None]
            detours.append({"a_steps": sorted({e.step for e in a_ev if e.type == "action"}),
                            "b_steps": sorted({e.step for e in b_ev if e.type == "action"}),
                            "a": [e.display for e in a_ev if e.type == "action"],
                            "b": [e.display for e in b_ev if e.type == "action"],
                            "rejoined": position(rows[end])})
            k = end
            continue
        return k, detours
    return None, detours


def position(r: Row) -> dict[str, Any]:
    """Where a row is in each run: steps and seqs."""
    return {"a_step": r.a.step if r.a else None, "b_step": r.b.step if r.b else None,
            "a_seq": r.a.seq if r.a else None, "b_seq": r.b.seq if r.b else None}


def _is_detour(block: list[Row]) -> bool:
    """Both runs only looked around (read-only actions and their own results) before rejoining."""
    actions = {id(e) for r in block for e in (r.a, r.b) if e is not None and e.type == "action"}
    for r in block:
        for e in (r.a, r.b):
            if e is None:
                continue
            if e.type == "action":
                if not is_read_only(e.key):
                    return False
            elif e.type == "result":
                parent_in_block = any(id(x) in actions and x.result is e for r2 in block for x in (r2.a, r2.b)
                                      if x is not None)
                if not parent_in_block:
                    return False  # a different answer to an action both runs took
            else:
                return False
    return True


def block_end(rows: list[Row], start: int) -> int:
    """Where the runs line up again after ``start``: the next matching row that is not a tool
    result (two results can agree after different actions: "created" and "created")."""
    end = start
    while end < len(rows) and (rows[end].op not in OPS_SAME or rows[end].type == "result"):
        end += 1
    return end
