"""OpenTelemetry GenAI telemetry (format ``otel``): every recorded form gives the same conversation,
each chat span's recorded request is exactly the context before its answer, usage is recorded,
conversations group by ``gen_ai.conversation.id`` or trace, and bad input costs only its record.

The fixtures under fixtures/otel/ were written by scripts/make_otel_fixtures.py with the real
instrumentation packages over a mocked HTTP transport (fixtures/otel/README.md: which package
wrote which file, at which version); the tests read the committed files, and the last test
regenerates them when the ``fixtures`` extra is installed.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from context_forensics.errors import InputError
from context_forensics.importers import detect, get
from context_forensics.importers.base import read_head
from context_forensics.store.db import Store
from context_forensics.store.ingest import ingest_paths
from context_forensics.tokens.fidelity import session_fidelity
from helpers import FIXTURES, parse_all

F = FIXTURES / "otel"
FILES = sorted(p for p in F.iterdir() if p.suffix in (".json", ".jsonl"))
SPANS = F / "openai_v2_spans.jsonl"
IMP = get("otel")
ROOT = Path(__file__).resolve().parent.parent


def parse(path: Path):
    return parse_all(IMP, path)


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]


def write_lines(path: Path, docs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), "utf-8")
    return path


def spans_of(doc: dict) -> list[dict]:
    return [sp for rs in doc.get("resourceSpans", []) for ss in rs["scopeSpans"] for sp in ss["spans"]]


def attr(span: dict, key: str):
    return next((a["value"] for a in span.get("attributes", []) if a["key"] == key), None)


def set_attr(span: dict, key: str, value: str | None) -> None:
    span["attributes"] = [a for a in span.get("attributes", []) if a["key"] != key]
    if value is not None:
        span["attributes"].append({"key": key, "value": {"stringValue": value}})


def test_every_fixture_is_otel_and_no_other_fixture_is():
    assert len(FILES) == 6
    for p in FILES:
        assert detect(p) is IMP, p
    others = [p for p in FIXTURES.rglob("*") if p.is_file() and "otel" not in p.parts
              and p.suffix in (".json", ".jsonl", ".ndjson")]
    assert others and not [p for p in others if IMP.sniff(p, read_head(p))]


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_each_recorded_form_gives_the_agent_loop_with_its_usage(path):
    sessions, ctx = parse(path)
    assert not ctx.warnings and ctx.bad == 0
    loop, hi = sessions
    assert [m.role for m in loop.messages] == ["system", "user", "assistant", "tool", "assistant"]
    system, user, call, result, answer = loop.messages
    assert system.text == "You are a weather assistant. Answer in one sentence."
    assert user.text == "What is the weather in Paris today?"
    (tc,) = call.tool_calls
    assert (tc.id, tc.name, json.loads(tc.arguments)) == ("call_wx_1", "get_weather", {"city": "Paris"})
    assert result.tool_call_id == "call_wx_1" and json.loads(result.text) == {"temp_c": 18, "sky": "cloudy"}
    assert answer.text == "It is 18 °C and cloudy in Paris."
    assert (call.usage.prompt_tokens, call.usage.completion_tokens) == (71, 15)
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (103, 12)
    # the cached figure where the instrumentation records one (not openai-v2's spans, nor its events)
    if "gen_ai.usage.cache_read" in path.read_text() or "prompt_details.cache_read" in path.read_text():
        assert answer.usage.cache_read_tokens == 64
    else:
        assert answer.usage.cache_read_tokens is None
    assert call.model == answer.model == loop.model == "gpt-4o-mini-2024-07-18"
    assert call.meta["request"]["model"].startswith("gpt-4o-mini")
    assert call.meta["request"]["temperature"] == 0.2 and call.meta["request"]["max_tokens"] == 200
    assert loop.metadata["agent"] == "weather-agent" and loop.metadata["model_calls"] == 2
    assert [m.role for m in hi.messages] == ["user", "assistant"] and hi.messages[1].usage.prompt_tokens == 9
    assert loop.title == "What is the weather in Paris today?"


def test_the_forms_agree_message_for_message():
    """Six files written by four instrumentations in four forms: the same conversation, hash for hash."""
    seen = {}
    for p in FILES:
        sessions, _ = parse(p)
        seen[p.name] = [[m.hash for m in s.messages] for s in sessions]
    assert len({json.dumps(v) for v in seen.values()}) == 1, seen


def test_the_context_before_each_answer_is_exactly_its_recorded_request():
    """Read independently from the raw spans: every chat span's gen_ai.input.messages, in order."""
    (loop, hi), _ = parse(SPANS)
    chats = [sp for d in lines(SPANS) for sp in spans_of(d)
             if attr(sp, "gen_ai.operation.name") == {"stringValue": "chat"}]
    assert len(chats) == 3
    sessions = {sp["spanId"]: s for s in (loop, hi) for sp in chats
                if any(m.meta.get("request", {}).get("span_id") == sp["spanId"] for m in s.messages)}
    for sp in chats:
        sent = json.loads(attr(sp, "gen_ai.input.messages")["stringValue"])
        s = sessions[sp["spanId"]]
        pos = next(i for i, m in enumerate(s.messages) if m.meta.get("request", {}).get("span_id") == sp["spanId"])
        before = s.messages[:pos]
        assert [m.role for m in before] == [m["role"] for m in sent]
        for m, raw in zip(before, sent):
            part = raw["parts"][0]
            if part["type"] == "text":
                assert m.text == part["content"]
            elif part["type"] == "tool_call":
                assert m.tool_calls[0].id == part["id"]
            else:
                assert m.tool_call_id == part["id"] and m.text == part["response"]  # the result as sent
        assert "input_differs" not in s.messages[pos].meta["request"]


