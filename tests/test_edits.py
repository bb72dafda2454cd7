"""The edits every agent makes, as diverge and explain see them: paths made relative to the run's
own root (the working folder its log records), a root stripped only as the leading prefix of an
absolute path, every agent's edit tools read, and the invariant over the real corpus: the edits
the analyses see equal the successful edit calls the log holds (``edit_consistency``).

The small sessions here imitate real logs of each agent (the corpus files named beside them; for
a tool the corpus lacks, the agent's source or third-party readers of its logs, as said)."""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from context_forensics.analysis.diverge.actions import canonical_shell
from context_forensics.analysis.diverge.applied import effective_edits
from context_forensics.analysis.diverge.consistency import edit_calls, edit_consistency
from context_forensics.analysis.diverge.edits import run_edits
from context_forensics.analysis.diverge.events import extract_events
from context_forensics.analysis.diverge.normalize import in_repo, normalize_path, strip_roots
from context_forensics.records import Message, Session, ToolCall
from context_forensics.store.db import Store
from helpers import CORPUS

# --- item 2: a root is stripped only as the leading prefix of an absolute path -------------------

_SEG = st.one_of(st.sampled_from(["repo", "testbed", "workspace", "priv", "src", "migrations", "owner__repo",
                                  "a__b", "repo-tools", "lib", "x.exs", "utils.py", "tmp"]),
                 st.from_regex(r"[a-z_][a-z0-9_.-]{0,8}", fullmatch=True))
_REL = st.lists(_SEG, min_size=1, max_size=6).map("/".join)
_HARNESS = st.sampled_from(["/testbed", "/repo", "/workspace/django__django__3.0", "/astropy__astropy"])


def test_a_folder_named_like_a_root_inside_a_path_is_kept():
    # issue 30: priv/repo/migrations/x.exs became privmigrations/x.exs, src/repo/utils.py srcutils.py
    assert strip_roots("priv/repo/migrations/x.exs") == "priv/repo/migrations/x.exs"
    assert strip_roots("src/repo/utils.py") == "src/repo/utils.py"
    assert normalize_path("/home/me/app/priv/repo/migrations/x.exs", roots=("/home/me/app",)) == \
        "priv/repo/migrations/x.exs"
    assert canonical_shell("cat priv/repo/migrations/x.exs") == "view priv/repo/migrations/x.exs"
    assert strip_roots("see /repo-tools/x and C:/repo/y") == "see /repo-tools/x and C:/repo/y"
    assert strip_roots("cd /testbed && python -m pytest /testbed/tests") == "cd . && python -m pytest tests"


@settings(max_examples=300, deadline=None)
@given(_REL)
def test_a_relative_path_loses_no_folder(p):
    assert strip_roots(p) == p
    assert normalize_path(p) == posixpath.normpath(p)
    assert in_repo(p)


@settings(max_examples=300, deadline=None)
@given(_HARNESS, _REL)
def test_a_harness_root_is_stripped_as_the_leading_prefix_only(root, p):
    assert normalize_path(f"{root}/{p}") == posixpath.normpath(p)
    assert strip_roots(f"open {root}/{p}") == f"open {p}"
    assert in_repo(f"{root}/{p}")


@settings(max_examples=300, deadline=None)
@given(_REL, _REL)
def test_a_run_root_is_stripped_as_the_leading_prefix_only(base, p):
    root = f"/home/me/{base}"
    assert normalize_path(f"{root}/{p}", roots=(root,)) == posixpath.normpath(p)
    assert in_repo(f"{root}/{p}", (root,))
    assert not in_repo(f"{root}x/{p}", (root,))  # a sibling folder that starts with the root's name
    assert normalize_path(f"{root}x/{p}", roots=(root,)) == posixpath.normpath(f"{root}x/{p}")
    assert not in_repo(f"~/{p}", (root,)) and not in_repo(f"/tmp/{p}", (root,))


# --- item 1: every agent's edits, relative to the root its log records ---------------------------

def _session(fmt, metadata, turns):
    """Messages of a tool-calling run: each turn (tool, arguments, result text, result meta)."""
    msgs = [Message("user", "Fix the bug.")]
    for i, (tool, args, result, meta) in enumerate(turns):
        arguments = args if isinstance(args, str) else json.dumps(args)
        msgs.append(Message("assistant", "", tool_calls=(ToolCall(tool, arguments, f"c{i}"),)))
        msgs.append(Message("tool", result, tool_call_id=f"c{i}", meta=meta or {}))
    msgs.append(Message("assistant", "Done."))
    return fmt, metadata, msgs


