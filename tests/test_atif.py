"""ATIF (Harbor RFC 0001): every corpus file and the hand-written fixtures (tests/fixtures/atif/README.md)."""

from __future__ import annotations

import json
import shutil

from context_forensics import importers
from context_forensics.importers.base import read_head
from context_forensics.records import KIND_COMPACTION_SUMMARY, KIND_HISTORY_EDIT, read_history_edit
from helpers import FIXTURES, corpus, parse

RUN = FIXTURES / "atif" / "tool_run.trajectory.json"
CONT = FIXTURES / "atif" / "tool_run.cont-1.json"
TERMINUS = "atif/inspect_scout/terminus_2_hello-world-context-summarization-linear-history.trajectory.json"
TERMINUS_CONT = "atif/inspect_scout/terminus_2_hello-world-context-summarization-linear-history.trajectory.cont-1.json"
REGEX_LOG = "atif/openagents/regex-log-20251211-161750-ba4ddb16/trajectory.json"
ORCHESTRATOR = "atif/openagents/session-2025-12-05T07-45-57-649Z-x8251x.atif.json"


def _detect(p):
    return importers.detect(p, read_head(p))


def test_fixture_run_and_its_continuation_are_one_session():
    fmt, sessions, ctx = parse(RUN)
    assert fmt == "atif" and len(sessions) == 1
    s = sessions[0]
    msgs = s.messages
    # system, user, agent+tool, agent+tool, compaction marker, 2 copied steps, agent
    assert [(m.role, m.kind) for m in msgs] == [
        ("system", "message"), ("user", "message"), ("assistant", "message"), ("tool", "message"),
        ("assistant", "message"), ("tool", "message"), ("system", KIND_HISTORY_EDIT),
        ("user", KIND_COMPACTION_SUMMARY), ("user", KIND_COMPACTION_SUMMARY), ("assistant", "message")]
    a = msgs[2]
    assert a.tool_calls[0].name == "Bash" and a.tool_calls[0].id == "call_1"
    assert json.loads(a.tool_calls[0].arguments) == {"command": "pytest -q"}
    assert a.parts == ({"type": "thinking", "text": "Run pytest first."},)
    assert a.usage.prompt_tokens == 1200 and a.usage.cache_read_tokens == 1000 and a.usage.completion_tokens == 40
    assert a.meta["cost_usd"] == 0.0012
    assert msgs[3].tool_call_id == "call_1" and msgs[3].text == "1 failed: test_add"
    assert msgs[5].text == "edited calc.py"  # content parts
    edit = read_history_edit(msgs[6].meta, 6)
    assert edit.type == "compaction" and edit.action == "summarized" and edit.ranges == ((0, 6),)
    assert [m.usage.prompt_tokens for m in msgs if m.usage] == [1200, 1290, 310]
    assert s.external_id == "run-7f3a" and s.model == "claude-sonnet-4-5"
    assert s.metadata["files"] == [RUN.name, CONT.name] and s.metadata["atif_schema_version"] == "ATIF-v1.8"
    assert "atif_problems" not in s.metadata and not ctx.skipped and not ctx.warnings


def test_a_continuation_beside_its_first_file_is_read_with_it_not_alone():
    assert _detect(RUN).name == "atif"
    assert _detect(CONT) is None  # read with the file that names it
    assert importers.get("atif").sidecars(RUN) == [CONT.resolve()]


def test_a_continuation_alone_is_a_session_of_its_own(tmp_path):
    alone = tmp_path / CONT.name
    shutil.copy(CONT, alone)
    fmt, sessions, ctx = parse(alone)
    assert fmt == "atif"
    kinds = [m.kind for m in sessions[0].messages]
    assert kinds == [KIND_COMPACTION_SUMMARY, KIND_COMPACTION_SUMMARY, "message"]


def test_a_missing_continuation_is_said(tmp_path):
    first = tmp_path / RUN.name
    shutil.copy(RUN, first)
    fmt, sessions, ctx = parse(first)
    assert len(sessions[0].messages) == 7
    assert any("not beside this file" in w for w in ctx.warnings)


