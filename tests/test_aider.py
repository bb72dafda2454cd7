"""Aider: the LLM history (``aider``: each call's exact request) and the chat history
(``aider_chat``: rounded recorded usage), and the folder walk that finds their dot files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from context_forensics import importers
from context_forensics.analysis.check.replay_checks import PROMPT_TOLERANCE
from context_forensics.analysis.drift.goal import goal_from_messages
from context_forensics.analysis.replay import replay_session
from context_forensics.analysis.replay.pins import goal_seq
from context_forensics.cli import app
from context_forensics.importers.aider import parse_tokens_line
from context_forensics.records import Usage, read_history_edit
from context_forensics.store.db import Store
from context_forensics.store.inputs import Walk, walk
from helpers import FIXTURES, corpus, parse, replay_json, run

LLM = FIXTURES / "aider" / "llm.history"
CHAT = FIXTURES / "aider" / "chat.history.md"
# imitates the corpus doc_processor chat history (Aider v0.83.1): a /reset typed as "/res", then an
# /architect turn whose reply Aider hands to its editor (the proposal again as #### lines)
ARCHITECT = FIXTURES / "aider" / "architect.chat.history.md"


def held_before(messages, answer):
    """For each assistant message ``answer(m)`` picks: (it, the messages the history holds before it,
    once the history_edit markers before it took theirs out)."""
    gone: set[int] = set()
    out = []
    for i, m in enumerate(messages):
        if m.kind == "history_edit":
            for a, b in read_history_edit(m.meta, i).ranges:
                gone.update(range(a, b))
        elif m.role == "assistant" and answer(m):
            out.append((m, [messages[j] for j in range(i) if j not in gone and messages[j].kind != "history_edit"]))
    return out


def windows(messages):
    """For each answer with a recorded request: (the multiset of hashes the history holds before
    it, the request's hashes)."""
    return [(Counter(h.hash for h in held), Counter(m.meta["request"]["input_hashes"]))
            for m, held in held_before(messages, lambda m: "request" in m.meta)]


def held_before_calls(messages):
    """For each call (an assistant message that is no scripted text): the texts its window holds."""
    return [[h.text for h in held] for _, held in held_before(messages, lambda m: m.kind == "message")]


def test_sniffs_are_specific():
    assert importers.detect(LLM).name == "aider"
    assert importers.detect(CHAT).name == "aider_chat"
    assert importers.detect(FIXTURES / "aider" / "chat.history.md") is not importers.get("aider")
    assert not importers.get("aider").sniff(CHAT, CHAT.read_bytes())
    assert not importers.get("aider_chat").sniff(LLM, LLM.read_bytes())
    assert not importers.get("aider_chat").sniff(Path("README.md"), b"# A project\n\nText.\n")


def test_llm_history_window_before_each_call_is_exactly_its_request():
    fmt, [s], ctx = parse(LLM)
    msgs = s.messages
    calls = [m for m in msgs if "call_index" in m.meta]
    assert [m.meta["call_index"] for m in calls] == [0, 1, 2]
    # only a call's answer is a step: the assistant turns Aider writes into the prompt are scripted
    assert [m for m in msgs if m.role == "assistant" and m.kind == "message"] == calls
    assert any(m.role == "assistant" and m.kind == "scripted" for m in msgs)
    assert s.metadata["agent"] == "aider" and s.metadata["calls"] == 3 and s.metadata["failed_calls"] == 1
    pairs = windows(msgs)
    assert len(pairs) == 3 and all(held == sent for held, sent in pairs)
    # call 2 re-sent the files with new contents: the old version left at a rebuild marker
    markers = [m for m in msgs if m.kind == "history_edit"]
    assert markers and markers[0].meta["history_edit"]["type"] == "rebuild"
    old_files = next(i for i, m in enumerate(msgs) if 'print("v1")' in m.text)
    assert any(a <= old_files < b for a, b in read_history_edit(markers[0].meta, msgs.index(markers[0])).ranges)
    # the failed call: its request kept, an empty answer marked, not re-sent by the retry
    failed = calls[1]
    assert failed.text == "" and failed.meta["no_response"] is True
    assert calls[2].text.startswith("test_app.py") and calls[2].timestamp == "2025-05-04T17:08:20"
    # the rebuilt prompt puts the files after the chat: the sent order is not the history's
    assert calls[1].meta["request"].get("input_differs") is True
    assert calls[0].meta["request"].get("input_differs") is None
    assert calls[0].meta["request"]["sent_at"] == "2025-05-04T17:06:58"
    # text without the role prefixes, blank lines kept
    system = msgs[0]
    assert system.role == "system" and system.text == (
        "Act as an expert software developer.\n\nAlways use best practices when coding.")
    assert ctx.skipped["call without an answer (failed or interrupted)"] == 1


def test_llm_history_replay_follows_the_rebuild(tmp_path):
    db = str(tmp_path / "s.db")
    r = CliRunner().invoke(app, ["ingest", str(LLM), "--db", db, "--json"])
    assert r.exit_code == 0, r.stderr
    sid = json.loads(r.stdout)["files"][0]["sessions"][0]
    sid = sid["id"] if isinstance(sid, dict) else sid
    r = CliRunner().invoke(app, ["replay", sid, "--db", db, "--policy", "recorded", "-m", "gpt-4o",
                                 "--all-steps", "--json"])
    assert r.exit_code == 0, r.stderr
    steps = json.loads(r.stdout)["replays"][0]["steps"]
    edits = [e for st in steps for e in st["events"] if e["type"] == "history_edit"]
    assert edits and edits[0]["edit"] == "rebuild" and edits[0]["recorded"] is True
    _, [s], _ = parse(LLM)
    old = next(i for i, m in enumerate(s.messages) if 'print("v1")' in m.text)
    after = [st for st in steps if st["message_seq"] > edits[0]["at"]]
    assert after and old in after[0]["evicted"] and old in after[0]["newly_lost"]
    assert not any(old in st["restored"] for st in after)
    assert all(st["counts"]["evicted"] >= 1 for st in after)


def test_tokens_line_figures_keep_their_rounding():
    u = parse_tokens_line("Tokens: 3.2k sent, 222 received.")
    assert (u["prompt_tokens"], u["prompt_tokens_error"], u["completion_tokens"], u["completion_tokens_error"]) == (
        3200, 50, 222, 0)
    u = parse_tokens_line("Tokens: 13k sent, 2.1k cache write, 1.0k cache hit, 1,204 received.")
    assert (u["prompt_tokens"], u["prompt_tokens_error"]) == (13000, 500)
    assert (u["cache_creation_tokens"], u["cache_read_tokens"], u["completion_tokens"]) == (2100, 1000, 1204)
    assert u["completion_tokens_error"] == 0 and u["rounded"] is True
    assert parse_tokens_line("Tokens: 1,234 sent, 5 received.")["rounded"] is False
    assert parse_tokens_line("no tokens here") is None


def test_chat_history_runs_usage_commands_and_clear():
    fmt, sessions, ctx = parse(CHAT)
    assert fmt == "aider_chat" and len(sessions) == 2
    a, b = sessions
    assert a.started_at == "2025-05-04T17:02:36" and b.started_at == "2025-05-05T09:00:00"
    assert a.metadata["agent"] == "aider" and a.metadata["aider_version"] == "0.82.2"
    assert a.metadata["models"] == ["gemini/gemini-2.5-pro", "openai/qwen3:32b"]
    roles = [(m.role, m.kind) for m in a.messages]
    assert roles == [("user", "message"), ("assistant", "message"), ("user", "message"), ("assistant", "message"),
                     ("user", "message"), ("assistant", "message"), ("system", "history_edit"),
                     ("user", "message"), ("assistant", "message")]
    msgs = a.messages
    assert msgs[0].text == "Add a --verbose flag\nto app.py"
    # a reply's own "#### " heading is no user input
    assert "#### A heading the model wrote" in msgs[1].text and "More reply text." in msgs[1].text
    assert msgs[2].text == "now add tests"  # "/code now add tests" is a command
    u = msgs[1].meta["usage_rounded"]
    assert (u["prompt_tokens"], u["prompt_tokens_error"]) == (3200, 50)
    # the call's recorded usage, its rounding the error bar (3.2k: 3,150..3,250), kept through the
    # "Applied edit" note that follows it
    assert msgs[1].usage == Usage(prompt_tokens=3200, completion_tokens=u["completion_tokens"],
                                  prompt_tokens_error=50, completion_tokens_error=u["completion_tokens_error"] or None)
    assert msgs[1].meta["edits_applied"] == ["app.py"]
    u3 = msgs[3].meta["usage_rounded"]
    assert (u3["cache_creation_tokens"], u3["cache_read_tokens"], u3["completion_tokens"]) == (2100, 1000, 1204)
    assert msgs[3].meta["cost_rounded"] == {"message_usd": 0.0014, "session_usd": 0.0071,
                                            "text": "Cost: $0.0014 message, $0.0071 session."}
    # the multi-line output after it is no reply
    assert not any("SearchReplaceNoExactMatch" in m.text for m in msgs)
    assert msgs[1].model == "gemini/gemini-2.5-pro" and msgs[5].model == "openai/qwen3:32b"
    edit = read_history_edit(msgs[6].meta, 6)
    assert edit.type == "clear" and edit.ranges == ((0, 6),) and edit.source == "aider_chat:/clear"
    assert a.metadata["usage_lines"] == 3 and b.messages[1].meta["usage_rounded"]["prompt_tokens"] == 1234
    assert ctx.skipped["aider command (not sent to the model)"] == 3


def test_walk_finds_aider_dot_files_and_skips_tool_folders(tmp_path):
    (tmp_path / ".aider.chat.history.md").write_text("x")
    (tmp_path / ".aider.llm.history").write_text("x")
    (tmp_path / ".aider.input.history").write_text("x")  # prompt input, no log
    (tmp_path / ".env").write_text("SECRET=1")
    (tmp_path / ".gitignore").write_text("x")
    (tmp_path / "log.jsonl").write_text("x")
    for d in (".git", ".venv", "node_modules", "__pycache__", ".tox", ".mypy_cache", ".aider.tags.cache.v3"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "inside.jsonl").write_text("x")
        (tmp_path / d / ".aider.llm.history").write_text("x")
    (tmp_path / "env" / "lib").mkdir(parents=True)  # a virtualenv under another name
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr")
    (tmp_path / "env" / "lib" / "x.jsonl").write_text("x")
    (tmp_path / ".gemini" / "tmp").mkdir(parents=True)  # agents keep logs in dot folders
    (tmp_path / ".gemini" / "tmp" / "session.json").write_text("x")
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / ".aider.llm.history.md").write_text("x")  # a renamed --llm-history-file
    found = walk(tmp_path, True, lambda p: False, Walk())
    assert sorted(p.relative_to(tmp_path).as_posix() for p in found) == [
        ".aider.chat.history.md", ".aider.llm.history", ".gemini/tmp/session.json", "log.jsonl",
        "repo/.aider.llm.history.md",
    ]