def _consistency(fmt, metadata, msgs):
    with Store.open(":memory:") as store:
        with store.transaction():
            store.write_session(Session("x", fmt, messages=iter(msgs), metadata=metadata), sid="x", source="x",
                                source_hash="x", parent_id=None)
        return edit_consistency(store, "x")


def _seen(fmt, metadata, msgs):
    rev = extract_events(msgs, fmt, "x", metadata)
    return [(x.path, x.op, x.in_repo) for a in effective_edits(rev) for x in a.edits]


ROOT = "/home/USER/projects/spotter-worktrees/spotter-fum"
PATCH = ("*** Begin Patch\n*** Update File: src/app.ts\n@@\n-const a = 1\n+const a = 2\n"
         "*** Add File: src/new.ts\n+x\n*** End Patch")
AGENTS = {
    # claude-code-jsonl/spotter/8463c716...: Edit / Write with absolute file_path, cwd on every line
    "claude_code": _session("claude_code", {"cwd": ROOT}, [
        ("Edit", {"replace_all": False, "file_path": f"{ROOT}/lib/spotter/x.ex", "old_string": "a", "new_string": "b"},
         f"The file {ROOT}/lib/spotter/x.ex has been updated successfully.", {}),
        ("Write", {"file_path": f"{ROOT}/priv/repo/migrations/1_add.exs", "content": "defmodule M do\nend\n"},
         f"File created successfully at: {ROOT}/priv/repo/migrations/1_add.exs", {}),
        ("MultiEdit", {"file_path": f"{ROOT}/lib/y.ex", "edits": [{"old_string": "p", "new_string": "q"}]},
         "Applied 1 edit", {}),
        ("Write", {"file_path": "/home/USER/.claude/plans/plan.md", "content": "# Plan\n"}, "File created", {}),
        ("Edit", {"file_path": f"{ROOT}/lib/z.ex", "old_string": "nope", "new_string": "x"},
         "<tool_use_error>String to replace not found in file.</tool_use_error>", {"is_error": True}),
    ]),
    # pi/pi-mono/session.jsonl: edit {path, oldText, newText}, write {path, content}, header cwd
    "pi": _session("pi", {"cwd": "/Users/badlogic/workspaces/pi-mono"}, [
        ("edit", {"path": "/Users/badlogic/workspaces/pi-mono/packages/ai/src/a.ts", "oldText": "x", "newText": "y"},
         "Successfully replaced text in /Users/badlogic/workspaces/pi-mono/packages/ai/src/a.ts.", {"line": 3}),
        ("write", {"path": "/Users/badlogic/workspaces/pi-mono/docs/skills.md", "content": "# Skills\n"},
         "Successfully wrote 9 bytes", {}),
        ("edit", {"path": "/Users/badlogic/workspaces/pi-mono/AGENTS.md", "oldText": "q", "newText": "r"},
         "Could not find the exact text in /Users/badlogic/workspaces/pi-mono/AGENTS.md.", {"is_error": True}),
    ]),
    # copilot-cli events.jsonl (1.0.x): context.gitRoot; edit {path, old_str, new_str} / create {path, file_text}
    # as Copilot CLI writes them (the corpus session only views; tool shapes as read by third-party readers
    # of ~/.copilot/session-state events, e.g. tool.execution_start {toolName: "edit", arguments: {path, ...}})
    "copilot_cli": _session("copilot_cli", {"context": {"cwd": "/home/wei/repo/T/src", "gitRoot": "/home/wei/repo/T"}},
                            [
        ("edit", {"path": "/home/wei/repo/T/src/cli.rs", "old_str": "a", "new_str": "b"}, "File updated",
         {"success": True}),
        ("create", {"path": "/home/wei/repo/T/docs/x.md", "file_text": "x\n"}, "Created", {"success": True}),
    ]),
    # gemini-cli/VibeCodingTracker/test_conversation_gemini.jsonl: project hash = SHA-256 of the root
    "gemini_cli": _session("gemini_cli", {"project_hash": hashlib.sha256(b"/home/wei/repo/discordbot").hexdigest()}, [
        ("write_file", {"file_path": "/home/wei/repo/discordbot/GEMINI.md", "content": "# G\n"},
         "Successfully overwrote file: /home/wei/repo/discordbot/GEMINI.md.", {"status": "success"}),
        ("replace", {"file_path": "/home/wei/repo/discordbot/src/bot.py", "old_string": "a", "new_string": "b"},
         "Successfully modified file: /home/wei/repo/discordbot/src/bot.py", {"status": "success"}),
    ]),
    # codex-rollout-jsonl: apply_patch as a freeform tool and as the shell's argv, workdir = cwd
    "codex": _session("codex", {"cwd": "/home/user/projects/temp/chatbot-ui"}, [
        ("apply_patch", PATCH, "Success. Updated the following files:\nM src/app.ts\nA src/new.ts", {}),
        ("shell", {"command": ["bash", "-lc", "sed -i 's/foo/bar/' lib/util.ts"],
                   "workdir": "/home/user/projects/temp/chatbot-ui"}, '{"output":"","metadata":{"exit_code":0}}',
         {"returncode": 0}),
    ]),
    # openhands-llm-completions: str_replace_editor under /workspace/<instance>
    "openhands": _session("openhands", {}, [
        ("str_replace_editor", {"command": "str_replace", "path": "/workspace/django__django__3.0/django/x.py",
                                "old_str": "a", "new_str": "b"}, "The file has been edited.", {}),
    ]),
}


