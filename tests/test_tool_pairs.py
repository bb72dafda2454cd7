"""One notion of a tool call and its result (issue 30, item 6): ``tool_output.pair_tools`` pairs
every result with its call, results written as user text included (Cline, Roo and Kilo's
``[read_file for 'a.ts'] Result:``, Aider's answers, a text harness's observations), and every
analysis reads that pairing: ``no_orphan_tool_results`` and ``max_tool_output_share``, diverge's
results, the replay's groups, and ``tool_pairs`` for ``ctxf check``.

Fixtures (tests/fixtures/tool_pairs/): cline_text_results (native tool_use blocks answered by text
blocks, in the shape of the corpus' Online-Card-Architecture task of Cline 3.5x, 2026-01),
cline_xml_results (Cline's XML tool tags, a result's header a block of its own: src/core/Cline.ts
pushToolResult at b5d03dd, 2024-11), cline_ui_results (ui_messages.json alone, a request's
blocks joined by blank lines, tool_result blocks rendered "[Tool]": the corpus' Cline-Xray
tasks), cline_xml_request.json (the XML conversation as an Anthropic request
body: no Cline importer, user text results) and aider.llm.history (Aider's commit
answer and a /run output, aider/coders/base_prompts.py and aider/prompts.py at 02c48fa).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from context_forensics.analysis.diverge import extract_events
from context_forensics.analysis.replay import prepare
from context_forensics.cli import app
from context_forensics.records import KIND_CLEARED_TOOL_RESULT, Message, ToolCall
from context_forensics.store.db import Store
from context_forensics.tool_output import pair_tools, tool_outputs, tool_pairs
from helpers import FIXTURES

HERE = FIXTURES / "tool_pairs"
CLINE_NATIVE = HERE / "cline_text_results" / "1769000000000"
CLINE_XML = HERE / "cline_xml_results" / "1730000000000"
CLINE_UI = HERE / "cline_ui_results" / "1770000000000"
CLINE_REQUEST = HERE / "cline_xml_request.json"
AIDER = HERE / "aider.llm.history"
RULES = "audit:\n  rules:\n    no_orphan_tool_results: {}\n    max_tool_output_share: {max: 0.5}\n"
KEYS = {"calls", "results", "unanswered", "orphan_results"}


def m(role: str, text: str = "", **kw) -> Message:
    return Message(role=role, text=text, **kw)


def call(name: str, cid: str | None) -> ToolCall:
    return ToolCall(name, "{}", cid)


# ---------------------------------------------------------------- the pairing


def test_tool_pairs_contract_by_id_and_the_last_call_left_out():
    msgs = [m("user", "go"), m("assistant", tool_calls=(call("read", "a"), call("read", "b"))),
            m("tool", "A", tool_call_id="a"),
            m("assistant", tool_calls=(call("bash", "c"),)),  # "b" never answered: the log lacks it
            m("tool", "C", tool_call_id="c"), m("tool", "?", tool_call_id="zzz"),  # no call has "zzz"
            m("assistant", tool_calls=(call("bash", "d"),))]  # the last call: it may still be running
    out = tool_pairs(msgs, "openai_chat")
    assert set(out) == KEYS and out["calls"] == 4 and out["results"] == 3
    assert out["unanswered"] == [{"seq": 1, "step": 1, "tool": "read", "call_id": "b"}]
    assert out["orphan_results"] == [{"seq": 5, "call_id": "zzz"}]


def test_a_result_without_an_id_answers_the_latest_calls_first_free_call_of_its_tool():
    msgs = [m("user", "go"), m("assistant", tool_calls=(call("read", None), call("bash", None))),
            m("tool", "out", name="bash"), m("tool", "file"), m("assistant", "done")]
    p = pair_tools(msgs, None)
    assert [p.calls[a].tool if a is not None else None for a in p.answers] == [None, None, "bash", "read", None]
    assert tool_pairs(msgs)["unanswered"] == [] and tool_pairs(msgs)["orphan_results"] == []


def test_results_written_as_user_text_answer_their_call_in_any_format():
    msgs = [m("user", "<task>fix it</task>"),
            m("assistant", tool_calls=(call("read_file", "t1"), call("read_file", "t2"))),
            m("user", "[read_file for 'a.py'] Result:\nprint(1)"),
            m("user", "Tool [read_file] was not executed because a tool has already been used in this message."),
            m("assistant", "<execute_command>\n<command>pytest</command>\n</execute_command>"),  # an XML tag
            m("user", "[execute_command for 'pytest'] Result:\nCommand executed."),
            m("user", "[ERROR] You did not use a tool in your previous response! Please retry with a tool use."),
            m("assistant", "done")]
    p = pair_tools(msgs, "anthropic_messages")
    assert p.flags == (False, False, True, True, False, True, False, False)  # feedback is no result
    assert [p.calls[p.answers[i]].call_id for i in (2, 3)] == ["t1", "t2"]
    text = p.calls[p.answers[5]]
    assert (text.written, text.tool, text.pos, text.call_id) == ("text", "execute_command", 4, None)
    assert tool_pairs(msgs, "anthropic_messages") == {"calls": 3, "results": 3, "unanswered": [], "orphan_results": []}


def test_aider_answers_are_results_in_aider_logs_only():
    msgs = [m("user", "Add a flag"), m("assistant", "app.py\n```python\n<<<<<<< SEARCH\n```"),
            m("user", "I committed the changes with git hash 1a2b3c4 & commit msg: feat"),
            m("assistant", "Ok.", kind="scripted"),
            m("user", "I ran this command:\n\npytest\n\nAnd got this output:\n\n1 failed"),
            m("user", "I didn't see any properly formatted edits in your reply?!")]  # feedback: no result
    assert tool_outputs(msgs, "aider").flags == (False, False, True, False, True, False)
    assert [c.tool for c in pair_tools(msgs, "aider").calls] == ["edit", "shell"]
    assert not any(tool_outputs(msgs, "sharegpt").flags)  # a person may type those words anywhere else


def test_calls_of_a_reply_cut_off_are_not_unanswered():
    msgs = [m("user", "go"), m("assistant", tool_calls=(call("edit", "e"),), meta={"stop_reason": "aborted"}),
            m("user", "stop, I did it myself"), m("assistant", tool_calls=(call("bash", "f"),)),
            m("user", "why?"), m("assistant", "because")]
    p = pair_tools(msgs, "pi")
    assert [c.call_id for c in p.cut_off()] == ["e"] and [c.call_id for c in p.unanswered()] == ["f"]
    assert [u["call_id"] for u in tool_pairs(msgs, "pi")["unanswered"]] == ["f"]


def test_a_cleared_result_and_a_stored_message_keep_their_seq():
    class Stored:
        def __init__(self, seq, message):
            self.seq, self.message = seq, message

    msgs = [Stored(10, m("assistant", tool_calls=(call("read", "a"),))),
            Stored(11, m("tool", "[cleared]", kind=KIND_CLEARED_TOOL_RESULT, tool_call_id="a")),
            Stored(12, m("tool", "late", tool_call_id="nope"))]
    assert tool_pairs(msgs) == {"calls": 1, "results": 2, "unanswered": [],
                                "orphan_results": [{"seq": 12, "call_id": "nope"}]}


# ---------------------------------------------------------------- Cline's importer


def _audit(tmp_path, *paths):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(RULES)
    db = tmp_path / "s.db"
    r = CliRunner().invoke(app, ["audit", *map(str, paths), "--db", str(db), "--config", str(cfg), "--json"])
    report = json.loads(r.stdout)
    return db, {s["source"]: (s, {x["rule"]: x for x in s["results"]}) for s in report["sessions"]}


@pytest.mark.parametrize("folder, calls, text_calls", [(CLINE_NATIVE, 5, 0), (CLINE_XML, 0, 3), (CLINE_UI, 3, 1)])
def test_cline_results_written_as_text_are_tool_messages_answering_their_calls(tmp_path, folder, calls, text_calls):
    db, audited = _audit(tmp_path, folder)
    (session, res), = audited.values()
    orphans, share = res["no_orphan_tool_results"], res["max_tool_output_share"]
    assert orphans["status"] == "pass" and orphans["figure"] == 0, orphans
    assert share["figure"] > 0.3, share  # the file read fills the window (it read 0% before)
    with Store.open(db) as store:
        msgs = store.messages(session["id"])
        tools = [sm.message for sm in msgs if sm.message.role == "tool"]
        assert tools and all(t.meta.get("written_as") == "user text" and t.name for t in tools)
        assert not any(sm.message.role == "user" and "] Result:" in sm.message.text[:200] for sm in msgs)
        p = pair_tools(msgs, "cline")
        assert sum(c.written == "call" for c in p.calls) == calls
        assert sum(c.written == "text" for c in p.calls) == text_calls
        assert all(a is not None for a, f in zip(p.answers, p.flags) if f)  # every result answers a call


def test_cline_native_results_carry_the_tool_use_ids_in_order():
    from helpers import parse

    _, (s,), _ = parse(CLINE_NATIVE)
    tools = [(t.name, t.tool_call_id, t.text.split("\n", 1)[0][:40]) for t in s.messages if t.role == "tool"]
    assert tools == [("read_file", "toolu_01A", "[read_file for 'cli.py'] Result:"),
                     ("read_file", "toolu_01B", "Tool [read_file] was not executed becaus"),
                     ("replace_in_file", "toolu_01C", "[replace_in_file for 'cli.py'] Result:"),
                     ("execute_command", "toolu_01D", "[execute_command for 'pytest -q 'tests/[")]
    assert s.metadata["results_as_text"] == 4
    # the rest of each turn stays the user's: the environment details, the focus chain's reminder
    users = [t.text for t in s.messages if t.role == "user"]
    assert all(u.lstrip().startswith(("<task>", "<environment_details>", "# TODO LIST")) for u in users)


def test_an_xml_result_takes_its_content_block_and_leaves_the_feedback():
    from helpers import parse

    _, (s,), _ = parse(CLINE_XML)
    read = next(t for t in s.messages if t.role == "tool")
    assert read.text.startswith("[read_file for 'cli.py'] Result:\nimport argparse") and "environment" not in read.text
    feedback = [t for t in s.messages if t.role == "user" and "<feedback>" in t.text]
    assert len(feedback) == 1 and "also update the README" in feedback[0].text


def test_cline_requests_read_by_another_importer_pair_the_same(tmp_path):
    db, audited = _audit(tmp_path, CLINE_REQUEST)
    (session, res), = audited.values()
    assert session["format"] == "anthropic_messages"
    assert res["no_orphan_tool_results"]["status"] == "pass"
    assert res["max_tool_output_share"]["detail"]["results_as_text"] == 2  # a turn of blocks is one message here
    assert res["max_tool_output_share"]["figure"] > 0.3


def test_aider_results_count_as_tool_output(tmp_path):
    db, audited = _audit(tmp_path, AIDER)
    (session, res), = audited.values()
    share = res["max_tool_output_share"]
    assert session["format"] == "aider" and share["detail"]["results_as_text"] == 2
    assert share["figure"] > 0.2 and "wrote as user text" in share["message"]  # the pytest output


# ---------------------------------------------------------------- every analysis sees the same pairs


@pytest.mark.parametrize("path", [CLINE_NATIVE, CLINE_XML, CLINE_UI, CLINE_REQUEST, AIDER])
def test_diverge_and_the_replay_read_the_same_pairs(tmp_path, path):
    db, audited = _audit(tmp_path, path)
    (session, _), = audited.values()
    with Store.open(db) as store:
        _same_pairs(store, session["id"], session["format"])


def _same_pairs(store: Store, sid: str, fmt: str) -> None:
    """Diverge's result events are the pairing's results, each under the action of its call;
    the replay groups each result with its call's reply."""
    msgs = store.messages(sid)
    p = pair_tools(msgs, fmt)
    run = extract_events(msgs, fmt)
    results = [e for e in run.events if e.type == "result"]
    assert {e.seq for e in results} == {sm.seq for sm, f, k in zip(msgs, p.flags, msgs) if f and
                                         sm.message.kind == "message"}
    for e in results:
        pos = next(i for i, sm in enumerate(msgs) if sm.seq == e.seq)
        called = p.calls[p.answers[pos]] if p.answers[pos] is not None else None
        if e.parent is not None:
            assert called is not None and run.events[e.parent].seq == called.seq
    inp = prepare(store, sid, None, policy="recorded").inp
    for pos, a in enumerate(p.answers):
        if a is not None:
            assert int(inp.group[pos]) == p.calls[a].pos


