"""The ingest hot path's shortcuts keep the plain code's behaviour.

Records build through hand-written ``__init__`` methods, tool arguments go through a reused
JSON encoder, None binds through a registered adapter, and the Claude Code importer inlines
its per-record helpers: each is checked here against what it replaced.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
from pathlib import Path

import pytest

from context_forensics.importers.claude_code.convert import _ARGUMENTS_JSON
from context_forensics.records import Message, ToolCall, Usage
from context_forensics.store.db import Store
from helpers import parse


def test_message_init_keeps_dataclass_behaviour():
    m = Message("user", "hi", timestamp="t")
    assert (m.role, m.text, m.kind, m.name, m.tool_calls, m.parts, m.usage, m.model) == (
        "user", "hi", "message", None, (), (), None, None,
    )
    assert m.meta == {} and Message("user").meta is not Message("user").meta  # a new dict each time
    assert Message("user", meta=None).meta is None  # an explicit value is kept as given
    assert m == Message(role="user", text="hi", timestamp="t", meta={"other": 1})  # meta: compare=False
    assert hash(m) == hash(Message("user", "hi", timestamp="t"))
    assert dataclasses.replace(m, role="assistant").role == "assistant"
    assert pickle.loads(pickle.dumps(m)) == m
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.text = "changed"  # type: ignore[misc]
    with pytest.raises(ValueError, match="role must be one of"):
        Message("robot")
    with pytest.raises(ValueError, match="kind must be one of"):
        Message("user", kind="nope")


def test_usage_and_tool_call_init():
    u = Usage(1, completion_tokens=2, cache_read_tokens=3)
    assert u.to_dict() == {"prompt_tokens": 1, "completion_tokens": 2, "cache_read_tokens": 3}
    assert list(Usage(*range(1, 9)).to_dict()) == list(Usage.__slots__)  # field order
    assert Usage().is_empty() and Usage.from_dict({"context_window": 5}) == Usage(context_window=5)
    t = ToolCall("Bash", '{"command": "ls"}', id="toolu_1")
    assert t == ToolCall(name="Bash", arguments='{"command": "ls"}', id="toolu_1")
    assert ToolCall("Read").to_dict() == {"id": None, "name": "Read", "arguments": ""}


@pytest.mark.parametrize("value", [
    {"command": "grep -rn x .", "n": [1, 2.5, None, True, False, "é", "\u2028"]},
    {"nested": {"z": 1, "a": [{}, []]}, "big": 10**30, "tiny": 1e-300, "nan": float("nan")},
    [], {}, 0, 1.5, None, True, "plain", 'quote " and \\ backslash',
])
def test_tool_arguments_json_is_json_dumps(value):
    assert _ARGUMENTS_JSON(value) == json.dumps(value, ensure_ascii=False)


def test_none_binds_as_null(tmp_path: Path):
    with Store.open(tmp_path / "s.db") as store:
        conn = store.db.conn
        conn.execute("CREATE TABLE t (a TEXT, b INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(None, None), ("", 0)])
        assert [tuple(r) for r in conn.execute("SELECT typeof(a), typeof(b) FROM t ORDER BY rowid")] == [
            ("null", "null"), ("text", "integer"),
        ]


def _record(**fields) -> str:
    base = {"type": "user", "sessionId": "11111111-2222-4333-8444-555555555555", "isSidechain": False,
            "timestamp": "2026-01-01T00:00:00Z", "parentUuid": None}
    return json.dumps({**base, **fields})


def test_session_facts_follow_changes_back_and_forth(tmp_path: Path):
    """Versions, cwds and branches: first distinct values in order, whatever repeats between."""
    rows, parent = [], None
    for i, (version, cwd, branch) in enumerate(
        [("1", "/a", "main"), ("1", "/a", "main"), ("2", "/a", "dev"), ("1", "/b", "main"), ("3", "/b", "main"),
         ("3", "/b", 7), ("2", "/a", "dev")]
    ):
        uuid = f"00000000-0000-4000-8000-{i:012d}"
        rows.append(_record(uuid=uuid, parentUuid=parent, version=version, cwd=cwd, gitBranch=branch,
                            message={"role": "user", "content": f"prompt {i}"}))
        parent = uuid
    path = tmp_path / "11111111-2222-4333-8444-555555555555.jsonl"
    path.write_text("\n".join(rows) + "\n")
    _, (s,), ctx = parse(path, "claude_code")
    assert s.metadata["versions"] == ["1", "2", "3"]
    assert s.metadata["cwds"] == ["/a", "/b"] and s.metadata["cwd"] == "/a"
    assert s.metadata["gitBranches"] == ["main", "dev"]
    assert [m.text for m in s.messages] == [f"prompt {i}" for i in range(7)]
    assert not ctx.warnings


def test_pass_two_reads_records_out_of_file_order(tmp_path: Path):
    """A call split over records with tool results between them: read back by offset."""
    sid = "11111111-2222-4333-8444-555555555555"
    usage = {"input_tokens": 1, "output_tokens": 2}
    recs = [
        _record(uuid="u0", message={"role": "user", "content": "go"}),
        _record(type="assistant", uuid="a1", parentUuid="u0", message={
            "id": "msg_1", "role": "assistant", "model": "m", "usage": usage,
            "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"f": 1}}]}),
        _record(uuid="r1", parentUuid="a1", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "one"}]}),
        "",  # a blank line between records
        _record(type="assistant", uuid="a2", parentUuid="a1", message={
            "id": "msg_1", "role": "assistant", "model": "m", "usage": usage,
            "content": [{"type": "tool_use", "id": "t2", "name": "Grep", "input": {"p": "x"}}]}),
        _record(uuid="r2", parentUuid="a2", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t2", "content": "two"}]}),
    ]
    path = tmp_path / f"{sid}.jsonl"
    path.write_text("\n".join(recs) + "\n")
    _, (s,), ctx = parse(path, "claude_code")
    assert [(m.role, m.text) for m in s.messages] == [("user", "go"), ("assistant", ""), ("tool", "one"),
                                                     ("tool", "two")]
    assert [(c.name, c.arguments) for c in s.messages[1].tool_calls] == [("Read", '{"f": 1}'), ("Grep", '{"p": "x"}')]
    assert [m.name for m in s.messages[2:]] == ["Read", "Grep"]
    assert s.messages[1].meta["records"] == 2
    assert not ctx.warnings