def _cline():
    """cline/Online-Card-Architecture: native tool calls, each result kept as user text, the
    working folder in the environment details (the importer keeps it as ``cwd``)."""
    root = "/workspaces/Online-Card-Architecture"
    msgs = [Message("user", "<task>\nAdd the game actions\n</task>")]
    calls = [("write_to_file", {"absolutePath": f"{root}/BeginTurnGA.cs", "content": "class A {}\n"}),
             ("replace_in_file", {"absolutePath": f"{root}/CardDataJSON.txt",
                                  "diff": "------- SEARCH\n\"power\": -1\n=======\n\"power\": 1\n+++++++ REPLACE"})]
    for i, (tool, args) in enumerate(calls):
        msgs.append(Message("assistant", "", tool_calls=(ToolCall(tool, json.dumps(args), f"toolu_{i}"),)))
        msgs.append(Message("user", f"[{tool} for '{args['absolutePath']}'] Result:\nThe content was successfully "
                                    f"saved to {args['absolutePath']}.\n\nerror?: string | null;\n"))
    return "cline", {"cwd": root}, msgs


def _aider():
    """aider/Simple-Calulator/.aider.chat.history.md: SEARCH/REPLACE blocks in the reply, and
    Aider's own "Applied edit to" / failed-block lines (the importer keeps them in the reply's meta)."""
    reply = ("Here are the changes:\n\n```javascript\nsrc/App.js\n<<<<<<< SEARCH\nconst a = 1;\n=======\nconst a = 2;\n"
             ">>>>>>> REPLACE\n```\n\n```css\nsrc/styles.css\n<<<<<<< SEARCH\nbody {}\n=======\nbody { color: red; }\n"
             ">>>>>>> REPLACE\n```\n")
    meta = {"edit_format": "diff-fenced", "edits_applied": ["src/App.js"],
            "edits_failed": [{"path": "src/styles.css", "search": "body {}\n"}], "edits_others_applied": 1}
    return "aider_chat", {}, [Message("user", "make it red"), Message("assistant", reply, meta=meta)]


def _swe_agent():
    """swe-agent-traj/sweagent-testdata/pydicom__pydicom-1458.traj: windowed-editor text actions."""
    return "swe_agent", {}, [
        Message("user", "Fix it."),
        Message("assistant", "```\nopen pydicom/pixel_data_handlers/numpy_handler.py 293\n```"),
        Message("user", "[File: /pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py (373 lines total)]"),
        Message("assistant", "```\nedit 287:295\n    required = []\nend_of_edit\n```"),
        Message("user", "Your proposed edit has introduced new syntax error(s). Please understand the fixes and retry "
                        "your edit commmand.\n\nERRORS:\n- E999 SyntaxError: unmatched ']'\n"),
        Message("assistant", "```\nedit 287:296\n    required = ['Rows']\nend_of_edit\n```"),
        Message("user", "[File: /pydicom__pydicom/pydicom/pixel_data_handlers/numpy_handler.py (373 lines total)]\n"
                        "File updated."),
    ]


