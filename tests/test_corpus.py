"""Integration: the whole real corpus through `ctxf ingest`, as a user would run it.

Per-format (files, sessions, messages) below are sums of per-file counts verified by reading
the files (each importer's own test asserts its files one by one, with how it counted):
  claude_code  324+467+33+7+16+2+7+32+19 messages over 9 files (main chains, sub-agents,
               compaction calls); codex 118 (39 assistant, 39 tool, 38 reasoning, 2 user);
  inspect      3+10+3·3+3+10·3 over 16 samples; mini_swe_agent 44+50+66+56+38 (Gemini,
               the last user message is the submission) + 38+64+136 (gpt-5-mini: the exit
               record is kept as the submission, the last call's result; it was skipped, 37+63+135);
               openhands 27+33+45+27;
  swe_agent    27+12+13+24 (pydicom and test-repo get the submit step's diff from trajectory[]
               after history[]'s last call, 26 and 12 before; the two function-calling demos
               already had it as the submit's tool result); vcr_cassette 4+2+2+5+2+6+2+5; chatgpt_export 44
               (current_node path); claude_ai_export 2; mt_bench 80 questions × 2 + 30 answers × 4;
  sharegpt / dialogstudio: conversations of 10, 2, 2, 8, 6 turns;
  cline        5 task folders, each one unit: 94 + 72 history messages (47/47, 36/36, no
               tool_result blocks) and, from ui_messages.json alone, 2 per api_req_started
               (24, 4, 53) plus task_sample's 4 deleted-range markers: 48 + 8 + 110;
  pi           994+914+456: message entries (990, 914, 454 with the two of session.jsonl's torn
               line 440) + a history_edit marker and a summary per compaction (2, 0, 1);
  copilot_cli  20 (events.jsonl: 1 system prompt, its identical copy skipped, 2 user, 6 replies,
               11 tool results) + 102 (legacy JSON: 148 chatMessages, the 91 assistant ones in
               45 runs, each run one reply; 56 tool, 1 user).
Skipped when ../shared/corpus is absent.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from helpers import CORPUS

pytestmark = pytest.mark.integration

EXPECTED = {
    # 182 + 250: 34 + 18 calls, each window its exact request (test_aider); 182: the summary call leaves at two
    # markers
    "aider": (2, 2, 432),
    # 37 + 174: 16/17 user, 20/18 replies, 1 /reset marker each; doc_processor also 11 editor and 2 restore
    # markers and the 125 messages Aider sends again (6 reloaded by --restore-chat-history, 109 resent after
    # the editor calls, 10 of its "I made those changes to the files." / "Ok."; test_aider)
    "aider_chat": (2, 2, 211),
    # 20 + 9 + 11: the terminus-2 run and its continuation file as one session (test_atif), the
    # non-conformant OpenAgents file (9 step messages), the orchestrator event log (8 steps, 3 results)
    "atif": (3, 3, 40),
    "chatgpt_export": (1, 1, 44),
    "claude_ai_export": (1, 1, 2),
    "claude_code": (9, 9, 907),
    "cline": (5, 5, 511),  # 71 + 10 + 181 + 140 + 109: each result written as text is a tool message (test_cline.TASKS)
    "codex": (1, 1, 118),
    "copilot_cli": (2, 2, 122),  # 20 + 102 (test_copilot_cli counts each file by hand)
    "gemini_cli": (3, 3, 46),  # 19 + 21 + 6 (test_gemini_cli.CORPUS_FILES counts each by hand)
    "gemini_cli_stream": (2, 3, 251),  # 95 + 74 + 82 (test_gemini_cli_stream counts each run)
    "har": (4, 4, 8),  # one captured call each: its request's user message and the answer (test_har)
    "group_chat": (40, 40, 1353),  # 178 + 1175 turns, one message each (test_group_chat)
    "dialogstudio": (1, 5, 28),
    "inspect": (5, 16, 55),
    "kimi_code": (2, 2, 11),  # 4 + 7 (test_kimi_code counts each journal)
    "mini_swe_agent": (8, 8, 492),
    "mt_bench": (2, 110, 280),
    "openhands": (4, 4, 132),
    "openhands_trajectory": (3, 3, 18),  # 4 + 6 + 8 (test_openhands_v1.TRAJ_CORPUS)
    "openhands_v1": (2, 2, 20),  # 13 + 7: each events folder one session (test_openhands_v1.V1_CORPUS)
    "letta": (4, 5, 216),  # 215 stored messages of 5 agents and 1 eviction marker (outreach_workflow_agent)
    "pi": (3, 3, 2364),
    "sharegpt": (1, 5, 28),
    "specstory": (4, 4, 114),
    "swe_agent": (4, 4, 76),
    "tau_bench": (1, 2, 50),  # 28 + 22: one session per trial (test_tau_bench)
    "vcr_cassette": (8, 8, 28),
}
NOT_LOGS = {
    "PROVENANCE.md",
    "swebench-pairs/_run-metadata/mini-swe-agent_gemini-3-pro.results_summary.json",
    "swebench-pairs/_run-metadata/openhands-codeact_claude-3-5-sonnet.metadata.json",
    "swebench-pairs/_run-metadata/openhands-codeact_claude-3-5-sonnet.output.swebench_eval.md",
    "pi/pi-mono/docs/session.md",  # the Pi session format spec
}
# The second wave (PROVENANCE.md): formats no importer reads yet. They must be left alone,
# not claimed by a wrong importer (the Cline conversation is a list of Anthropic messages, but
# the plain anthropic_messages importer would lose its task folder). Aider's .aider.input.history
# (prompt input, no log) is a dot file the walk does not list.
# The fourth wave (PROVENANCE.md, 2026-12-06): formats no importer reads yet (issue 32). Each is
# left alone, none claimed by a wrong importer: the Gemini CLI stream-json transcripts start with
# a line shaped like a Responses item, and the Letta agent files hold a "messages" list that is
# not the agent's window.
# Read since (issue 32): ATIF (its continuation file the sidecar of the file that names it), Gemini
# CLI stream-json, Kimi, Letta, SpecStory, OpenHands V1 and trajectory exports, tau-bench, group chats,
# and the HAR request captures: no fourth-wave format is left alone.
FOURTH_WAVE: tuple[str, ...] = ()
NOT_READ_YET: set[str] = {
    p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*")
    if p.is_file() and p.relative_to(CORPUS).as_posix().startswith(FOURTH_WAVE)
}


@pytest.fixture(scope="module")
def ingested(corpus_ingest):
    return corpus_ingest  # conftest: the corpus ingested once for the suite


def test_every_corpus_log_ingests_with_verified_counts(ingested):
    db, r = ingested
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["totals"]["failed"] == 0
    # every file its importer reads whole (issue 32: a file read in part is "partial", never "ingested"),
    # but the non-conformant OpenAgents ATIF file: 5 observations with no results[] and 5 tool calls
    # written as id/name are skipped as invalid, the rest read (test_atif)
    partial = {f["path"].split("/corpus/", 1)[1]: f["unread"] for f in data["files"]
               if f["status"] != "ingested" or f["unread"]}
    assert partial == {"atif/openagents/regex-log-20251211-161750-ba4ddb16/trajectory.json": {
        "invalid observation (no results[])": 5, "invalid tool_call (id/name, not tool_call_id/function_name)": 5}}
    assert {f["status"] for f in data["files"]
            if f["path"].endswith("regex-log-20251211-161750-ba4ddb16/trajectory.json")} \
        == {"partial"}
    got = defaultdict(lambda: [0, 0, 0])
    for f in data["files"]:
        g = got[f["format"]]
        g[0] += 1
        g[1] += len(f["sessions"])
        g[2] += f["messages"]
    assert {k: tuple(v) for k, v in got.items()} == EXPECTED
    ignored = {Path(p).relative_to(CORPUS).as_posix() for p in data["ignored"]}
    assert ignored == NOT_LOGS | NOT_READ_YET


def test_store_matches_the_report_and_reingest_adds_nothing(ingested):
    db, _ = ingested
    with sqlite3.connect(db) as c:
        before = c.execute("SELECT count(*), (SELECT count(*) FROM messages) FROM sessions").fetchone()
    assert before == (sum(v[1] for v in EXPECTED.values()), sum(v[2] for v in EXPECTED.values()))
    r = CliRunner().invoke(app, ["ingest", str(CORPUS), "--recursive", "--db", db, "--json"])
    assert r.exit_code == 0
    assert json.loads(r.stdout)["totals"]["unchanged"] == sum(v[0] for v in EXPECTED.values())
    with sqlite3.connect(db) as c:
        after = c.execute("SELECT count(*), (SELECT count(*) FROM messages) FROM sessions").fetchone()
    assert after == before


def test_swebench_pairs_get_task_and_outcome(ingested):
    db, _ = ingested
    r = CliRunner().invoke(app, ["sessions", "--db", db, "--json"])
    rows = [s for s in json.loads(r.stdout)["sessions"] if "swebench-pairs" in s["source"]]
    by_task = defaultdict(set)
    for s in rows:
        by_task[s["task"]].add(s["outcome"])
    # Every pair in PROVENANCE.md has a resolved and an unresolved run.
    assert {t: o for t, o in by_task.items()} == {
        t: {"success", "failure"}
        for t in ("astropy__astropy-14365", "django__django-11206", "django__django-11276",
                  "django__django-11815", "django__django-15127")
    }


def test_sub_agents_link_to_their_parent(ingested):
    db, _ = ingested
    with sqlite3.connect(db) as c:
        rows = c.execute(
            "SELECT s.external_id, p.external_id FROM sessions s JOIN sessions p ON s.parent_id = p.id "
            "WHERE s.format = 'claude_code'"
        ).fetchall()
    parents = {child: parent for child, parent in rows}
    assert parents["a7be2f0"] == "8463c716-a2ea-4c14-9efa-87158ebd9f20"
    assert parents["aac57f5"] == "ae4a77f8-aedd-4bc1-888f-c94edc91af04"
    assert len(parents) == 4  # two task sub-agents and two compaction calls
