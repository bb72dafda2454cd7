"""Where each call's history starts, and what recorded edits took out of it: the history a
call was sent, as the log's compactions and history edits shaped it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..records import (
    KIND_COMPACTION_BOUNDARY,
    KIND_COMPACTION_SUMMARY,
    KIND_HISTORY_EDIT,
    Message,
    read_history_edit,
)


def context_starts(messages: Sequence[Message]) -> np.ndarray:
    """For each message index i, the first index of the context a call at i was sent.

    History restarts at the latest compaction: after a boundary marker (its summary follows),
    or at a summary that has no boundary (or recorded history edit, whose summary it is) before
    it. What a history edit took out is subtracted by ``edited_out``.
    """
    starts: list[int] = []
    cur = 0
    prev = None  # the previous message's kind
    for i, m in enumerate(messages):
        starts.append(cur)
        kind = m.kind
        if kind == KIND_COMPACTION_BOUNDARY:
            cur = i + 1
        elif kind == KIND_COMPACTION_SUMMARY and prev not in (KIND_COMPACTION_BOUNDARY, KIND_HISTORY_EDIT):
            cur = i
        prev = kind
    return np.array(starts, dtype=np.int64)


def edited_out(messages: Sequence[Message], steps: Sequence[int]) -> list[np.ndarray] | None:
    """For each step (its message index), the indices of earlier messages that recorded history
    edits (``history_edit`` markers before it) took out of the history; None without edits."""
    marks = [(i, e) for i, m in enumerate(messages) if m.kind == KIND_HISTORY_EDIT
             and (e := read_history_edit(m.meta, i)) is not None and e.ranges]
    if not marks:
        return None
    gone = np.zeros(len(messages), dtype=bool)
    out: list[np.ndarray] = []
    k = 0
    for i in steps:
        while k < len(marks) and marks[k][0] < i:
            for a, b in marks[k][1].ranges:
                gone[a:b] = True
            k += 1
        out.append(np.flatnonzero(gone[:i]))
    return out