def test_corpus_llm_histories():
    # Simple-Calulator: call 18 leaves at two markers, the chat Aider summarized and the rebuilt rest
    for rel, calls, failed, n, markers in (("aider/Simple-Calulator/.aider.llm.history", 34, 14, 182, 34),
                                           ("aider/doc_processor/.aider.llm.history.md", 18, 0, 250, 17)):
        fmt, [s], ctx = parse(corpus(rel))
        assert fmt == "aider" and s.metadata["calls"] == calls and s.metadata["failed_calls"] == failed
        assert len(s.messages) == n and sum(m.kind == "history_edit" for m in s.messages) == markers
        pairs = windows(s.messages)
        assert len(pairs) == calls and all(held == sent for held, sent in pairs)
        assert s.model and s.metadata["runs_from"] == ".aider.chat.history.md"
        # one step per call: the assistant turns Aider wrote into its prompts are no calls
        assert sum(m.role == "assistant" and m.kind == "message" for m in s.messages) == calls


def test_corpus_chat_histories():
    # doc_processor: "/res" (line 102) is /reset, which Aider confirms at line 103 (the count of 0
    # clears before was wrong); 6 /architect turns hand their reply to the editor (a marker each,
    # and one when the architect's chat comes back at the next call: 5, the last editor call is the
    # run's last call); --restore-chat-history reloads the file twice (the LLM history beside it;
    # a restore marker each)
    for rel, users, replies, usage, cost, clears, editors, markers, restores in (
            ("aider/Simple-Calulator/.aider.chat.history.md", 16, 20, 20, 12, 1, 0, 1, None),
            ("aider/doc_processor/.aider.chat.history.md", 17, 18, 18, 18, 1, 6, 14, 2)):
        fmt, [s], ctx = parse(corpus(rel))
        # the file's own messages; the rest are Aider's (restored, resent, its "I made those changes")
        own = [m for m in s.messages if not {"aider_restored", "aider_resent", "aider_source"} & set(m.meta)
               or m.meta.get("aider_editor") or m.meta.get("aider_coder")]
        kinds = Counter((m.role, m.kind) for m in own)
        assert fmt == "aider_chat"
        assert kinds == Counter({("user", "message"): users, ("assistant", "message"): replies,
                                 ("system", "history_edit"): markers})
        assert (s.metadata["clears"], s.metadata.get("editor_calls", 0)) == (clears, editors)
        assert s.metadata["restore_chat_history"].get("restores") == restores
        assert sum("usage_rounded" in m.meta for m in s.messages) == usage == s.metadata["usage_lines"]
        assert sum("cost_rounded" in m.meta for m in s.messages) == cost
        # every Tokens line is its reply's recorded usage, with the rounding as its error bar
        used = [m for m in s.messages if m.usage is not None]
        assert len(used) == usage and all(m.meta["usage_rounded"]["prompt_tokens"] == m.usage.prompt_tokens
                                          and m.meta["usage_rounded"]["prompt_tokens_error"]
                                          == (m.usage.prompt_tokens_error or 0) for m in used)