EXPECTED = {  # agent -> (the edits explain and diverge see: path, op, inside the repository), successful calls, failed
    "claude_code": ([("lib/spotter/x.ex", "replace", True), ("priv/repo/migrations/1_add.exs", "create", True),
                     ("lib/y.ex", "replace", True), ("/home/USER/.claude/plans/plan.md", "create", False)], 4, 1),
    "pi": ([("packages/ai/src/a.ts", "replace", True), ("docs/skills.md", "create", True)], 2, 1),
    "copilot_cli": ([("src/cli.rs", "replace", True), ("docs/x.md", "create", True)], 2, 0),
    "gemini_cli": ([("GEMINI.md", "create", True), ("src/bot.py", "replace", True)], 2, 0),
    "codex": ([("src/app.ts", "replace", True), ("src/new.ts", "create", True), ("lib/util.ts", "replace", True)], 3,
              0),
    "openhands": ([("django/x.py", "replace", True)], 1, 0),
    "cline": ([("BeginTurnGA.cs", "create", True), ("CardDataJSON.txt", "replace", True)], 2, 0),
    "aider_chat": ([("src/App.js", "replace", True)], 1, 1),
    "swe_agent": ([("pydicom/pixel_data_handlers/numpy_handler.py", "changed", True)], 1, 1),
}
BUILT = {**{k: (lambda k=k: AGENTS[k]) for k in AGENTS}, "cline": _cline, "aider_chat": _aider, "swe_agent": _swe_agent}


@pytest.mark.parametrize("agent", sorted(EXPECTED))
def test_every_agents_edits_are_seen_relative_to_the_root_its_log_records(agent):
    fmt, metadata, msgs = BUILT[agent]()
    seen, calls, failed = EXPECTED[agent]
    assert _seen(fmt, metadata, msgs) == seen
    c = _consistency(fmt, metadata, msgs)
    assert (c["calls"], c["seen"], c["failed"], c["missing"]) == (calls, calls, failed, [])


def test_a_missed_edit_is_listed_with_why(monkeypatch):
    """The check can fail: analyses that do not know the run's root (as before issue 30) take a
    Claude Code run's edits for edits outside the repository, and each one is listed."""
    from context_forensics.analysis.diverge import events
    from context_forensics.analysis.diverge.roots import Roots

    monkeypatch.setattr(events, "run_roots", lambda *a: Roots())
    fmt, metadata, msgs = AGENTS["claude_code"]
    c = _consistency(fmt, metadata, msgs)
    assert c["calls"] == 4 and c["seen"] == 1  # only the plan outside the project is seen as it is
    assert [m["path"] for m in c["missing"]] == [f"{ROOT}/lib/spotter/x.ex", f"{ROOT}/priv/repo/migrations/1_add.exs",
                                                 f"{ROOT}/lib/y.ex"]
    assert all(m["why"].startswith("taken as outside the repository") and m["step"] for m in c["missing"])


def test_a_quoted_commit_message_over_lines_writes_no_file():
    # claude-code-jsonl/spotter/ae4a77f8...: `git commit -m "...\n- Create x (...)"` was read as writes of "("
    cmd = 'git add -A && git commit -m "feat: x\n\n- Create a.sh (sources > b)\n- Note: c > d"'
    rev = extract_events(_session("claude_code", {"cwd": ROOT},
                                  [("Bash", {"command": cmd}, "[main 1a2b] feat", {})])[2],
                         "claude_code", "x", {"cwd": ROOT})
    assert run_edits(rev) == []