def test_conversation_id_from_the_agent_span_names_the_session_and_tool_spans_annotate_results():
    (loop, hi), _ = parse(SPANS)
    assert loop.external_id == "conv-weather-1" and loop.metadata["conversation_id"] == "conv-weather-1"
    assert hi.external_id == "5eed0000000000000000000000000002" and "conversation_id" not in hi.metadata
    assert loop.metadata["tool_spans"] == 1
    tool = loop.messages[3].meta["tool_span"]
    assert tool["tool_name"] == "get_weather" and tool["type"] == "function"
    assert json.loads(tool["arguments"]) == {"city": "Paris"}
    assert loop.messages[2].meta["request"]["span_id"] == "5eed000000000002"
    assert loop.started_at.startswith("2026-01-01T00:00:00")


def test_two_traces_of_one_conversation_are_one_session(tmp_path):
    docs = lines(F / "openinference.jsonl")
    for d in docs:
        for sp in spans_of(d):
            sp.setdefault("attributes", []).append({"key": "session.id", "value": {"stringValue": "chat-42"}})
    (s,), _ = parse(write_lines(tmp_path / "oi.jsonl", docs))
    assert s.external_id == "chat-42" and len(s.metadata["traces"]) == 2
    assert [m.role for m in s.messages] == ["system", "user", "assistant", "tool", "assistant", "user", "assistant"]
    # the third call sent only "Hi": it does not extend the history, so it says what it sent
    req = s.messages[-1].meta["request"]
    assert req["input_differs"] and req["input_hashes"] == [s.messages[5].hash]
    assert s.metadata["calls_with_different_input"] == 1


def test_fidelity_counts_the_window_the_call_sent(tmp_path):
    docs = lines(F / "openinference.jsonl")
    for d in docs:
        for sp in spans_of(d):
            sp.setdefault("attributes", []).append({"key": "session.id", "value": {"stringValue": "chat-42"}})
    path = write_lines(tmp_path / "oi.jsonl", docs)
    with Store.open(tmp_path / "s.db") as store:
        ingest_paths(store, [path])
        (ses,) = store.sessions()
        steps = session_fidelity(store, ses["id"]).recorded_steps()
        assert [s.recorded for s in steps] == [71, 103, 9]
        # the third call's context is the one message it sent, not the whole history
        assert steps[2].sent is not None and len(steps[2].sent) == 1 and steps[2].context < steps[1].context


def test_a_tool_result_only_the_span_recorded_is_added_after_its_call(tmp_path):
    docs = lines(SPANS)
    kept = [d for d in docs if not any(sp["spanId"] == "5eed000000000004" for sp in spans_of(d))]
    assert len(kept) == len(docs) - 1
    (loop, _), _ = parse(write_lines(tmp_path / "s.jsonl", kept))
    assert [m.role for m in loop.messages] == ["system", "user", "assistant", "tool"]
    tool = loop.messages[3]
    assert tool.tool_call_id == "call_wx_1" and json.loads(tool.text) == {"temp_c": 18, "sky": "cloudy"}
    assert tool.meta["source"] == "otel:gen_ai.tool.call.result"


def test_a_resent_answer_in_another_form_replaces_the_recorded_one(tmp_path):
    docs = lines(SPANS)
    for d in docs:
        for sp in spans_of(d):
            if sp["spanId"] == "5eed000000000004":
                sent = json.loads(attr(sp, "gen_ai.input.messages")["stringValue"])
                sent[2]["parts"][0]["arguments"] = {"city": "Paris", "units": "metric"}
                set_attr(sp, "gen_ai.input.messages", json.dumps(sent))
    (loop, _), _ = parse(write_lines(tmp_path / "s.jsonl", docs))
    call = loop.messages[2]
    assert json.loads(call.tool_calls[0].arguments) == {"city": "Paris", "units": "metric"}
    assert call.usage.prompt_tokens == 71 and call.meta["request"]["span_id"] == "5eed000000000002"
    assert json.loads(call.meta["recorded_response"]["tool_calls"][0]["arguments"]) == {"city": "Paris"}
    assert len(loop.messages) == 5 and "input_differs" not in loop.messages[4].meta["request"]


