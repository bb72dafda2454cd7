"""Letta agent files (.af): one session per agent, the in-context list as the window at the end,
Letta's summaries as recorded compactions, memory blocks in the system message, tools as schemas.

Fixtures (tests/fixtures/letta/, README there): a 0.6.47 file with a summary in the middle, a 1.0
file with a sleeptime group. The corpus files (letta-agent-file/) are read every one.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from context_forensics import importers
from context_forensics.analysis.check import check_session
from context_forensics.analysis.check.replay_checks import final_window
from context_forensics.analysis.replay import replay_session
from context_forensics.importers.base import read_head
from context_forensics.records import KIND_COMPACTION_SUMMARY, KIND_HISTORY_EDIT
from context_forensics.store.db import Store
from helpers import CORPUS, FIXTURES, corpus, parse

HERE = FIXTURES / "letta"
PRE = HERE / "summary_0.6.47.af"
V1 = HERE / "sleeptime_group_1.0.af"
CORPUS_FILES = ("composio_github_star_agent.af", "deep_research_agent.v0.7.10.af", "lettabot-builder.af",
                "outreach_workflow_agent.af")


def edits(messages):
    return [(i, m.meta["history_edit"]) for i, m in enumerate(messages) if m.kind == KIND_HISTORY_EDIT]


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "c.db") as st:
        yield st


def test_pre_1_0_summary_is_a_recorded_compaction_of_the_evicted_messages():
    fmt, (s,), ctx = parse(PRE)
    assert fmt == "letta"
    kinds = [m.kind for m in s.messages]
    # the three messages the summariser hid leave at a marker right before the summary
    assert edits(s.messages) == [(4, {"type": "compaction", "action": "summarized", "ranges": [[1, 4]],
                                      "source": "letta in_context_message_ids", "removed": 3})]
    assert kinds[5] == KIND_COMPACTION_SUMMARY and "hidden from view" in s.messages[5].text
    # what the alert says: "prior messages (3 of 5 total messages) ... a summary of the previous 3 messages"
    assert s.messages[5].meta["letta_summary"] == {"hidden": 3, "total": 5, "summarized": 3, "time": "t4"}
    # in_context_message_indices [0, 4, 5, 6, 7] are the stored messages at positions 0, 5, 6, 7, 8
    assert s.metadata["final_window"] == [0, 5, 6, 7, 8]
    assert s.metadata["context_window"] == 32000 and s.model == "gpt-4o-mini"
    assert [b["in_system_message"] for b in s.metadata["memory_blocks"]] == [True, True]
    assert s.metadata["tools"][0]["function"]["name"] == "send_message"
    assert [c.name for m in s.messages for c in m.tool_calls] == ["send_message", "send_message"]
    assert not ctx.skipped and not ctx.warnings


def test_v1_group_one_session_per_agent_sleeptime_under_its_manager():
    fmt, sessions, ctx = parse(V1)
    assert fmt == "letta"
    builder, sleeper = sessions
    assert (builder.external_id, sleeper.external_id) == ("agent-0", "agent-1")
    assert sleeper.parent_external_id == "agent-0" and builder.parent_external_id is None
    assert sleeper.metadata["group"]["role"] == "member" and builder.metadata["group"]["role"] == "manager"
    assert sleeper.metadata["group"]["manager_type"] == "sleeptime"
    # the summary heads the window: its evicted messages are not in a 1.0 export (only the window is)
    assert sleeper.messages[1].kind == KIND_COMPACTION_SUMMARY and not edits(sleeper.messages)
    assert sleeper.metadata["final_window"] == [0, 1, 2, 3, 4]
    # line-numbered blocks (sleeptime / letta_v1 agents on Anthropic models) are found in the system message
    assert all(b["in_system_message"] for s in sessions for b in s.metadata["memory_blocks"])
    assert builder.messages[2].parts == ({"type": "thinking", "text": "Check the human block."},)
    assert (builder.metadata["context_window"], sleeper.metadata["context_window"]) == (200000, 180000)
    assert ctx.skipped == {"content part 'image'": 1}


def test_sniff_claims_letta_files_and_only_letta_claims_them():
    paths = [PRE, V1] + [CORPUS / "letta-agent-file" / "letta-agent-file" / n for n in CORPUS_FILES
                          if (CORPUS / "letta-agent-file" / "letta-agent-file" / n).exists()]
    for p in paths:
        head = read_head(p)
        claimed = [imp.name for imp in importers.registry().values() if imp.sniff(p, head)]
        assert claimed == ["letta"], (p.name, claimed)


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_final_replay_window_is_the_in_context_list(store, name):
    from context_forensics.store.ingest import ingest_paths

    st = store
    ingest_paths(st, [corpus(f"letta-agent-file/letta-agent-file/{name}")])
    for row in st.sessions():
        sid = row["id"]
        md = row["metadata"]
        rep = replay_session(st, sid, policy="recorded", use_cache=False)
        end = {i for a, b in rep.end_window for i in range(a, b)}
        markers = {i for i, sm in enumerate(st.messages(sid)) if sm.message.kind == KIND_HISTORY_EDIT}
        assert end - markers == set(md["final_window"]), (name, row["external_id"])
        res = check_session(st, sid)
        assert "final_window" in res.ran and not res.found, res.found
        # the limit Letta ran the agent under (llm_config), not the table's: no overflow at 154k of 180k
        assert (rep.model.context_limit, rep.model.reserved_output) == (md["context_window"], md["max_output_tokens"])
        assert not any(st_.get("overflow") for st_ in rep.steps)


def test_corpus_counts():
    path = corpus("letta-agent-file/letta-agent-file/outreach_workflow_agent.af")
    _, (s,), _ = parse(path)
    # 10 stored, only the system message in context: 9 evicted at the end (message_buffer_autoclear)
    assert s.metadata["stored_messages"] == 10 and s.metadata["final_window"] == [0]
    assert edits(s.messages) == [(10, {"type": "eviction", "action": "evicted", "ranges": [[1, 10]],
                                       "source": "letta in_context_message_ids", "removed": 9,
                                       "rests_on": s.messages[10].meta["history_edit"]["rests_on"]})]
    _, sessions, _ = parse(corpus("letta-agent-file/letta-agent-file/lettabot-builder.af"))
    assert [len(x.messages) for x in sessions] == [3, 188]
    assert sessions[1].messages[1].kind == KIND_COMPACTION_SUMMARY


def test_final_window_check_reports_a_disagreement():
    inp = SimpleNamespace(session={"metadata": {"final_window": [0, 2, 3], "final_window_source": "the file"}},
                          replay=SimpleNamespace(end_window=[[0, 2]]),
                          messages=[SimpleNamespace(message=SimpleNamespace(kind="message")) for _ in range(4)])
    (found,) = final_window(inp)
    assert found.figures["missing"] == [2, 3] and found.figures["extra"] == [1]
    inp.replay.end_window = [[0, 1], [2, 4]]
    assert final_window(inp) == []