def test_an_edit_in_a_reply_the_harness_cut_off_never_ran():
    """Pi writes a reply the user interrupted with stopReason "aborted" and runs none of its calls
    (pi-mono agent-loop stops on error / aborted; no toolResult follows). Imitates
    pi/pi-mono/before-compaction.jsonl line 678 (step 327: an edit of interactive-mode.ts, aborted, the
    user's next message at line 679), which explain counted as an applied edit (173 instead of 172)."""
    root = "/Users/badlogic/workspaces/pi-mono"
    msgs = [
        Message("user", "refactor the selector handling"),
        Message("assistant", "", tool_calls=(ToolCall("edit", json.dumps(
            {"path": f"{root}/src/a.ts", "oldText": "x", "newText": "y"}), "c0"),)),
        Message("tool", f"Successfully replaced text in {root}/src/a.ts.", tool_call_id="c0"),
        Message("assistant", "Now I'll add helper methods:", tool_calls=(ToolCall("edit", json.dumps(
            {"path": f"{root}/src/b.ts", "oldText": "p", "newText": "q"}), "c1"),),
            meta={"stop_reason": "aborted", "error_message": "Request was aborted."}),
        Message("user", "like, can't we make this even better?"),
        Message("assistant", "Done."),
    ]
    assert _seen("pi", {"cwd": root}, msgs) == [("src/a.ts", "replace", True)]
    c = _consistency("pi", {"cwd": root}, msgs)
    assert (c["calls"], c["seen"], c["failed"], c["missing"]) == (1, 1, 1, [])
    # a cut-off reply whose call did get a result ran it: that edit counts
    ran = msgs[:4] + [Message("tool", f"Successfully replaced text in {root}/src/b.ts.", tool_call_id="c1")] + msgs[4:]
    assert _seen("pi", {"cwd": root}, ran) == [("src/a.ts", "replace", True), ("src/b.ts", "replace", True)]
    assert _consistency("pi", {"cwd": root}, ran)["calls"] == 2


# --- the invariant over every corpus session -----------------------------------------------------

@pytest.fixture(scope="module")
def corpus_store(corpus_ingest):
    db, _ = corpus_ingest
    with Store.open(db) as store:
        yield store


def test_corpus_every_successful_edit_call_is_seen(corpus_store):
    by_format: Counter = Counter()
    unrecorded: Counter = Counter()
    for row in corpus_store.sessions():
        c = edit_consistency(corpus_store, row["id"])
        assert c["missing"] == [] and c["seen"] == c["calls"], (row["id"], row["source"], c["missing"][:3])
        by_format[row["format"]] += c["calls"]
        # only an export that renders a call's input may hold an edit call without its path (SpecStory)
        assert not c["unrecorded"] or (row["metadata"] or {}).get("tool_arguments") == "rendered", row["source"]
        unrecorded[row["format"]] += len(c["unrecorded"])
    # not vacuous: every agent with edits in the corpus has them counted
    for fmt in ("claude_code", "pi", "cline", "copilot_cli", "codex", "gemini_cli", "aider", "aider_chat",
                "openhands", "swe_agent", "mini_swe_agent"):
        assert by_format[fmt] > 0, fmt
    assert +unrecorded == Counter(specstory=unrecorded["specstory"]) and unrecorded["specstory"] > 0, unrecorded


def test_corpus_tool_edit_calls_match_the_raw_files(corpus_store):
    """The counter against the files themselves (no importer): the unique Edit / Write tool_use
    blocks of the Claude Code transcripts and the edit / write toolCalls of the Pi sessions."""
    if not CORPUS.exists():
        pytest.skip("corpus not available")
    raw: dict[str, int] = {}
    for f in (CORPUS / "claude-code-jsonl" / "spotter").glob("*.jsonl"):
        ids = {c["id"] for line in f.read_text().splitlines() if (r := json.loads(line)).get("type") == "assistant"
               for c in r["message"].get("content") or [] if isinstance(c, dict) and c.get("type") == "tool_use"
               and c.get("name") in ("Edit", "Write", "MultiEdit", "NotebookEdit")}
        raw[str(f)] = len(ids)
    for f in (CORPUS / "pi" / "pi-mono").glob("*.jsonl"):
        n = 0
        for line in f.read_text().splitlines():
            try:
                m = json.loads(line).get("message")
            except ValueError:
                continue
            if isinstance(m, dict) and m.get("role") == "assistant":
                n += sum(1 for c in m.get("content") or [] if isinstance(c, dict) and c.get("type") == "toolCall"
                         and c.get("name") in ("edit", "write"))
        raw[str(f)] = n
    assert sum(raw.values()) > 300
    for row in corpus_store.sessions():
        if row["source"] in raw and not row.get("parent_id"):
            calls = edit_calls(corpus_store.messages(row["id"]), row["format"], row["metadata"])
            tools = [c for c in calls if c.tool.lower() in ("edit", "write", "multiedit", "notebookedit")]
            assert len(tools) == raw[row["source"]], row["source"]


# --- item 3: the submission is not the run's own fix ----------------------------------------------

FIX = "sed -i 's/round(x)/round(x, 2)/' src/calc.py"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
SCRATCH_ONLY = ("diff --git a/reproduce_bug.py b/reproduce_bug.py\nnew file mode 100644\nindex 0000000..1b2c3d4\n"
                "--- /dev/null\n+++ b/reproduce_bug.py\n@@ -0,0 +1,2 @@\n+from calc import "
                "total\n+print(total(1.005))\n")