def test_calls_without_captured_content_keep_usage_and_say_so(tmp_path):
    docs = lines(SPANS)
    for d in docs:
        for sp in spans_of(d):
            for k in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.result"):
                set_attr(sp, k, None)
    (loop, hi), ctx = parse(write_lines(tmp_path / "s.jsonl", docs))
    assert [m.role for m in loop.messages] == ["assistant", "assistant"]
    assert [m.usage.prompt_tokens for m in loop.messages] == [71, 103]
    assert all(m.meta["request"]["content_recorded"] is False for m in loop.messages)
    assert any("recorded no message content" in w for w in ctx.warnings)


def test_agent_falls_back_to_the_provider_then_otel(tmp_path):
    docs = lines(SPANS)
    for d in docs:
        for rs in d.get("resourceSpans", []):
            rs["resource"]["attributes"] = [a for a in rs["resource"]["attributes"] if a["key"] != "service.name"]
    (loop, _), _ = parse(write_lines(tmp_path / "a.jsonl", docs))
    assert loop.metadata["agent"] == "openai"
    for d in docs:
        for sp in spans_of(d):
            set_attr(sp, "gen_ai.provider.name", None)
    (loop, _), _ = parse(write_lines(tmp_path / "b.jsonl", docs))
    assert loop.metadata["agent"] == "otel"


def test_one_document_and_a_list_read_like_the_lines(tmp_path):
    docs = lines(SPANS)
    one = {"resourceSpans": [rs for d in docs for rs in d["resourceSpans"]]}
    pretty = tmp_path / "one.json"
    pretty.write_text(json.dumps(one, indent=2), "utf-8")
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps(docs), "utf-8")
    want = [[m.hash for m in s.messages] for s in parse(SPANS)[0]]
    for p in (pretty, listed):
        assert detect(p) is IMP
        assert [[m.hash for m in s.messages] for s in parse(p)[0]] == want


def test_a_bad_line_or_span_costs_only_itself(tmp_path):
    docs = lines(SPANS)
    broken = [json.dumps(d) for d in docs]
    broken.insert(2, '{"resourceSpans": [{"scopeSpans": [{"spans": [{"spanId": "01"')  # torn line mid-file
    bad_span = json.loads(broken[-1])
    spans_of(bad_span)[0]["traceId"] = ["not", "an", "id"]
    broken[-1] = json.dumps(bad_span)  # the last span (trace 2's "greeting" parent): skipped
    p = tmp_path / "b.jsonl"
    p.write_text("\n".join(broken) + "\n", "utf-8")
    sessions, ctx = parse(p)
    assert [len(s.messages) for s in sessions] == [5, 2]
    assert ctx.skipped["invalid JSON line"] == 1 and ctx.skipped["malformed span"] == 1
    assert any(":3: invalid JSON" in w for w in ctx.warnings)


def test_unreadable_files_fail_naming_the_file(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(InputError, match="empty"):
        parse(empty)
    junk = tmp_path / "junk.jsonl"
    junk.write_text("{not json\n{nor this\n")
    with pytest.raises(InputError) as e:
        parse(junk)
    assert str(junk) in str(e.value.where)


def test_cli_ingest_and_sessions_by_agent(tmp_path):
    db = str(tmp_path / "s.db")
    r = CliRunner().invoke(app, ["ingest", str(SPANS), "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["sessions", "--agent", "weather-agent", "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["sessions"]
    assert sorted(x["external_id"] for x in rows) == ["5eed0000000000000000000000000002", "conv-weather-1"]
    r = CliRunner().invoke(app, ["sessions", "--agent", "gemini-cli", "--db", db, "--json"])
    assert json.loads(r.output) == {"version": 1, "sessions": []}


_GENERATOR_PACKAGES = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.json.file",
                       "opentelemetry.instrumentation.openai_v2", "opentelemetry.instrumentation.openai",
                       "openinference.instrumentation.openai", "openai")


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.skipif(not all(_importable(m) for m in _GENERATOR_PACKAGES),
                    reason="the fixtures extra (pip install -e '.[fixtures]') is not installed")
def test_the_generator_rewrites_the_committed_fixtures(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_otel_fixtures.py"), str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    written = sorted(tmp_path.iterdir())
    assert [p.name for p in written] == sorted(
        ["openai_v2_spans.jsonl", "openai_v2_console.json", "openllmetry.jsonl", "openinference.jsonl"])
    for p in written:
        assert p.read_bytes() == (F / p.name).read_bytes(), p.name


def test_message_events_without_their_spans_still_give_the_conversation(tmp_path):
    """A logs-only file (the spans went elsewhere): the calls' messages, grouped by trace, no usage."""
    logs_only = [d for d in lines(F / "openai_v2_events.jsonl") if "resourceLogs" in d]
    assert logs_only
    (loop, hi), _ = parse(write_lines(tmp_path / "logs.jsonl", logs_only))
    assert [m.role for m in loop.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert loop.messages[4].text == "It is 18 °C and cloudy in Paris." and loop.messages[4].usage is None
    assert [m.text for m in hi.messages] == ["Hi", "Hello! How can I help?"]