# ---------------------------------------------------------------- the real corpus


def test_on_the_corpus_every_analysis_reads_the_same_pairs(corpus_ingest):
    db, _ = corpus_ingest
    with Store.open(db) as store:
        sessions = store.sessions()
        assert len({s["format"] for s in sessions}) >= 10
        for s in sessions:
            _same_pairs(store, s["id"], s["format"])


def test_on_the_corpus_every_cline_task_pairs_its_results(corpus_ingest):
    from context_forensics.analysis.audit import run_rule
    from context_forensics.analysis.audit.rules import Ctx
    from context_forensics.config.audit_rules import RULE_PARAMS, RuleConfig
    from context_forensics.config.settings import load_config

    db, _ = corpus_ingest
    cfg = load_config(None)
    with Store.open(db) as store:
        tasks = store.sessions(fmt="cline")
        assert len(tasks) == 5
        for s in tasks:
            pairs = tool_pairs(store.messages(s["id"]), "cline")
            assert pairs["results"] > 0 and pairs["unanswered"] == [] and pairs["orphan_results"] == [], s["source"]
            ctx = Ctx(store, s["id"], cfg, s)
            orphans = run_rule(ctx, RuleConfig("no_orphan_tool_results", {}))
            share = run_rule(ctx, RuleConfig("max_tool_output_share", dict(RULE_PARAMS["max_tool_output_share"])))
            assert orphans.status == "pass", (s["source"], orphans.message)
            assert share.figure > 0.05, (s["source"], share.message)  # every task reads files into its window