WITH_FIX = ("diff --git a/src/calc.py b/src/calc.py\nindex 1111111..2222222 100644\n--- a/src/calc.py\n"
            "+++ b/src/calc.py\n@@ -1,2 +1,2 @@\n def total(x):\n-    return round(x)\n+    return round(x, 2)\n")


def _swe_run(commands, submission):
    """A mini-swe-agent run (live-swe-agent 2.x tool-calling layout of swebench-pairs): bash calls,
    each (command, output, return code), then the submit command and the harness's submission
    record (the ``git diff --cached`` it printed)."""
    from context_forensics.records import KIND_SUBMISSION

    msgs = [Message("system", f"You are a coding agent. When done, run `{SUBMIT}`."),
            Message("user", "The total is not rounded to cents: fix total() in src/calc.py.")]
    for i, (cmd, out, rc) in enumerate([*commands, (SUBMIT, submission, 0)]):
        msgs.append(Message("assistant", "", tool_calls=(ToolCall("bash", json.dumps({"command": cmd}), f"c{i}"),)))
        msgs.append(Message("tool", out, tool_call_id=f"c{i}", meta={"returncode": rc}))
    msgs.append(Message("user", submission, kind=KIND_SUBMISSION, meta={"exit": True}))
    return msgs


# the real failure (issue 30): a correct fix, then `git commit -am`, then `git diff --cached` holds a scratch file
COMMITTED = _swe_run([("cat src/calc.py", "def total(x):\n    return round(x)\n", 0),
                      (FIX, "", 0),
                      ("cat <<'EOF' > reproduce_bug.py\nfrom calc import total\nprint(total(1.005))\nEOF", "", 0),
                      ("python reproduce_bug.py", "1.0\n", 0),
                      ("git commit -am 'Round totals to cents'",
                       "[main 3f2a1b0] Round totals to cents\n 1 file changed",
                       0)], SCRATCH_ONLY)
GOOD = _swe_run([("cat src/calc.py", "def total(x):\n    return round(x)\n", 0), (FIX, "", 0)], WITH_FIX)


def test_a_fix_committed_before_the_submission_is_the_finding_not_the_scratch_file():
    from context_forensics.analysis.explain.checks import failing_action

    rev = extract_events(COMMITTED, "mini_swe_agent", "failed")
    d = failing_action(rev, {"outcome": "failure", "metadata": {}})
    assert (d.why, d.step, d.submission_step) == ("unsubmitted", 5, 6)
    assert "the fix to src/calc.py at step 2 is not in the submission; step 5 committed it" in d.text
    assert "reproduce_bug.py" not in d.text and d.files == []


def test_diverge_says_the_failed_runs_own_fix_is_not_in_its_submission():
    from context_forensics.analysis.diverge import Comparer, diverge_runs
    from context_forensics.embed import HashingEmbedder

    a = extract_events(COMMITTED, "mini_swe_agent", "failed")  # as issue 30's user ran it: the failure as A
    b = extract_events(GOOD, "mini_swe_agent", "good")
    rep = diverge_runs(a, b, Comparer(HashingEmbedder())).to_dict()
    (u,) = rep["patches"]["a"]["unsubmitted"]
    assert (u["file"], u["step"], u["by"], u["by_step"]) == ("src/calc.py", 2, "commit", 5)
    dec = rep["decisive"]
    assert "src/calc.py" in dec["source_files"]
    side = dec["b"] or dec["a"]
    if dec["differs"]:
        assert dec["b"]["in_other_patch"] is False  # a fact: A's submission lacks it
        assert "the other run's own fix to src/calc.py at step 2 is not in the submission; step 5 committed it" \
            in dec["b"]["submission_note"]
    else:  # both made the same fix: no edit differs, and the reason says where A's went
        assert side is None and dec["same_before"] == 1
        assert dec["reason"] == ("the runs made the same 1 edit(s) to the source files; run A's fix to src/calc.py "
                                 "at step 2 is not in the submission; step 5 committed it, so `git diff` no longer "
                                 "showed it")


