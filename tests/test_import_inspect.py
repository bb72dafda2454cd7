"""Inspect eval logs (.json and .eval): fixtures for the edge cases, the real corpus for counts."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from context_forensics import importers
from context_forensics.errors import InputError
from context_forensics.importers.base import read_head
from context_forensics.records import Usage
from helpers import FIXTURES, corpus, parse

HERE = FIXTURES / "inspect"


# ---------------------------------------------------------------- fixtures


def test_legacy_v1_transcript_attachments_and_usage():
    fmt, sessions, ctx = parse(HERE / "legacy_v1.json")
    assert fmt == "inspect"
    (s,) = sessions
    assert s.external_id == "R1:q1:1"
    assert s.task == "critique/q1"
    assert s.model == "anthropic/claude-3-5-sonnet-20240620"
    assert s.started_at == "2024-06-01T10:00:00+00:00"
    assert s.outcome == "success"  # score value 1.0
    assert [m.role for m in s.messages] == ["user", "assistant", "tool", "assistant"]
    call, tool, final = s.messages[1], s.messages[2], s.messages[3]
    # tc:// reference resolved from transcript.content; legacy `reasoning` field -> thinking part
    assert call.text == "Let me use the calculator."
    assert call.parts == ({"type": "thinking", "text": "I should compute."},)
    assert call.tool_calls[0].name == "calc"
    assert json.loads(call.tool_calls[0].arguments) == {"expr": "2+2"}
    # Anthropic-style usage: total 1035 = 20 + 15 + 1000 cache write -> prompt counts the cache
    assert call.usage == Usage(prompt_tokens=1020, completion_tokens=15, cache_read_tokens=0,
                               cache_creation_tokens=1000)
    assert final.usage == Usage(prompt_tokens=1205, completion_tokens=1, cache_read_tokens=1000,
                                cache_creation_tokens=200)
    assert call.meta["request"]["tools"][0]["description"] == "Evaluate an arithmetic expression."
    assert call.meta["request"]["max_tokens"] == 1024
    assert call.timestamp == "2024-06-01T10:00:02+00:00"
    # legacy tool_error -> error meta, and the text the providers send for it
    assert tool.text == "Error: calculator offline"
    assert tool.name == "calc" and tool.tool_call_id == "t1"
    assert tool.meta["error"]["message"] == "calculator offline"
    # the scorer's call is skipped; the nested helper and the critique call are kept out but counted
    assert ctx.skipped["scorer model call"] == 1
    assert ctx.skipped["model call without a message"] == 2
    assert s.metadata["unattached_usage"] == {"input_tokens": 37, "output_tokens": 8}
    assert any("2 model call(s) produced no message" in w for w in ctx.warnings)
    assert "input_differs" not in final.meta["request"]


def test_spans_ids_content_items_and_trimmed_history():
    _, sessions, ctx = parse(HERE / "modern_spans.json", "inspect")
    s1, s2 = sessions
    assert s1.external_id == "R2:1:1"
    assert s1.outcome == "unknown"  # "P" (partial) is not mapped
    assert s1.metadata["scores"] == {"judge": "P"}
    user = s1.messages[1]
    (img,) = user.parts
    assert img["type"] == "image" and (img["width"], img["height"]) == (32, 16) and img["detail"] == "low"
    assert "data" not in json.dumps(img)  # no base64 payload kept
    reply = s1.messages[2]
    assert reply.text == "It is a tiny square."
    assert reply.parts[0] == {"type": "redacted_thinking", "bytes": 14, "summary": "thought about it"}
    assert reply.parts[1]["type"] == "server_tool_use" and reply.parts[1]["result"] == "A square has four sides."
    # OpenAI-style usage: input already includes the cache read
    assert reply.usage == Usage(prompt_tokens=100, completion_tokens=50, cache_read_tokens=64, reasoning_tokens=30)
    assert reply.timestamp == "2025-05-01T12:00:03+00:00"  # `completed`
    # both calls' inputs are input_refs into sample.events_data.messages (the 2025 pool layout)
    assert reply.meta["request"]["input_messages"] == 2 and "input_differs" not in reply.meta["request"]
    # a compaction event before the second call: a boundary record before that call's reply
    boundary = s1.messages[4]
    assert (boundary.role, boundary.kind) == ("system", "compaction_boundary")
    assert boundary.meta == {"tokens_before": 5000, "tokens_after": 800, "source": "inspect"}
    assert s1.metadata["compactions"] == 1
    # the second call was sent [system, user2] only: flagged, with the hashes of what was sent
    last = s1.messages[5]
    req = last.meta["request"]
    assert req["input_differs"] is True
    assert req["input_hashes"] == [s1.messages[0].hash, s1.messages[3].hash]
    assert s1.metadata["calls_with_different_input"] == 1
    assert ctx.skipped["scorer model call"] == 1  # inside the scorers/scorer spans
    # repeated identical answers pair with the model calls in order
    assert [m.usage.prompt_tokens for m in s2.messages if m.role == "assistant"] == [10, 20]
    assert s2.outcome == "unknown"  # "C" and False disagree
    assert s2.metadata["error"].startswith("RuntimeError")


def test_header_only_log_warns_and_yields_nothing():
    _, sessions, ctx = parse(HERE / "header_only.json", "inspect")
    assert sessions == []
    assert any("no samples" in w for w in ctx.warnings)


def _write_eval(path: Path, members: dict[str, object]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, value in members.items():
            z.writestr(name, value if isinstance(value, (str, bytes)) else json.dumps(value))
    return path


def _sample_from(fixture: str) -> tuple[dict, dict]:
    log = json.loads((HERE / fixture).read_text())
    header = {k: v for k, v in log.items() if k != "samples"}
    return header, log["samples"][0]


def test_eval_in_progress_journal_only(tmp_path):
    header, sample = _sample_from("modern_spans.json")
    start = {"version": 2, "eval": header["eval"], "plan": header["plan"]}
    path = _write_eval(tmp_path / "run.eval", {"_journal/start.json": start, "samples/1_epoch_1.json": sample})
    assert importers.detect(path).name == "inspect"
    _, sessions, ctx = parse(path)
    assert len(sessions) == 1 and sessions[0].metadata["status"] == "started"
    assert len(sessions[0].messages) == 6  # 5 messages + the compaction boundary
    assert any("did not finish" in w for w in ctx.warnings)


def test_eval_first_layout_and_sample_order(tmp_path):
    header, sample = _sample_from("legacy_v1.json")
    start = {"version": 1, "eval": header["eval"], "plan": header["plan"]}
    results = {"status": "success", "stats": {}, "results": {}}
    members = {"start.json": start, "results.json": results}
    for sid in (10, 2):
        members[f"samples/{sid}_epoch_1.json"] = dict(sample, id=sid)
    members["samples/3_epoch_1.json"] = "{not json"
    # no .eval suffix: sniffed by the first member's name
    path = _write_eval(tmp_path / "renamed.zip", members)
    assert importers.get("inspect").sniff(path, read_head(path))
    _, sessions, ctx = parse(path, "inspect")
    assert [s.metadata["sample_id"] for s in sessions] == [2, 10]  # natural order, bad one skipped
    assert ctx.skipped["malformed sample"] == 1


def test_eval_header_only_and_truncated_zip(tmp_path):
    header, _ = _sample_from("modern_spans.json")
    path = _write_eval(tmp_path / "h.eval", {"header.json": header})
    _, sessions, ctx = parse(path, "inspect")
    assert sessions == [] and any("no samples" in w for w in ctx.warnings)
    broken = tmp_path / "broken.eval"
    broken.write_bytes(path.read_bytes()[:40])
    with pytest.raises(InputError):
        parse(broken, "inspect")


def test_not_an_inspect_json(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps([{"eval": 1}]))
    with pytest.raises(InputError):
        parse(p, "inspect")


# ---------------------------------------------------------------- the real corpus


def test_corpus_json_browser_tool_calls():
    # 1 sample, 10 messages (user, 4 x [assistant tool call, tool result], final assistant);
    # 5 model events, no scorer call (the "includes" scorer is not model-graded).
    path = corpus("inspect-ai-log/json/2025-05-12T20-27-36-04-00_browser.json")
    _, sessions, ctx = parse(path)
    (s,) = sessions
    assert s.external_id == "Ta3ZFVTCTcjsb3AEX9FD9v:1:1"
    assert [m.role for m in s.messages] == ["user"] + ["assistant", "tool"] * 4 + ["assistant"]
    assistants = [m for m in s.messages if m.role == "assistant"]
    # usage per events[].output.usage, in order (input_tokens, input_tokens_cache_read)
    assert [(m.usage.prompt_tokens, m.usage.cache_read_tokens) for m in assistants] == [
        (1124, 0), (1568, 1024), (2732, 1536), (3896, 2688), (5915, 3840)
    ]
    assert assistants[-1].usage.completion_tokens == 207
    assert [len(m.meta["request"]["tools"]) for m in assistants] == [8] * 5
    assert assistants[0].tool_calls[0].name == "web_browser_go"
    tools = [m for m in s.messages if m.role == "tool"]
    assert [t.tool_call_id for t in tools] == [a.tool_calls[0].id for a in assistants[:4]]
    assert s.outcome == "success"  # includes: "C"
    assert not ctx.warnings


def test_corpus_json_grader_call_is_not_the_conversation():
    # messages: user (attachment-resolved), user, assistant; the 2nd model event is
    # model_graded_fact's grading call inside the scorer step.
    path = corpus("inspect-ai-log/json/2024-11-05T13-31-45-05-00_input-task_8zXjbRzCWrL9GXiXo2vus9.json")
    _, (s,), ctx = parse(path)
    assert [m.role for m in s.messages] == ["user", "user", "assistant"]
    assert s.messages[0].text.startswith("Hey there, hipster!")
    assert s.messages[2].usage == Usage(prompt_tokens=53, completion_tokens=46)
    assert ctx.skipped["scorer model call"] == 1
    assert s.outcome == "success"


def test_corpus_json_cancelled_popularity():
    # status "cancelled", 3 samples, each system/user/assistant; scores C, C, I
    path = corpus("inspect-ai-log/json/2025-05-12T20-28-13-04-00_popularity.json")
    _, sessions, _ = parse(path)
    assert [s.outcome for s in sessions] == ["success", "success", "failure"]
    assert [s.messages[2].usage.prompt_tokens for s in sessions] == [64, 58, 70]
    assert all(s.metadata["status"] == "cancelled" for s in sessions)


def test_corpus_eval_files():
    # popularity .eval: 10 sample members (1..10, epoch 1), no scores recorded -> unknown;
    # input-task .eval: 1 sample, grader call skipped.
    path = corpus("inspect-ai-log/eval/2025-02-11T15-17-00-05-00_popularity_dPiJifoWeEQBrfWsAopzWr.eval")
    assert importers.detect(path).name == "inspect"
    _, sessions, _ = parse(path)
    assert [s.metadata["sample_id"] for s in sessions] == list(range(1, 11))
    assert all([m.role for m in s.messages] == ["system", "user", "assistant"] for s in sessions)
    assert {s.outcome for s in sessions} == {"unknown"}
    by_id = {s.metadata["sample_id"]: s for s in sessions}
    assert by_id[3].messages[2].text == "No" and by_id[3].messages[2].usage.prompt_tokens == 70
    path = corpus("inspect-ai-log/eval/2024-11-05T13-32-37-05-00_input-task_hxs4q9azL3ySGkjJirypKZ.eval")
    _, (s,), ctx = parse(path)
    assert s.messages[-1].usage == Usage(prompt_tokens=52, completion_tokens=61)
    assert ctx.skipped["scorer model call"] == 1


def test_sniff_claims_only_inspect_files():
    root = corpus("inspect-ai-log").parent
    imp = importers.get("inspect")
    for p in sorted(root.rglob("*")):
        if p.is_file():
            assert imp.sniff(p, read_head(p)) == p.is_relative_to(root / "inspect-ai-log"), p