def test_chat_history_keeps_what_aider_did_with_the_edits():
    _, sessions, _ = parse(CHAT)
    msgs = sessions[0].messages
    assert msgs[1].meta["edits_applied"] == ["app.py"] and msgs[1].meta["edit_format"] == "diff-fenced"
    assert "edits_applied" not in msgs[3].meta  # its block failed ("failed to match"): nothing applied
    assert msgs[5].meta["edit_format"] == "whole"  # after "/model openai/qwen3:32b"


def test_corpus_chat_history_failed_block_and_the_others():
    _, (s,), _ = parse(corpus("aider/Simple-Calulator/.aider.chat.history.md"))
    reported = [(i, m.meta.get("edits_applied"), [f["path"] for f in m.meta.get("edits_failed", [])],
                 m.meta.get("edits_others_applied")) for i, m in enumerate(s.messages)
                if "edits_applied" in m.meta or "edits_failed" in m.meta]
    # Simple-Calulator line 1072: "# 1 SEARCH/REPLACE block failed to match!" for EmojiBubble.jsx,
    # "# The other 5 SEARCH/REPLACE blocks were applied successfully."
    assert (13, None, ["src/components/EmojiBubble.jsx"], [5]) in reported
    assert sum(len(a or []) for _, a, _, _ in reported) == 18  # the file's 18 "> Applied edit to" lines