def test_an_edit_command_that_died_with_a_syntax_error_is_never_decisive():
    """diverge took the k-th edit command as the decisive edit even when it never ran: a
    ``python3 -c`` that died with a SyntaxError (its traceback names ``<string>``)."""
    from context_forensics.analysis.diverge import Comparer, diverge_runs
    from context_forensics.analysis.explain.checks import failing_action
    from context_forensics.embed import HashingEmbedder

    died = ("python3 -c \"p = 'src/calc.py'; s = open(p).read(); open(p, 'w').write(s.replace('round(x)', "
            "'round(x, 2)'\"")
    trace = ('  File "<string>", line 1\n    p = \'src/calc.py\'; s = open(p).read(); open(p, \'w\').write(s.replace('
             '\'round(x)\', \'round(x, 2)\'\n                                                              ^\n'
             "SyntaxError: '(' was never closed\n")
    failed = _swe_run([("cat src/calc.py", "def total(x):\n    return round(x)\n", 0), (died, trace, 1),
                       ("sed -i 's/round(x)/round(x, 3)/' src/calc.py", "", 0)],
                      WITH_FIX.replace("round(x, 2)", "round(x, 3)"))
    b = extract_events(failed, "mini_swe_agent", "failed")
    a = extract_events(GOOD, "mini_swe_agent", "good")
    dec = diverge_runs(a, b, Comparer(HashingEmbedder())).decisive
    assert dec["differs"] and dec["b_step"] == 3 and dec["b"]["step"] == 3  # the sed, not the command that died
    assert failing_action(b, {"outcome": "failure", "metadata": {}}).step == 3


def test_explain_says_the_fix_was_left_out_of_the_submission(tmp_path):
    from context_forensics.analysis.explain.engine import explain_session
    from context_forensics.embed import HashingEmbedder

    with Store.open(tmp_path / "s.db") as store:
        with store.transaction():
            store.write_session(Session("f", "mini_swe_agent", messages=iter(COMMITTED), outcome="failure"), sid="f",
                                source="f", source_hash="f", parent_id=None)
        rep = explain_session(store, "f", embedder=HashingEmbedder()).to_dict()
    assert (rep["decisive_step"]["why"], rep["decisive_step"]["step"]) == ("unsubmitted", 5)
    (r,) = [r for r in rep["reasons"] if r["kind"] == "fix_not_submitted"]
    assert r["text"].startswith("the fix to src/calc.py at step 2 is not in the submission; step 5 committed it")
    assert r["evidence"]["step"] == 5


def _explained(tmp_path, fmt, msgs):
    from context_forensics.analysis.explain.engine import explain_session
    from context_forensics.embed import HashingEmbedder

    with Store.open(tmp_path / "s.db") as store:
        with store.transaction():
            store.write_session(Session("x", fmt, messages=iter(msgs), metadata={"cwd": ROOT}), sid="x", source="x",
                                source_hash="x", parent_id=None)
        return explain_session(store, "x", embedder=HashingEmbedder()).to_dict()


def _no_decisive_text(tmp_path, fmt, msgs):
    (r,) = [r for r in _explained(tmp_path, fmt, msgs)["reasons"] if r["kind"] == "no_decisive_step"]
    return r["text"]


def test_no_decisive_step_names_a_message_a_person_wrote_not_a_harness_note(tmp_path):
    """Claude Code writes the end of a background command as a user message (<task-notification>,
    claude-code-jsonl/spotter/8463c716 line 1588), Gemini CLI its own "System: Please continue."
    (gemini-cli/VibeCodingTracker/test_conversation_gemini.jsonl line 18): explain said "a user
    message came after the run began, at step 143" (and 5) of them, as if a person had spoken."""
    edit = ("Edit", {"file_path": f"{ROOT}/lib/x.ex", "old_string": "a", "new_string": "b"},
            f"The file {ROOT}/lib/x.ex has been updated successfully.", {})
    _, _, msgs = _session("claude_code", {"cwd": ROOT}, [edit])
    note = Message("user", "<task-notification>\n<task-id>be613ab</task-id>\n<status>completed</status>\n"
                           "</task-notification>\nRead the output file to retrieve the result: /tmp/x.output")
    # no person spoke after the opening: the run ends in its final answer, which carries its edit
    rep = _explained(tmp_path / "a", "claude_code", msgs[:3] + [note] + msgs[3:])
    assert rep["decisive_step"]["why"] == "submission" and rep["decisive_step"]["files"] == ["lib/x.ex"]
    assert not [r for r in rep["reasons"] if r["kind"] == "no_decisive_step"]
    person = Message("user", "now make the renderer tests pass too")
    said = _no_decisive_text(tmp_path / "b", "claude_code", msgs[:3] + [note, Message("assistant", "On it.")] +
                             [person] + msgs[3:])
    assert "the person wrote again after the run began, at step 3" in said


