"""Cline's context optimisation (_cline_context): the duplicate-file-read rewrite and the 30% rule,
on small hand-built histories, and on the corpus task whose truncations it decides."""

from __future__ import annotations

import json

import pytest

from context_forensics.analysis.replay.policies._cline_context import (
    DUPLICATE_FILE_READ_NOTICE,
    TRUNCATION_NOTICE,
    ClineContext,
    api_history_from_ui,
)
from context_forensics.analysis.replay.policies._compaction_presets import cline_max_allowed
from helpers import CORPUS

LIMIT = 160_000


def _user(*texts, image=0):
    blocks = [{"type": "text", "text": t} for t in texts]
    if image:
        blocks.append({"type": "image", "source": {"type": "base64", "data": "A" * image}})
    return {"role": "user", "content": blocks}


def _asst(text="ok"):
    return {"role": "assistant",
            "content": [{"type": "text", "text": text}, {"type": "tool_use", "input": {"x": "y" * 999}}]}


def _read(path, body):
    return f"[read_file for '{path}'] Result:\n{body}"


def _history(body=1000, other=0, image=0):
    """task, reply, read a.py, reply, [other], reply, read a.py again: request 4's user message last."""
    return [_user("task"), _asst("r1"),
            _user(_read("a.py", "x" * body), "<environment_details>e</environment_details>"),
            _asst("r2"), _user("y" * other, image=image), _asst("r3"), _user(_read("a.py", "x" * body))]


def _expected(h, body):
    header = "[read_file for 'a.py'] Result:"
    old = len(header) + 1 + body
    new = len(header) + 1 + len(DUPLICATE_FILE_READ_NOTICE)
    counted = 0
    for m in h:
        for b in m["content"]:
            counted += len(b.get("text", "")) + len(b.get("source", {}).get("data", ""))
    return old - new, counted


def test_a_duplicate_read_saving_thirty_percent_skips_the_truncation():
    h = _history(body=1000)
    saved, counted = _expected(h, 1000)
    assert saved / counted >= 0.3
    d = ClineContext(h).before_request(4, LIMIT, LIMIT)
    assert (d.rewritten, d.saved, d.counted, d.truncate, d.deleted_range) == (1, saved, counted, False, None)


def test_under_thirty_percent_truncates_and_tool_use_blocks_count_nothing():
    h = _history(body=1000, other=3000)
    saved, counted = _expected(h, 1000)
    assert saved / counted < 0.3
    cc = ClineContext(h)
    d = cc.before_request(4, LIMIT, LIMIT)
    assert d.truncate and d.counted == counted and d.deleted_range == (2, 3)  # half the rest, ending on an assistant
    assert cc.updates[1][0] == [TRUNCATION_NOTICE]


def test_image_data_counts_by_its_base64_length():
    h = _history(body=1000, image=5000)
    saved, counted = _expected(h, 1000)
    d = ClineContext(h).before_request(4, LIMIT, LIMIT)
    assert d.counted == counted and d.truncate  # the image alone pushes the saving under 30%


def test_no_duplicate_truncates_and_under_the_limit_nothing_happens():
    h = _history(body=1000)
    h[-1] = _user(_read("b.py", "x" * 1000))  # another file: nothing to rewrite
    assert ClineContext(h).before_request(4, LIMIT - 1, LIMIT) is None
    d = ClineContext(h).before_request(4, LIMIT, LIMIT)
    assert d.rewritten == 0 and d.truncate


def test_a_relative_read_and_an_absolute_edit_are_two_files():
    h = _history(body=1000)
    h[-1] = _user("[replace_in_file for '/abs/a.py'] Result:\nsaved.\n\n<final_file_content "
                  "path=\"a.py\">\nq\n</final_file_content>")
    d = ClineContext(h).before_request(4, LIMIT, LIMIT)
    assert d.rewritten == 0 and d.truncate


def test_rewrites_persist_and_the_deleted_range_does_not_count():
    h = _history(body=1000) + [_asst("r4"), _user(_read("a.py", "z" * 10))]
    cc = ClineContext(h)
    first = cc.before_request(4, LIMIT, LIMIT)
    assert not first.truncate and 2 in cc.updates
    cc.deleted = (2, 3)  # messages 2 and 3 out of the window
    second = cc.before_request(5, LIMIT, LIMIT)
    # message 6's read is now the duplicate; message 2 (rewritten, deleted) is neither candidate nor counted
    assert second.start == 4 and second.rewritten == 1
    counted = sum(len(b.get("text", "")) for i in (0, 1, 4, 5, 6, 7, 8) for b in h[i]["content"])
    assert second.counted == counted


# -- the corpus task (Cline 3.57, claude-opus-4-6, ui_messages.json only) whose four truncations are recorded

TASK = CORPUS / "cline" / "Cline-Xray" / "task_sample" / "ui_messages.json"


def test_the_corpus_task_truncates_where_cline_did():
    if not TASK.exists():
        pytest.skip("corpus not available")
    items = json.loads(TASK.read_text())
    recorded = {}  # request -> the deleted range first seen on the entries after it
    k, last = 0, None
    for item in items:
        if item.get("say") == "api_req_started":
            k += 1
        rng = item.get("conversationHistoryDeletedRange")
        if rng and tuple(rng) != last:
            recorded[k] = last = tuple(rng)
    msgs, usage = api_history_from_ui(items)
    cc = ClineContext(msgs)
    got = {}
    checked = []
    for req in range(2, len(usage) + 1):
        d = cc.before_request(req, usage[req - 2], cline_max_allowed(200_000))
        if d is not None:
            checked.append((req, d.truncate, round(d.fraction, 4) if d.fraction is not None else None))
            if d.truncate:
                got[req] = d.deleted_range
    assert got == recorded == {18: (2, 17), 33: (2, 39), 39: (2, 57), 52: (2, 79)}
    # request 27: over the limit, but the rewrites save 35% and Cline sends it untruncated;
    # request 52: 25.85% only because the user's pasted image (128,460 base64 characters) counts
    assert checked == [(18, True, 0.1612), (27, False, 0.3529), (33, True, 0.0531), (39, True, 0.1355),
                       (52, True, 0.2585)]
