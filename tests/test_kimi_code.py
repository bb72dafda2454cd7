"""Kimi Code CLI wire journals (``kimi_code``): the history rebuilt as agent-core does, per-step
recorded usage, a recorded compaction, sub-agents and state.json.

Fixtures: fixtures/kimi_code/ (written from kimi-code d723cc47, see its README). Corpus:
../shared/corpus/kimi-code-cli-wire/ (jazzyalex/agent-sessions captures, counted by hand in
PROVENANCE.md). Before this importer every one of these files was left alone.
"""

from __future__ import annotations

from context_forensics import importers
from context_forensics.importers.base import read_head
from context_forensics.importers.kimi_code import KimiCode
from context_forensics.records import KIND_COMPACTION_SUMMARY, KIND_HISTORY_EDIT, read_history_edit
from context_forensics.store.db import Store
from context_forensics.store.ingest import ingest_paths
from helpers import FIXTURES, corpus, parse_all

S = FIXTURES / "kimi_code" / "session_0a0b0c0d-1111-4222-8333-444455556666"
MAIN, SUB = S / "agents" / "main" / "wire.jsonl", S / "agents" / "agent-0" / "wire.jsonl"
SID = "0a0b0c0d-1111-4222-8333-444455556666"
IMP = KimiCode()
SMALL = "kimi-code-cli-wire/agent-sessions/small.jsonl"
SUBAGENT = "kimi-code-cli-wire/agent-sessions/subagent_agent-0.jsonl"


def _claimants(path):
    head = read_head(path)
    return [name for name, imp in importers.registry().items() if imp.sniff(path, head)]


def test_only_this_importer_claims_the_journals():
    for p in (MAIN, SUB, corpus(SMALL), corpus(SUBAGENT)):
        assert _claimants(p) == ["kimi_code"], p
    assert _claimants(S / "state.json") == []


def test_no_other_fixture_is_claimed():
    others = [p for p in FIXTURES.rglob("*.json*") if p.is_file() and "kimi_code" not in p.parts]
    assert others and not [p for p in others if IMP.sniff(p, read_head(p))]


def test_the_main_journal_rebuilds_the_history_with_usage_and_its_compaction():
    (s,), ctx = parse_all(IMP, MAIN)
    assert dict(ctx.skipped) == {"unknown record 'future.kind'": 1}
    assert (s.external_id, s.global_id, s.title, s.parent_external_id) == (SID, True, "fix the parser", None)
    m = s.messages
    assert [(x.role, x.kind) for x in m] == [
        ("system", "message"), ("user", "message"), ("assistant", "message"), ("tool", "message"),
        ("user", "message"),  # appended while Read_0 was open: after its result, as the agent does
        ("assistant", "message"), ("system", KIND_HISTORY_EDIT), ("user", KIND_COMPACTION_SUMMARY),
        ("user", "message"), ("assistant", "message")]
    # per-call usage: the prompt is inputOther + inputCacheRead + inputCacheCreation
    assert [(x.usage.prompt_tokens, x.usage.completion_tokens, x.usage.cache_read_tokens)
            for x in m if x.role == "assistant"] == [(1000, 40, 100), (1090, 20, 1000), (150, 12, 0)]
    assert m[2].tool_calls[0].name == "Read" and m[3].tool_call_id == "Read_0"
    assert m[2].parts == ({"type": "thinking", "text": "Read the parser first."},)
    # the compaction keeps the system prompt and the newest real user message, summarizes the rest
    edit = read_history_edit(m[6].meta, 6)
    assert edit.type == "compaction" and edit.action == "summarized"
    assert edit.ranges == ((1, 4), (5, 6)) and edit.figures["tokens_before"] == 1130
    assert m[7].meta["compaction_call_usage"]["prompt_tokens"] == 1200
    md = s.metadata
    assert md["usage_records"] == {"turn": 3, "matched": 3}
    assert md["requests"] == {"loop": 3, "compaction": 1, "retries": 0}
    assert [t["name"] for t in md["tools"]] == ["Read", "Bash"]
    assert md["state"]["workDir"] == "/home/u/proj"


def test_a_subagent_journal_is_its_own_session_under_the_main_one(tmp_path):
    (s,), _ = parse_all(IMP, SUB)
    assert (s.external_id, s.parent_external_id) == (f"{SID}/agent-0", SID)
    with Store.open(tmp_path / "s.db") as store:
        ingest_paths(store, [S], recursive=True)
        rows = {r["external_id"]: r for r in store.sessions()}
        assert rows[f"{SID}/agent-0"]["parent_id"] == rows[SID]["id"]


def test_the_corpus_journals():
    (main,), ctx = parse_all(IMP, corpus(SMALL))
    assert not ctx.skipped
    # system prompt, "hi", then "hi" and the steer "stop"; both steps were cancelled before any output
    assert [(m.role, m.text) for m in main.messages][1:] == [("user", "hi"), ("user", "hi"), ("user", "stop")]
    assert main.metadata["empty_steps"] == 2 and main.metadata["requests"]["loop"] == 13
    assert main.external_id == "9eb1bf57-c1af-48a5-b658-0e8d9fe794f5" and main.title == "hi"
    (sub,), ctx = parse_all(IMP, corpus(SUBAGENT))
    assert not ctx.skipped
    assert [m.role for m in sub.messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [m.usage.prompt_tokens for m in sub.messages if m.role == "assistant"] == [
        10982 + 1792, 1652 + 12544, 271 + 14080]
    # the state.json beside it lists only "main": it is not this sub-agent's
    assert sub.metadata["subagent"] is True and sub.parent_external_id is None
    assert "names no agent" in sub.metadata["state"]["note"]