SUMMARY = FIXTURES / "aider" / "llm-summary.history"


def test_llm_history_a_chat_summary_is_a_recorded_compaction(tmp_path):
    """Issue 30, verdicts read against the logs: when Aider summarizes the chat (aider/history.py
    ChatSummary: its done messages replaced by one user message opening with prompts.summary_prefix,
    "I spoke to you previously about a number of things."), the LLM history records it: the next call
    sends the summary where the chat was. ctxf counted Simple-Calulator's summary (call 18, after
    /model openai/qwen3:32b) as a rebuild that evicted 33 messages, no compaction. The fixture imitates
    Aider 0.82.2's LLM history (three calls; the third after a model switch, with a new system prompt
    and examples, and the summary): the chat turns of the call before (the requests, the answer, "I
    updated the files." / "Ok.") are summarized at a compaction marker; the old system prompt and
    examples left at a rebuild marker; the repo map and files, sent again, stay."""
    _, [s], _ = parse(SUMMARY)
    msgs = s.messages
    markers = [(i, m.meta["history_edit"]) for i, m in enumerate(msgs) if m.kind == "history_edit"]
    kinds = [(e["type"], e["action"]) for _, e in markers]
    assert ("compaction", "summarized") in kinds and ("rebuild", "evicted") in kinds, kinds
    at, comp = next((i, e) for i, e in markers if e["type"] == "compaction")
    summarized = {j for a, b in read_history_edit(msgs[at].meta, at).ranges for j in range(a, b)}
    texts = {msgs[j].text.split("\n", 1)[0] for j in summarized}
    assert texts == {"keep the dark theme as the default and add a light one", "App.js",
                     "I updated the files.", "Ok.", "add a toggle button"}, texts
    rebuilt = next(i for i, e in markers if e["type"] == "rebuild" and i > at)  # the same call's
    evicted = {j for a, b in read_history_edit(msgs[rebuilt].meta, rebuilt).ranges for j in range(a, b)}
    assert {msgs[j].role for j in evicted} >= {"system"} and not evicted & summarized
    assert all(not msgs[j].text.startswith(("Here are summaries", "I switched")) for j in evicted | summarized)
    summary = next(m for m in msgs if m.text.startswith("I spoke to you previously"))
    assert summary.meta.get("aider_summary") is True
    # the window before each call is still exactly its request
    assert all(held == sent for held, sent in windows(msgs))
    db = str(tmp_path / "s.db")
    r = CliRunner().invoke(app, ["replay", str(SUMMARY), "--db", db, "-m", "gpt-4o", "--policy", "recorded", "--json"])
    assert r.exit_code == 0, r.stderr
    rep = json.loads(r.stdout)["replays"][0]
    assert rep["summary"]["compactions"] == 1 and rep["summary"]["compaction_steps"] == [3]
    assert rep["steps"][2]["counts"]["summarized"] == 6