@pytest.mark.parametrize("name, edits", [("claude-code-jsonl/spotter/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", 26),
                                         ("claude-code-jsonl/spotter/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl", 72),
                                         ("pi/pi-mono/before-compaction.jsonl",
                                          171),  # 173 counted the aborted replies of lines 374, 678
                                         ("pi/pi-mono/session.jsonl", 44)])
def test_corpus_no_decisive_step_no_longer_says_the_run_made_no_edit(corpus_store, name, edits):
    """issue 30: explain said "no decisive step: the run made no edit" of these runs."""
    from context_forensics.analysis.explain.findings import _no_decisive

    row = next(r for r in corpus_store.sessions() if r["source"] == str(CORPUS / name))
    rev = extract_events(corpus_store.messages(row["id"]), row["format"], row["id"], row["metadata"])
    said = _no_decisive(rev, effective_edits(rev))
    assert f"the run made {edits} edit(s) of its repository" in said and "made no edit" not in said


def test_a_claude_code_call_made_after_a_cd_keeps_its_folder(tmp_path):
    """Claude Code writes the working folder on every record and it follows the Bash tool's cd
    (claude-code-jsonl/spotter/8463c716...: /assets after `cd assets`): the importer keeps a
    call's own folder, and its shell edit's relative path starts there."""
    from helpers import parse

    def rec(kind, uuid, parent, cwd, content, **kw):
        body = {"role": kind, "content": content}
        if kind == "assistant":
            body.update(id=f"m-{uuid}", model="claude-opus-4-6", type="message",
                        usage={"input_tokens": 10, "output_tokens": 5})
        return json.dumps({"parentUuid": parent, "isSidechain": False, "type": kind, "uuid": uuid, "cwd": cwd,
                           "sessionId": "s1", "version": "2.1.39", "timestamp": f"2026-02-11T22:0{uuid}:00Z",
                           "message": body, **kw})

    bash = [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "sed -i 's/a/b/' js/app.js"}}]
    lines = [rec("user", "1", None, ROOT, "Fix the hook."),
             rec("assistant", "2", "1", f"{ROOT}/assets", bash),
             rec("user", "3", "2", f"{ROOT}/assets", [{"type": "tool_result", "tool_use_id": "t1", "content": ""}])]
    f = tmp_path / "s1.jsonl"
    f.write_text("\n".join(lines) + "\n")
    fmt, (s,), _ = parse(f)
    assert s.metadata["cwd"] == ROOT and s.messages[1].meta["cwd"] == f"{ROOT}/assets"
    assert _seen(fmt, s.metadata, s.messages) == [("assets/js/app.js", "replace", True)]


def test_a_root_from_tool_output_when_the_log_records_none():
    """copilot-cli-legacy/VibeCodingTracker: no cwd in the file, but its first view lists .git;
    else what `git rev-parse --show-toplevel` or `pwd` printed (nothing: no root, no guess)."""
    from context_forensics.analysis.diverge.roots import run_roots

    def run(cmd_args, out, tool="bash"):
        return [Message("assistant", "", tool_calls=(ToolCall(tool, json.dumps(cmd_args), "c1"),)),
                Message("tool", out, tool_call_id="c1")]

    listing = ".claude\n.git\n.gitignore\nCargo.toml\nsrc"
    assert run_roots("copilot_cli", {}, run({"command": "view", "path": "/home/wei/repo/T"}, listing,
                                            "str_replace_editor")).paths == ("/home/wei/repo/T",)
    assert run_roots("x", {}, run({"command": "ls -la /srv/app/"}, "drwxr-xr-x 8 u u 4096 .git\n")).paths == \
        ("/srv/app",)
    assert run_roots("x", {}, run({"command": "git rev-parse --show-toplevel"}, "/srv/app\n")).paths == ("/srv/app",)
    assert run_roots("x", {}, run({"command": "pwd"}, "/srv/app/pkg\n")).source == "working folder in tool output (pwd)"
    assert run_roots("x", {}, run({"command": "ls -la /srv/app"}, "README.md\nsrc\n")).paths == ()