def test_terminus_summarization_run_corpus():
    path = corpus(TERMINUS)
    assert _detect(corpus(TERMINUS_CONT)) is None
    fmt, sessions, ctx = parse(path)
    (s,) = sessions
    msgs = s.messages
    # file 1: user, 3 × (agent, terminal output), the compaction; file 2: 4 copied steps, 4 × (agent, output)
    assert len(msgs) == 1 + 3 * 2 + 1 + 4 + 4 * 2
    assert sum(m.kind == KIND_HISTORY_EDIT for m in msgs) == 1
    assert sum(m.kind == KIND_COMPACTION_SUMMARY for m in msgs) == 4
    assert [m.usage.prompt_tokens for m in msgs if m.usage] == [682, 750, 820, 1700, 850, 850, 850]
    # terminal output without a call: the harness's next prompt
    assert all(m.role == "user" and "atif_observation" in m.meta for m in msgs if m.text.startswith("New Terminal"))
    assert ctx.skipped == {"subagent_trajectory_ref (file not read)": 3}
    assert s.metadata["atif_schema_version"] == "ATIF-v1.7" and len(s.metadata["files"]) == 2
    assert any("prefix" in w for w in ctx.warnings)  # the ref names trajectory.cont-1.json


def test_non_conformant_openagents_file_is_read_as_far_as_it_goes():
    fmt, sessions, ctx = parse(corpus(REGEX_LOG))
    (s,) = sessions
    assert fmt == "atif" and len(s.messages) == 9  # every step's message; no tool call, no result
    assert ctx.skipped == {"invalid observation (no results[])": 5,
                           "invalid tool_call (id/name, not tool_call_id/function_name)": 5}
    problems = s.metadata["atif_problems"]
    assert set(problems) == {"schema_version '1.4' is not ATIF-v1.x", "agent.model instead of agent.model_name",
                             "observation without results[]", "tool_calls of another shape (id/name)"}
    assert s.model == "claude-sonnet-4-20250514" and s.outcome == "success"
    assert not any(m.usage for m in s.messages)  # no per-step metrics: no recorded usage
    assert len(ctx.warnings) == 4


def test_orchestrator_event_log_corpus():
    fmt, sessions, ctx = parse(corpus(ORCHESTRATOR))
    (s,) = sessions
    # 8 steps (7 system, 1 agent) + 3 observation results read as their JSON text
    assert len(s.messages) == 11 and sum(m.role == "assistant" for m in s.messages) == 1
    assert s.metadata["atif_problems"] == {"content that is neither text nor content parts (dict)": 3}
    assert s.title.startswith("mechacoder-orchestrator")


def test_sniff_needs_atif_steps():
    imp = importers.get("atif")
    from pathlib import Path

    not_steps = b'{"schema_version": "ATIF-v1.8", "agent": {"name": "x"}, "steps": [{"role": "user"}]}'
    other = b'{"schema_version": "2.0", "agent": {}, "steps": [{"step_id": 1, "source": "user"}]}'
    assert not imp.sniff(Path("x.json"), not_steps)
    assert not imp.sniff(Path("x.json"), other)


def test_a_trajectory_that_does_not_read_fails_alone_in_a_walk(tmp_path):
    """The fuzzer (seed 32, inputs 1 and 2): finding an ATIF file's continuation reads the file
    while the walk is listed (``sidecars``); a truncated or too deeply nested one raised
    InputError out of ``ctxf.ingest`` and nothing was read. It is the file's own clear error now,
    and the other files of the walk are read."""
    import context_forensics as ctxf

    good = FIXTURES / "atif" / "tool_run.trajectory.json"
    text = good.read_text()
    walk = tmp_path / "walk"
    walk.mkdir()
    at = text.index("[", text.index('"steps"'))
    (walk / "deep.trajectory.json").write_text(text[:at + 1] + "[" * 300 + text[at + 1:])
    shutil.copy(good, walk / "ok.trajectory.json")
    shutil.copy(good.parent / "tool_run.cont-1.json", walk / "tool_run.cont-1.json")
    res = ctxf.ingest(walk, db=tmp_path / "s.db", recursive=True).to_dict()
    by_name = {f["path"].rsplit("/", 1)[-1]: f for f in res["files"]}
    assert by_name["ok.trajectory.json"]["status"] == "ingested", by_name
    assert by_name["deep.trajectory.json"]["status"] == "failed", by_name
    assert "deeper than 200 levels" in by_name["deep.trajectory.json"]["error"]
    cut = tmp_path / "cut.trajectory.json"
    cut.write_text(text[:147])
    res = ctxf.ingest(cut, fmt="atif", db=tmp_path / "s.db").to_dict()
    assert res["files"][0]["status"] == "failed" and "malformed JSON" in res["files"][0]["error"], res
