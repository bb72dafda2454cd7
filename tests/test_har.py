"""HAR captures of provider requests (``har``): every captured request is an exact window.

Corpus: the four Polly.JS recordings of OpenLLMetry-JS (Anthropic messages streaming, Anthropic
beta messages with thinking, OpenAI chat with a tool, OpenAI responses with gzip + base64 chunk
bodies). Fixtures: a multi-request conversation and a browser's capture (``fixtures/har/README.md``).
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest

from context_forensics import importers
from context_forensics.config.models import resolve_model
from context_forensics.importers.base import ImportContext, read_head
from context_forensics.importers.cassette.calls import calls_of
from context_forensics.importers.har import _interaction
from context_forensics.records import Usage
from context_forensics.tokens import TokenCounter
from helpers import FIXTURES, corpus, parse, replay_json

HERE = FIXTURES / "har"
CAPTURES = "har-request-captures/openllmetry-js"

# file: (model, roles, recorded usage of the one call, tool calls of the answer, exact tokenizer?)
CORPUS_FILES = {
    "anthropic-messages-streaming": (
        "claude-3-opus-20240229", ["user", "assistant"],
        Usage(prompt_tokens=17, completion_tokens=158, cache_read_tokens=0, cache_creation_tokens=0), [], False),
    "anthropic-beta-messages-thinking": (
        "claude-opus-4-1-20250805", ["user", "assistant"],
        Usage(prompt_tokens=49, completion_tokens=186, cache_read_tokens=0, cache_creation_tokens=0), [], False),
    "openai-chat-tool-calling": (
        "gpt-4", ["user", "assistant"],
        Usage(prompt_tokens=82, completion_tokens=18, cache_read_tokens=0, reasoning_tokens=0),
        [("get_current_weather", {"location": "Boston, MA"})], True),
    "openai-responses": (
        "gpt-4o-mini", ["user", "assistant"],
        Usage(prompt_tokens=14, completion_tokens=26, cache_read_tokens=0, reasoning_tokens=0), [], True),
}


def _items(path: Path, ctx: ImportContext) -> list:
    doc = json.loads(path.read_text())
    return [_interaction(e, i, ctx) for i, e in enumerate(doc["log"]["entries"])]


@pytest.mark.parametrize("name", sorted(CORPUS_FILES))
def test_corpus_capture_read_whole(name):
    path = corpus(f"{CAPTURES}/{name}/recording.har")
    model, roles, usage, calls, _ = CORPUS_FILES[name]
    assert importers.detect(path).name == "har"
    fmt, sessions, ctx = parse(path)
    assert fmt == "har" and ctx.skipped == {} and ctx.warnings == []
    (s,) = sessions
    assert s.model == model
    assert [m.role for m in s.messages] == roles
    answer = s.messages[-1]
    assert answer.usage == usage  # the response's usage is the recorded usage
    assert answer.meta["call_index"] == 0 and answer.meta["request"]["endpoint"].startswith("/v1/")
    assert [(c.name, json.loads(c.arguments)) for c in answer.tool_calls] == calls
    assert answer.text or answer.tool_calls
    assert s.metadata["har"] == {"version": "1.2", "creator": {"name": "Polly.JS", "version": "6.0.6",
                                                                "comment": "persister:fs"}}
    (cap,) = s.metadata["captures"]
    assert cap["entry"] == 0 and cap["model"] == model and cap["recorded_prompt_tokens"] == usage.prompt_tokens
    assert cap["tools"]["count"] == len(s.metadata.get("tools") or [])


def test_corpus_details():
    _, (s,), _ = parse(corpus(f"{CAPTURES}/anthropic-messages-streaming/recording.har"))
    assert s.messages[0].text == "Tell me a joke about OpenTelemetry"
    text = s.messages[1].text  # the SSE text deltas joined
    assert text.startswith("Sure, here's a joke about OpenTelemetry:") and len(text) == 696
    _, (s,), _ = parse(corpus(f"{CAPTURES}/anthropic-beta-messages-thinking/recording.har"))
    assert [p["type"] for p in s.messages[1].parts] == ["thinking"]
    assert s.messages[1].meta["request"]["thinking"]["type"] == "enabled"
    assert s.messages[1].text.endswith("The answer is **4**.")
    _, (s,), _ = parse(corpus(f"{CAPTURES}/openai-chat-tool-calling/recording.har"))
    assert s.metadata["captures"][0]["tools"]["names"] == ["get_current_weather"]
    assert s.messages[1].model == "gpt-4-0613"  # the response names the snapshot; the request asked for gpt-4
    _, (s,), _ = parse(corpus(f"{CAPTURES}/openai-responses/recording.har"))
    assert s.messages[1].meta["response_id"].startswith("resp_")


@pytest.mark.parametrize("name", sorted(CORPUS_FILES))
def test_corpus_replay_window_is_the_request(name, tmp_path):
    """The replay's first (only) step's window is the captured request body as ctxf counts it: its
    messages plus its tool definitions and framing; where the tokenizer is the model's own, exact and
    equal to the recorded prompt size."""
    path = corpus(f"{CAPTURES}/{name}/recording.har")
    model, _, usage, _, exact = CORPUS_FILES[name]
    ctx = ImportContext(path=path)
    (call,) = calls_of(_items(path, ctx), ctx, noun="entry")
    rep = replay_json(str(path), str(tmp_path / "c.db"))
    (step,) = rep["steps"]
    assert step["counts"]["kept"] == len(call.request) and step["counts"]["evicted"] == 0
    assert step["recorded_prompt_tokens"] == usage.prompt_tokens
    if exact:
        counter = TokenCounter(resolve_model(model))
        over = counter.call_overhead(call.params, has_system=any(m.role == "system" for m in call.request))
        counted = counter.count_messages(call.request).total + over.tokens
        assert rep["token_kind"] == "exact" and step["window_tokens_kind"] == "exact"
        assert step["window_tokens"] == step["computed_prompt_tokens"] == counted == usage.prompt_tokens
    else:  # a Claude stand-in tokenizer: calibrated on the recorded size, never labelled exact
        assert rep["token_kind"] != "exact"


# ---------------------------------------------------------------- fixtures


def test_multi_request_conversation_is_one_session():
    path = HERE / "multi_turn_chain.har"
    assert importers.detect(path).name == "har"
    _, sessions, ctx = parse(path)
    assert ctx.skipped == {"non-LLM interaction": 1}  # GET /v1/models
    chat, anth = sessions
    assert [s.external_id for s in sessions] == ["multi_turn_chain#1", "multi_turn_chain#3"]
    assert [m.role for m in chat.messages] == ["system", "user", "assistant", "tool", "assistant"]
    first, last = chat.messages[2], chat.messages[4]
    assert [(c.name, c.id) for c in first.tool_calls] == [("read_file", "call_r1")]
    # gzip + base64 chunks (Polly.JS) read through the bounded inflate; the second body plain JSON
    assert first.usage == Usage(prompt_tokens=65, completion_tokens=17, cache_read_tokens=0)
    assert last.usage == Usage(prompt_tokens=101, completion_tokens=16, cache_read_tokens=0)
    assert first.timestamp == "2025-10-09T08:53:20Z"  # the response's own ``created``
    assert chat.metadata["calls"] == [1, 2]
    caps = chat.metadata["captures"]
    assert [c["entry"] for c in caps] == [1, 2]
    assert caps[0]["system"] == caps[1]["system"] and caps[0]["system"]["messages"] == 1
    assert caps[0]["system"]["chars"] == len("You are a coding agent. Read files before you answer.")
    assert caps[0]["tools"]["hash"] == caps[1]["tools"]["hash"] and caps[0]["tools"]["names"] == ["read_file"]
    assert [c["request_messages"] for c in caps] == [2, 4]
    assert [m.role for m in anth.messages] == ["system", "user", "assistant"]
    assert anth.messages[2].text == "Paris"
    assert anth.messages[2].timestamp == "2025-10-09T10:00:05Z"  # no date in it: the entry's startedDateTime
    assert anth.messages[2].usage == Usage(prompt_tokens=15, completion_tokens=4, cache_read_tokens=0,
                                           cache_creation_tokens=0)


def test_multi_request_replay_steps_are_the_requests(tmp_path):
    doc = json.loads((HERE / "multi_turn_chain.har").read_text())
    del doc["log"]["entries"][3]  # the other conversation: one session left to replay
    path = tmp_path / "chat.har"
    path.write_text(json.dumps(doc))
    rep = replay_json(str(path), str(tmp_path / "c.db"))
    assert rep["token_kind"] == "exact"
    assert [s["counts"]["kept"] for s in rep["steps"]] == [2, 4]
    assert [s["recorded_prompt_tokens"] for s in rep["steps"]] == [65, 101]


def test_browser_capture_is_not_claimed():
    path = HERE / "browser_pages.har"
    assert importers.detect(path) is None
    assert not importers.get("har").sniff(path, read_head(path))


def test_gzip_bomb_body_is_refused(tmp_path):
    doc = json.loads((HERE / "multi_turn_chain.har").read_text())
    bomb = gzip.compress(b"\0" * (40 << 20))  # 40 MiB of zeros in ~40 KB
    b64 = base64.b64encode(bomb).decode()
    doc["log"]["entries"][1]["response"]["content"]["text"] = json.dumps([b64[i:i + 4096]
                                                                          for i in range(0, len(b64), 4096)])
    path = tmp_path / "bomb.har"
    path.write_text(json.dumps(doc))
    _, sessions, ctx = parse(path, "har")
    assert ctx.skipped["oversized body"] == 1
    assert any("decompression bomb" in w for w in ctx.warnings)
    # the call is kept without its answer; the next request re-sends that answer
    assert [m.role for m in sessions[0].messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert sessions[0].messages[2].usage is None


def test_not_base64_body_is_warned(tmp_path):
    doc = json.loads((HERE / "multi_turn_chain.har").read_text())
    doc["log"]["entries"][1]["response"]["content"]["text"] = '["not base64!"]'
    path = tmp_path / "bad.har"
    path.write_text(json.dumps(doc))
    _, sessions, ctx = parse(path, "har")
    assert any("entry 1: response body marked base64 does not decode" in w for w in ctx.warnings)
    assert len(sessions) == 2