def test_corpus_simple_calulator_summary_is_one_compaction_at_call_18(tmp_path):
    """The corpus: Simple-Calulator's LLM history holds Aider's summary from call 18 (line 28402) to
    call 21, gone after /reset (call 22): one compaction, at step 18; the chat before it (the
    dark/light-mode request's copy Aider kept, seq 31) summarized there, not evicted."""
    path = corpus("aider/Simple-Calulator/.aider.llm.history")
    db = str(tmp_path / "s.db")
    r = CliRunner().invoke(app, ["replay", str(path), "--db", db, "--json"])
    assert r.exit_code == 0, r.stderr
    rep = json.loads(r.stdout)["replays"][0]
    assert rep["summary"]["compactions"] == 1 and rep["summary"]["compaction_steps"] == [18]
    assert 31 in rep["steps"][17]["summarized"]


ASK1, LIST = "what does the DocumentProcessor class do?", "list the steps to implement it"
SAVE = "save that list into task.md"
STEPS = "1. Load the documents.\n2. Split them into chunks.\n3. Embed and store the chunks."


def test_chat_history_reset_prefix_and_the_architect_editor_own_window():
    """Before: "/res" (Aider runs the one command a prefix matches: /reset) cleared nothing, and the
    editor's call read the whole chat; Aider's editor is a Coder with an empty chat that reads the
    architect's proposal only (architect_coder.reply_completed), and the architect's chat goes on
    with "I made those changes to the files." / "Ok."."""
    fmt, [s], _ = parse(ARCHITECT)
    msgs = s.messages
    proposal = next(m.text for m in msgs if m.meta.get("aider_editor"))
    assert proposal.startswith("I will instruct the editor engineer") and STEPS in proposal
    held = held_before_calls(msgs)
    assert held[0] == [ASK1]
    assert held[1] == [LIST]  # the /res took the first turn out
    assert held[2][:2] == [LIST, STEPS] and held[2][2:] == [SAVE]
    assert held[3] == [proposal]  # the editor's own window
    assert held[4] == [LIST, STEPS, SAVE, proposal, "I made those changes to the files.", "Ok.", "what is next?"]
    edits = [read_history_edit(m.meta, i) for i, m in enumerate(msgs) if m.kind == "history_edit"]
    assert [(e.type, e.source) for e in edits] == [("clear", "aider_chat:/reset"), ("editor", "aider_chat:architect"),
                                                   ("editor", "aider_chat:architect")]
    # the clear is in the log (the command and Aider's output); the editor's window is Aider's code
    assert "rests_on" not in edits[0].figures
    assert all("architect_coder.py" in e.figures["rests_on"] for e in edits[1:])
    editor = next(m for m in msgs if m.meta.get("aider_coder") == "editor")
    assert editor.meta["edits_applied"] == ["task.md"] and editor.meta["usage_rounded"]["prompt_tokens"] == 900
    # the chat resent after the editor is no call: its replies are scripted, every step a Tokens line
    assert sum(m.role == "assistant" and m.kind == "message" for m in msgs) == s.metadata["usage_lines"] == 5
    assert (s.metadata["clears"], s.metadata["editor_calls"]) == (1, 1)
    assert s.metadata["restore_chat_history"]["in_force"] is None


