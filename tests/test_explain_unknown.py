"""explain on runs it cannot judge as failures: a run that edited no file (a chat, an
investigation that ends in a submit action with nothing to hand in) and a run whose log records
no outcome. explain says what the log shows (no file edited, the submit action, the edits and
checks it counts) and what it does not (whether the run failed); it invents no decisive step for a
change that was never made. issue 30: the Copilot CLI run asked "do not modify any code, look
into documentation generators" got "context did not limit this run" with the decisive step "the
change the final submission carries" on a submit that carried none."""

from __future__ import annotations

import json
from pathlib import Path

import context_forensics as ctxf
from context_forensics.analysis.explain.findings import NO_OUTCOME
from context_forensics.store.db import Store
from helpers import corpus


def _run(tmp_path: Path, turns: list[tuple[str, dict, str]], outcome: str | None) -> dict:
    """An OpenAI-messages agent run (the explain cases' shape) of ``turns`` ending in a submit."""
    msgs: list[dict] = [{"role": "system", "content": "You are a coding agent. Submit when done."},
                        {"role": "user", "content": "Look into which doc generator suits this project. Do not "
                                                    "modify any code."}]
    for i, (tool, args, out) in enumerate(turns + [("submit", {}, "Submitted.")], 1):
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": out})
    path = tmp_path / "run.openai.json"
    path.write_text(json.dumps({"messages": msgs}))
    db = tmp_path / "s.db"
    ctxf.ingest(path, db=db, **({"outcome": outcome} if outcome else {}))
    return ctxf.explain(str(path), db=db, facts=["Do not modify any code."]).to_dict()


LOOK = [("bash", {"command": "ls docs"}, "index.md\n"), ("bash", {"command": "cat Cargo.toml"}, "[package]\n")]
EDIT = ("str_replace_editor", {"command": "create", "path": "docs/notes.md", "file_text": "rustdoc\n"},
        "File created successfully at: docs/notes.md")


def _no_decisive(rep: dict) -> str:
    (r,) = [r for r in rep["reasons"] if r["kind"] == "no_decisive_step"]
    return r["text"]


def test_a_run_that_edited_no_file_and_records_no_outcome_has_no_decisive_step(tmp_path):
    """Before: decisive step 3 (the submit) "the change the final submission carries", verdict
    not_limiting."""
    rep = _run(tmp_path, LOOK, None)
    assert rep["decisive_step"] is None and rep["verdict"] == "unknown"
    text = _no_decisive(rep)
    assert "the run edited no file" in text and "its submit action at step 3 hands in no change" in text
    assert NO_OUTCOME in text


def test_a_failed_run_that_edited_no_file_keeps_its_submission_as_the_decisive_step(tmp_path):
    rep = _run(tmp_path, LOOK, "failure")
    assert rep["decisive_step"]["why"] == "submission" and rep["decisive_step"]["step"] == 3
    assert not any(NO_OUTCOME in n for n in rep["notes"])


def test_a_run_with_no_outcome_and_a_decisive_step_says_the_verdict_is_no_failure_verdict(tmp_path):
    rep = _run(tmp_path, [*LOOK, EDIT], None)
    assert rep["decisive_step"] is not None
    assert any(n.startswith(NO_OUTCOME) and "not that the run failed" in n for n in rep["notes"]), rep["notes"]


def test_corpus_copilot_investigation_run_edited_no_file(tmp_path):
    path = corpus("copilot-cli/VibeCodingTracker/test_conversation_copilot.jsonl")
    rep = ctxf.explain(str(path), db=tmp_path / "s.db").to_dict()
    assert rep["session"]["outcome"] == "unknown"
    assert rep["decisive_step"] is None and rep["verdict"] == "unknown"
    text = _no_decisive(rep)
    assert "the run edited no file" in text and "submit action at step 6 hands in no change" in text
    assert NO_OUTCOME in text


def test_corpus_a_chat_says_it_edited_no_file_not_that_it_left_its_repository_alone(tmp_path):
    """MT-Bench's reference answers (question 101): two-turn chats with no tools and no outcome. Before: "the run
    made no edit of its repository" (a chat has none) and nothing on the outcome."""
    path = corpus("mt-bench/fastchat/mt_bench_reference_answer_gpt-4.jsonl")
    db = tmp_path / "s.db"
    ctxf.ingest(path, db=db)
    with Store.open(db) as st:
        sid = next(s["id"] for s in st.sessions() if s["title"].startswith("Imagine you are participating in a race"))
    rep = ctxf.explain(sid, db=db).to_dict()
    text = _no_decisive(rep)
    assert text.startswith("no decisive step: the run edited no file") and "repository" not in text
    assert "it handed in no submission" in text and NO_OUTCOME in text
