"""The ``cline`` importer: Cline / Roo Code / Kilo Code task folders (one folder, one session).

Fixtures (tests/fixtures/cline/) are hand-written in the shapes of Cline's ContextManager
(conversationHistoryDeletedRange, inclusive, 0 and 1 kept) and Roo's condense /
context-management (condenseParent + isSummary summary stored before the kept tail of 3;
truncationParent + isTruncationMarker notice); the corpus tests read ../shared/corpus/cline.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from context_forensics.analysis.replay import replay_session
from context_forensics.config.models import ModelSpec
from context_forensics.importers.base import ImportContext
from context_forensics.importers.cline import Cline
from context_forensics.records import KIND_COMPACTION_SUMMARY, KIND_HISTORY_EDIT, Session, read_history_edit
from context_forensics.store.db import Store
from helpers import CORPUS, FIXTURES

HERE = FIXTURES / "cline"
CLINE = HERE / "cline_task/globalStorage/saoudrizwan.claude-dev/tasks/1700000000000"
CLINE_UI = HERE / "cline_ui_only/1700000000000"
ROO = HERE / "roo_task/globalStorage/rooveterinaryinc.roo-cline/tasks/7f3c"
KILO = HERE / "kilo_task/globalStorage/kilocode.kilo-code/tasks/9a1b"
SPEC = ModelSpec("tiny", "approx", 100_000, 0, "left_truncation")


def _parse(path: Path):
    ctx = ImportContext(path=path)
    sessions = list(Cline().parse(path, ctx))
    assert len(sessions) == 1
    s = sessions[0]
    s.messages = list(s.messages)
    return s, ctx


def _edits(msgs):
    return [(i, read_history_edit(m.meta, i)) for i, m in enumerate(msgs) if m.kind == KIND_HISTORY_EDIT]


def _replay(tmp_path, s: Session):
    with Store.open(tmp_path / "s.db") as store:
        with store.transaction():
            store.write_session(Session(s.external_id, s.format, messages=iter(s.messages)), sid="x", source="x",
                                source_hash="x", parent_id=None)
        return replay_session(store, "x", SPEC, policy="recorded")


def test_cline_folder_usage_from_ui_and_the_deleted_range_where_it_was_made():
    s, ctx = _parse(CLINE)
    msgs = s.messages
    assert s.metadata["agent"] == "cline" and s.metadata["agent_evidence"].startswith("path globalStorage/")
    assert s.metadata["files_in_context"] == ["f1.py"] and s.metadata["focus_chain"].startswith("- [x]")
    assert s.model == "claude-sonnet-4-5-20250929" and s.metadata["window"] == "api_conversation_history.json"
    # 8 history messages + 1 marker; the range [2, 3] was made for the 4th call (answer index 7).
    assert [m.meta.get("history_index") for m in msgs] == [0, 1, 2, 3, 4, 5, 6, None, 7]
    (at, edit), = _edits(msgs)
    assert at == 7 and edit.ranges == ((2, 4),) and edit.action == "evicted" and edit.type == "truncation"
    assert edit.source == "cline:conversationHistoryDeletedRange" and edit.figures["deleted_range"] == [2, 3]
    answers = [m for m in msgs if m.role == "assistant"]
    # prompt = tokensIn + cacheReads + cacheWrites of the call's api_req_started (5 + 60+100k + 40)
    assert [m.usage.prompt_tokens for m in answers] == [105, 205, 305, 405]
    assert [m.usage.completion_tokens for m in answers] == [10, 30, 50, 70]
    assert all(m.meta["usage_source"] == "ui_messages api_req_started" and m.meta["cost"] == 0.01 for m in answers)
    assert answers[1].meta["metrics_tokens"] == {"prompt": 5, "completion": 30, "cached": 300}
    assert answers[0].tool_calls[0].name == "read_file" and not ctx.warnings


def test_cline_deleted_range_replays_as_a_recorded_eviction(tmp_path):
    s, _ = _parse(CLINE)
    rep = _replay(tmp_path, s)
    events = [(k, e) for k, st in enumerate(rep.steps) for e in st["events"] if e["type"] == "history_edit"]
    assert [k for k, _ in events] == [3]  # the 4th call, and only it, was sent the edited history
    assert events[0][1]["removed"] == 2 and events[0][1]["recorded"] is True
    assert sorted(rep.steps[3]["newly_lost"]) == [2, 3]
    assert not rep.steps[2]["newly_lost"]


def test_ui_messages_alone_give_a_session_without_a_recorded_window():
    s, ctx = _parse(CLINE_UI)
    msgs = s.messages
    assert "not recorded" in s.metadata["window"] and any("not the history" in w for w in ctx.warnings)
    assert s.metadata["reconstructed"].startswith("from ui_messages.json")  # `sessions` / `show` say so
    assert [m.role for m in msgs] == ["user", "assistant"] * 3 + ["user", "system", "assistant"]
    assert msgs[0].text == "request at -1"
    (at, edit), = _edits(msgs)
    assert at == 7 and edit.ranges == ((2, 4),)
    assert [m.usage.prompt_tokens for m in msgs if m.role == "assistant"] == [105, 205, 305, 405]
    assert s.metadata["agent"] == "cline" and s.metadata["agent_evidence"].startswith("fields:")


def test_roo_condense_is_a_summarized_edit_before_the_first_call_that_saw_it(tmp_path):
    s, ctx = _parse(ROO)
    msgs = s.messages
    assert s.metadata["agent"] == "roo"
    # stored: 0 u, 1-3 condensed, 4 summary, 5-7 kept tail, 8 the first answer after the condense
    assert [m.meta.get("history_index") for m in msgs] == [0, 1, 2, 3, 5, 6, 7, None, 4, 8]
    (at, edit), = _edits(msgs)
    assert at == 7 and edit.action == "summarized" and edit.ranges == ((1, 4),)
    assert edit.figures == {"tokens_before": 5000, "tokens_after": 900, "cost": 0.02}
    summary = msgs[8]
    assert summary.kind == KIND_COMPACTION_SUMMARY and summary.text == "Summary: steps 1 and 2 done."
    # Roo's calls carry no history index: paired with the answers in order, the summary left out
    assert [m.usage.prompt_tokens for m in msgs if m.role == "assistant" and m.usage] == [137, 237, 337, 437]
    rep = _replay(tmp_path, s)
    events = [(k, e) for k, st in enumerate(rep.steps) for e in st["events"] if e["type"] == "history_edit"]
    assert [k for k, _ in events] == [3] and events[0][1]["action"] == "summarized"
    assert events[0][1]["removed"] == 3
    assert not ctx.warnings


def test_kilo_truncation_without_a_ui_log_is_placed_after_the_kept_tail():
    s, _ = _parse(KILO)
    msgs = s.messages
    assert s.metadata["agent"] == "kilo"
    (at, edit), = _edits(msgs)
    assert [m.meta.get("history_index") for m in msgs] == [0, 1, 2, 4, 5, None, 3, 6]
    assert edit.ranges == ((1, 3),) and edit.action == "evicted" and edit.figures["placed"] == "after the kept tail"
    assert msgs[at + 1].role == "user" and msgs[at + 1].text.startswith("[Sliding window truncation")


def test_agent_told_by_fields_when_the_path_says_nothing(tmp_path):
    import shutil

    shutil.copytree(ROO, tmp_path / "task")
    s, _ = _parse(tmp_path / "task")
    assert s.metadata["agent"] == "roo" and s.metadata["agent_evidence"].startswith("fields:")


def test_sniff_claims_the_folder_and_its_files_not_other_folders(tmp_path):
    imp = Cline()
    assert imp.sniff(CLINE, b"") and imp.sniff(CLINE_UI, b"")
    assert not imp.sniff(HERE, b"") and not imp.sniff(tmp_path, b"")
    f = CLINE / "api_conversation_history.json"
    assert imp.sniff(f, f.read_bytes()[:4096])
    other = tmp_path / "messages.json"
    other.write_text('[{"role": "user", "content": "hi"}]')
    assert not imp.sniff(other, other.read_bytes())
    # a file named on its own is read as its folder: the same session
    s, _ = _parse(f)
    assert s.external_id == "1700000000000" and len(s.messages) == 9


def test_the_folder_is_one_unit_and_anthropic_messages_leaves_its_files_alone():
    from context_forensics import importers
    from context_forensics.store.ingest import expand

    units, ignored = expand([HERE], fmt=None, recursive=True)
    assert sorted((u.path.name, u.importer.name) for u in units) == [
        ("1700000000000", "cline"), ("1700000000000", "cline"), ("7f3c", "cline"), ("9a1b", "cline")]
    assert ignored == []
    f = CLINE / "api_conversation_history.json"
    assert not importers.get("anthropic_messages").sniff(f, f.read_bytes())


def test_a_bad_entry_costs_that_entry(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "ui_messages.json").write_text(
        '[{"ts": 1, "type": "say", "say": "api_req_started", "text": "{\\"request\\": \\"go\\", \\"tokensIn\\": 3}"},'
        ' 7, {"ts": 2, "type": "say", "say": "text", "text": "done"}]')
    s, ctx = _parse(folder)
    assert [m.role for m in s.messages] == ["user", "assistant"] and s.messages[1].text == "done"
    assert ctx.bad == 1 and any("ui entry 1" in w for w in ctx.warnings)


# ---------------------------------------------------------------- the real corpus

TASKS = {
    # folder: (messages, assistant calls with usage, history edits, results written as text: tool messages).
    # Each result block is its own tool message (issue 30): a turn of results plus environment
    # details is a tool message per result and a user message for the rest.
    "Cline-Xray/94013f8": (71, 24, 0, 23),
    "Cline-Xray/9dbbc27": (10, 4, 0, 2),
    "Cline-Xray/task_sample": (181, 53, 4, 71),
    "Online-Card-Architecture/exported_conversation_1769053680585": (140, 47, 0, 46),
    "Online-Card-Architecture/exported_task_1769064454592": (109, 36, 0, 37),
}


@pytest.mark.parametrize("rel", sorted(TASKS))
def test_corpus_task_folders(rel):
    path = CORPUS / "cline" / rel
    if not path.exists():
        pytest.skip("corpus not available")
    s, ctx = _parse(path)
    n, calls, edits, results = TASKS[rel]
    msgs = s.messages
    assert len(msgs) == n
    assert sum(1 for m in msgs if m.role == "assistant" and m.usage) == calls
    assert len(_edits(msgs)) == edits
    assert sum(m.role == "tool" for m in msgs) == s.metadata["results_as_text"] == results
    assert s.metadata["agent"] == "cline" and ctx.bad == 0


def test_corpus_deleted_ranges_are_the_recorded_ones():
    path = CORPUS / "cline/Cline-Xray/task_sample"
    if not path.exists():
        pytest.skip("corpus not available")
    s, _ = _parse(path)
    edits = _edits(s.messages)
    # ui entries 137, 259, 299, 424 first carry them, after the calls with history index 33, 63, 75, 101
    assert [e.figures["deleted_range"] for _, e in edits] == [[2, 17], [2, 39], [2, 57], [2, 79]]
    assert [s.messages[at + 1].meta["history_index"] for at, _ in edits] == [35, 65, 77, 103]
    # API-history messages 2-17 are stored positions 2-37 (their results are tool messages of their own)
    assert edits[0][1].ranges == ((2, 38),)
    (lo, hi), = edits[0][1].ranges
    assert {m.meta["history_index"] for m in s.messages[lo:hi]} == set(range(2, 18))


def test_the_working_folder_the_environment_details_name_is_the_sessions_cwd():
    from context_forensics.importers.cline.importer import working_folder
    from context_forensics.records import Message

    env = ("<environment_details>\n# Current Time\n2/7/2026\n\n# Current {} Directory ({}) Files\nsrc/\n"
           "</environment_details>")
    assert working_folder([Message("user", env.format("Working", "/workspaces/app"))]) == "/workspaces/app"
    assert working_folder([Message("user", env.format("Workspace", "c:/Users/a/proj"))]) == "c:/Users/a/proj"  # Roo
    assert working_folder([Message("assistant", env.format("Working", "/x")), Message("user", "hi")]) is None
    s, _ = _parse(CLINE)
    assert "cwd" not in s.metadata  # the fixture's turns carry no environment details: nothing is made up


@pytest.mark.parametrize("rel, cwd", [("Cline-Xray/94013f8", "d:/Users/obuzunov/myg/jira-dashboard"),
                                      ("Cline-Xray/9dbbc27", "D:/Users/obuzunov/Desktop"),
                                      ("Cline-Xray/task_sample", "c:/Users/alex_/mygems/Jira-Xray-Gem"),
                                      ("Online-Card-Architecture/exported_task_1769064454592",
                                       "/workspaces/Online-Card-Architecture")])
def test_corpus_working_folders(rel, cwd):
    path = CORPUS / "cline" / rel
    if not path.exists():
        pytest.skip("corpus not available")
    s, _ = _parse(path)
    assert s.metadata["cwd"] == cwd
