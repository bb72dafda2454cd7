"""Reading cost stays linear in the input (issue 31, "Hangs"): counted, not timed.

The fuzzer found Cline task folders of 0.5-1.6 MB that took 5-8 s to read. The cause: Cline's
``conversationHistoryDeletedRange`` is cumulative (``[2, 9]``, then ``[2, 15]``, ...), and each
marker named every message of its range again, so N calls with growing ranges cost (and
stored) ~N^2/2 positions; Roo's condense summaries each searched the whole history. The time
benchmark is ``bench/ingest_scaling.py``; these tests count what the readers produce and touch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from context_forensics.importers.base import ImportContext
from context_forensics.importers.cline.history import history_messages
from context_forensics.importers.cline.ui import read_ui
from context_forensics.records import KIND_HISTORY_EDIT, read_history_edit
from helpers import parse


def cline_folder(root: Path, n: int, *, with_history: bool) -> Path:
    """A Cline task folder (Cline 3.x ``ui_messages.json``, with or without its
    ``api_conversation_history.json``) of ``n`` model calls, each one after the third made with a
    deleted range one round longer than the call before's, as Cline's ContextManager records it
    when every call overflows: ``[2, 2k - 3]``."""
    folder = root / f"task-{n}-{with_history}"
    folder.mkdir()
    ui: list[dict[str, Any]] = [{"ts": 1000, "type": "say", "say": "task", "text": "do it"}]
    api: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "<task>do it</task>"}]}]
    for k in range(n):
        request = f"[read_file for 'a{k}.py'] Result:\n\nline {k}"
        entry: dict[str, Any] = {"ts": 2000 + 2 * k, "type": "say", "say": "api_req_started",
                                 "text": json.dumps({"request": request, "tokensIn": 10, "tokensOut": 5})}
        if k > 2:
            entry["conversationHistoryDeletedRange"] = [2, 2 * k - 3]
        if with_history:
            entry["conversationHistoryIndex"] = 2 * k - 1 if k else -1
            if k:
                api.append({"role": "user", "content": [{"type": "text", "text": request}]})
            api.append({"role": "assistant", "content": [{"type": "text", "text": f"step {k}"}]})
        ui += [entry, {"ts": 2001 + 2 * k, "type": "say", "say": "text", "text": f"step {k}"}]
    (folder / "ui_messages.json").write_text(json.dumps(ui))
    if with_history:
        (folder / "api_conversation_history.json").write_text(json.dumps(api))
    return folder


def _markers(folder: Path) -> tuple[list[Any], list[tuple[int, Any]]]:
    _, (session,), _ = parse(folder, "cline")
    msgs = session.messages
    return msgs, [(i, read_history_edit(m.meta, i)) for i, m in enumerate(msgs) if m.kind == KIND_HISTORY_EDIT]


def test_cumulative_cline_ranges_store_what_each_adds_and_a_replay_takes_out_the_same(tmp_path):
    for with_history in (False, True):
        n = 200
        msgs, markers = _markers(cline_folder(tmp_path, n, with_history=with_history))
        assert len(markers) == n - 3
        runs = sum(len(e.ranges) for _, e in markers)
        # ~n runs in all; naming every message of each range again stored ~n^2/2 (19,900 here)
        assert runs <= 2 * n, runs
        # what a replay has taken out at each marker: every message of history index 2..b
        gone: set[int] = set()
        for at, e in markers:
            gone |= {p for a, b in e.ranges for p in range(a, b)}
            _, b = e.figures["deleted_range"]
            want = {p for p in range(at) if msgs[p].kind != KIND_HISTORY_EDIT
                    and 2 <= msgs[p].meta.get("history_index", -1) <= b}
            assert gone == want, (with_history, at)


class Counted(list):
    """A list that counts its walks and its element reads."""

    walks = 0
    reads = 0

    def __iter__(self):
        Counted.walks += 1
        return super().__iter__()

    def __getitem__(self, i):
        Counted.reads += 1
        return super().__getitem__(i)


def test_roo_condense_summaries_are_found_in_a_bounded_number_of_passes(tmp_path):
    """Roo-Code 3.2x keeps condensed messages in the history, tagged ``condenseParent``, and the
    summary (``isSummary``, ``condenseId``); each summary searched the whole history for its
    messages and for the answer after it (summaries x messages reads)."""
    n = 300
    items: list[dict[str, Any]] = []
    ui_items: list[dict[str, Any]] = [{"ts": 1, "type": "say", "say": "text", "text": "task"}]
    for k in range(n):
        cid = f"c{k}"
        items += [
            {"role": "user", "content": [{"type": "text", "text": f"q{k}"}], "ts": 10 * k, "condenseParent": cid},
            {"role": "assistant", "content": [{"type": "text", "text": f"a{k}"}], "ts": 10 * k + 1,
             "condenseParent": cid},
            {"role": "assistant", "content": [{"type": "text", "text": f"summary {k}"}], "ts": 10 * k + 2,
             "isSummary": True, "condenseId": cid},
        ]
        ui_items.append({"ts": 10 * k + 2, "type": "say", "say": "condense_context",
                         "contextCondense": {"condenseId": cid, "prevContextTokens": 100, "newContextTokens": 10}})
    items.append({"role": "user", "content": [{"type": "text", "text": "end"}], "ts": 10 * n})
    ctx = ImportContext(path=tmp_path)
    ui = read_ui(ui_items, ctx)
    Counted.walks = Counted.reads = 0
    msgs, stats = history_messages(Counted(items), ui, ctx)
    assert stats["edits"] == n
    assert Counted.walks <= 4, Counted.walks  # was n + 2
    assert Counted.reads <= 4 * len(items), Counted.reads  # was ~n x len(items) / 2
    markers = [read_history_edit(m.meta, i) for i, m in enumerate(msgs) if m.kind == KIND_HISTORY_EDIT]
    assert [sum(b - a for a, b in e.ranges) for e in markers] == [2] * n  # each summary replaced its pair