def test_chat_history_a_command_that_did_not_run_clears_nothing(tmp_path):
    # "/re" matches four commands; "/cl" only /clear today, but Aider versions with /clipboard said it
    # was ambiguous: its answer decides
    for typed in ("#### /re  \n> Ambiguous command: /read-only, /reasoning-effort, /report, /reset  ",
                  "#### /cl  \n> Ambiguous command: /clear, /clipboard  "):
        text = ARCHITECT.read_text().replace("#### /res  \n> All files dropped and chat history cleared.  ", typed)
        path = tmp_path / ".aider.chat.history.md"
        path.write_text(text)
        _, [s], _ = parse(path)
        assert held_before_calls(s.messages)[1][:2] == [ASK1, "It indexes documents and answers questions about "
                                                        "them, with placeholder methods for now."], typed
        assert "clears" not in s.metadata


def test_chat_history_restored_by_restore_chat_history_after_the_reset(tmp_path):
    """With --restore-chat-history (shown by the LLM history beside the chat history: a request
    that sends a command line), a Coder made with no chat reloads the chat history file
    (Coder.__init__): after /reset, /ask brings the cleared turn back, commands included, as the
    corpus doc_processor LLM history records it."""
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(ARCHITECT.read_text())
    (tmp_path / ".aider.llm.history").write_text(
        "TO LLM 2025-05-23T16:53:16\n-------\nSYSTEM Act as an expert code analyst.\n-------\n"
        f"USER /ask {ASK1}\n-------\nUSER {ASK1}\nLLM RESPONSE 2025-05-23T16:53:40\nASSISTANT It indexes.\n")
    _, [s], _ = parse(path)
    reply1 = "It indexes documents and answers questions about them, with placeholder methods for now."
    held = held_before_calls(s.messages)
    assert held[0] == [f"/ask {ASK1}", ASK1]
    assert held[1] == [f"/ask {ASK1}", ASK1, reply1, "/res", f"/ask {LIST}", LIST]
    restored = [m for m in s.messages if m.meta.get("aider_restored")]
    assert restored and all(m.kind == ("scripted" if m.role == "assistant" else "message") for m in restored)
    marks = [read_history_edit(m.meta, i) for i, m in enumerate(s.messages) if m.kind == "history_edit"]
    assert [(e.type, e.ranges) for e in marks if e.type == "restore"] == [("restore", ()), ("restore", ())]
    # the task is what the person typed, not the copy Aider reloaded (seq 1: "/ask what does ...")
    rows = [SimpleNamespace(seq=i, message=m) for i, m in enumerate(s.messages)]
    assert s.messages[1].text == f"/ask {ASK1}" and s.messages[goal_seq(rows)].text == ASK1
    assert goal_from_messages(rows).text.strip() == ASK1
    assert all("restore_chat_history" in e.figures["rests_on"] for e in marks if e.type == "restore")
    info = s.metadata["restore_chat_history"]
    assert info["in_force"] is True and info["restores"] == 2 and ".aider.llm.history:5" in info["evidence"]
    # an LLM history that sends no command line: Aider did not reload the file
    (tmp_path / ".aider.llm.history").write_text(
        f"TO LLM 2025-05-23T16:53:16\n-------\nUSER {ASK1}\nLLM RESPONSE 2025-05-23T16:53:40\nASSISTANT It.\n")
    _, [s], _ = parse(path)
    assert s.metadata["restore_chat_history"]["in_force"] is False
    assert held_before_calls(s.messages)[1] == [LIST]


def held_in_log(step: dict) -> int:
    """A replay step's window without what calibration adds for what the log does not hold."""
    parts = step.get("parts") or {}
    return step["window_tokens"] - parts.get("not_in_log", 0) - parts.get("calibration_scale", 0)


def test_chat_history_replay_says_the_editor_window_rests_on_aiders_code(tmp_path):
    db = tmp_path / "s.db"
    rep = replay_json(ARCHITECT, db)
    assert len(rep["steps"]) == 5
    (edit,) = [e for e in rep["steps"][3]["events"] if e["type"] == "history_edit"]
    assert edit["edit"] == "editor" and "architect_coder.py" in edit["rests_on"]
    r = run("replay", ARCHITECT, "--db", db, "--at", "4", "--json")
    rows = json.loads(r.stdout)["messages"]
    inside = [m for m in rows if m["in_window"] and m["kind"] == "message"]
    # the editor's window is the proposal alone: what it holds is what the step counts
    assert [m["text"][:36] for m in inside] == ["I will instruct the editor engineer "]
    # (the window beside what the log holds: the calibration's estimate of what Aider sent beyond the
    # chat, since its Tokens lines are the calls' recorded usage)
    assert inside[0]["window_tokens"] <= held_in_log(rep["steps"][3]) <= inside[0]["window_tokens"] + 8
    gone = [m for m in rows if m["left_step"] == 4]
    assert len(gone) == 4 and all("architect_coder.py" in m["left_by"]["rests_on"] for m in gone)
    out = run("replay", ARCHITECT, "--db", db, "--all-steps", width=200).stdout
    assert "editor (agent's code)" in out and "clear (recorded)" in out and "editor (recorded)" not in out


@pytest.mark.integration
def test_corpus_chat_history_windows_hold_no_more_than_aider_sent(corpus_ingest):
    """Every call of every Aider chat history in the corpus: its window (the chat only: the log
    holds no system prompt, repo map or files) is within what the Tokens line says Aider sent
    (with its rounding and the estimate's 25%); where the LLM history of the same run records
    every request, within that request. Before: doc_processor's editor call at step 6 read the
    whole chat (12,738 tokens against 2.4k sent)."""
    db, r = corpus_ingest
    assert r.exit_code == 0, r.stderr
    with Store.open(db) as st:
        rows = st.sessions()
        chats = [s for s in rows if s["format"] == "aider_chat"]
        assert len(chats) >= 2
        for s in chats:
            msgs = list(st.messages(s["id"]))
            steps = replay_session(st, s["id"], None, policy="recorded").steps
            assert len(steps) == s["metadata"]["usage_lines"], s["source"]
            for k, x in enumerate(steps, 1):
                u = msgs[x["message_seq"]].message.meta["usage_rounded"]
                bound = (u["prompt_tokens"] + u["prompt_tokens_error"]) * (1 + PROMPT_TOLERANCE)
                assert held_in_log(x) <= bound, (s["source"], k, held_in_log(x), u["prompt_tokens"])
            exact = [o for o in rows if o["format"] == "aider" and Path(o["source"]).parent == Path(s["source"]).parent]
            for o in exact:
                full = replay_session(st, o["id"], None, policy="recorded").steps
                if len(full) != len(steps):  # failed calls the chat history does not show: no pairing
                    continue
                over = [(k, held_in_log(a), b["window_tokens"]) for k, (a, b) in enumerate(zip(steps, full), 1)
                        if held_in_log(a) > b["window_tokens"]]
                assert not over, (s["source"], over)


@pytest.mark.integration
def test_corpus_chat_histories_are_calibrated_on_their_rounded_usage(corpus_ingest):
    """Aider's Tokens lines are the calls' recorded usage: the replay calibrates on them (before
    issue 32 it had no recorded call and no fidelity), says the figures are rounded (the range, not
    the figure, is what the log records) and how much of each recorded prompt the log holds."""
    db, r = corpus_ingest
    assert r.exit_code == 0, r.stderr
    with Store.open(db) as st:
        chats = [s for s in st.sessions() if s["format"] == "aider_chat"]
        assert len(chats) >= 2
        for s in chats:
            rep = replay_session(st, s["id"], None, policy="recorded")
            fid = rep.fidelity
            assert fid and fid["calls"] >= 8, s["source"]
            if "doc_processor" in s["source"]:  # its offset predicts held-out calls worse than the tokenizer
                assert fid["kind"] == "estimated", s["source"]
                assert all(c["plausible"] is False and "no better than the tokenizer alone" in c["why"]
                           for c in fid["calibration"].values()), fid["calibration"]
            else:  # Simple-Calculator: median held-out error 82.6% -> 8.7%
                assert fid["kind"] == "calibrated", s["source"]
                assert fid["median_pct_error"] < 10 < fid["computed"]["median_pct"], fid
            rounding = fid["recorded_rounding"]
            assert 0 < rounding["calls"] <= fid["calls"] + fid["fitted_calls"] and rounding["max_error"] in (50, 500)
            holds = rounding["log_holds_pct"]
            assert 0 < holds["min"] <= holds["median"] <= holds["max"]
            ranged = [x for x in rep.steps if x["recorded_prompt_tokens_error"]]
            assert ranged and all(x["recorded_prompt_tokens_error"] in (50, 500) for x in ranged)
            out = run("replay", s["id"], "--db", db, width=80).stdout
            assert "(rounded)" in " ".join(out.split()), out
