"""VCR cassette importer: body decoding, stream reassembly, and calls chained into sessions."""

from __future__ import annotations

from pathlib import Path

import pytest

from context_forensics import importers
from context_forensics.errors import InputError
from context_forensics.importers.base import ImportContext, read_head
from context_forensics.importers.cassette import chain_calls, parse_sse, read_calls
from context_forensics.records import Usage
from helpers import CORPUS, FIXTURES, corpus, parse

HERE = FIXTURES / "cassette"
CASSETTE_DIR = "llm-api-vcr-cassette"
FIXTURE_FILES = ["openai_stream_chain.yaml", "anthropic_gzip_chain.yaml", "responses_previous_id.yaml",
                 "gemini_stream.yaml", "ruby_vcr.yml", "json_cassette.json", "unrecorded_stream.yaml",
                 "bedrock.yaml"]


def _corpus_cassettes() -> list[Path]:
    root = CORPUS / CASSETTE_DIR
    return sorted(root.rglob("*.yaml")) if root.exists() else []


def _by_call(sessions):
    """{interaction index: (session, position of the call's first message)}."""
    out = {}
    for s in sessions:
        for i, m in enumerate(s.messages):
            if "call_index" in m.meta:
                out[m.meta["call_index"]] = (s, i)
    return out


@pytest.mark.parametrize("name", FIXTURE_FILES + ["broken.yaml"])
def test_detected(name):
    imp = importers.detect(HERE / name)
    assert imp is not None and imp.name == "vcr_cassette"


# ---------------------------------------------------------------- the core property


@pytest.mark.parametrize(
    "path",
    [HERE / n for n in FIXTURE_FILES] + _corpus_cassettes(),
    ids=lambda p: p.name,
)
def test_every_call_sees_exactly_the_session_prefix(path):
    """For each recorded call, the messages before its answer are exactly its request."""
    _, sessions, _ = parse(path, "vcr_cassette")
    placed = _by_call(sessions)
    raw_calls, _ = read_calls(path, ImportContext(path=path))
    chained_calls, _ = read_calls(path, ImportContext(path=path))
    chain_calls(chained_calls, ImportContext(path=path))  # resolves previous_response_id contexts
    assert raw_calls and sorted(placed) == [c.index for c in raw_calls]
    for raw, chained in zip(raw_calls, chained_calls, strict=True):
        session, pos = placed[raw.index]
        prefix = [m.hash for m in session.messages[:pos]]
        assert prefix == [m.hash for m in chained.request], f"call {raw.index}"
        if raw.previous_response_id is None:
            assert prefix == [m.hash for m in raw.request], f"call {raw.index}"
        else:  # the stored context plus the new input items (instructions stay the first call's)
            new = [m.hash for m in raw.request if m.meta.get("source") != "instructions"]
            assert prefix[-len(new):] == new
        answer = session.messages[pos]
        assert answer.role == "assistant"
        assert answer.meta["request"]["endpoint"]
        assert answer.usage == raw.response[0].usage


# ---------------------------------------------------------------- fixtures


def test_openai_stream_chain_and_skips():
    _, sessions, ctx = parse(HERE / "openai_stream_chain.yaml")
    assert [s.external_id for s in sessions] == ["openai_stream_chain#1", "openai_stream_chain#4"]
    chain, other = sessions
    assert [m.role for m in chain.messages] == ["system", "user", "assistant", "tool", "assistant"]
    first = chain.messages[2]
    # tool call reassembled from the stream deltas; usage from the include_usage chunk
    assert [(c.name, c.arguments, c.id) for c in first.tool_calls] == [("get_weather", '{"city": "Paris"}', "call_p1")]
    assert first.usage == Usage(prompt_tokens=64, completion_tokens=15, cache_read_tokens=0, reasoning_tokens=0)
    assert first.meta["call_index"] == 1 and first.meta["request"]["stream"] is True
    assert first.meta["request"]["tools"][0]["function"]["name"] == "get_weather"
    assert chain.messages[3].name == "get_weather"
    last = chain.messages[4]
    assert last.usage == Usage(prompt_tokens=96, completion_tokens=11, cache_read_tokens=64, reasoning_tokens=0)
    assert last.meta["request"]["max_tokens"] == 200
    assert chain.metadata["calls"] == [1, 2] and chain.metadata["endpoint"] == ["openai_chat"]
    assert [m.role for m in other.messages] == ["user", "assistant"]
    assert ctx.skipped == {"non-LLM interaction": 1, "failed call": 1}
    assert any("HTTP 500" in w for w in ctx.warnings)


def test_anthropic_gzip_bodies_and_resent_answer():
    _, sessions, ctx = parse(HERE / "anthropic_gzip_chain.yaml")
    (s,) = sessions
    assert [m.role for m in s.messages] == ["system", "user", "assistant", "tool", "assistant"]
    first = s.messages[2]
    # input 12 + cache creation 900 + cache read 0
    assert first.usage == Usage(prompt_tokens=912, completion_tokens=40, cache_read_tokens=0,
                                cache_creation_tokens=900)
    # The session keeps the answer as call 1 re-sent it (without the thinking block) and
    # keeps the recorded answer's thinking in meta.
    assert first.parts == ()
    assert first.meta["recorded_response"]["parts"] == [{"type": "thinking", "text": "List it."}]
    assert first.meta["request"]["thinking"]["budget_tokens"] == 1024
    last = s.messages[4]
    assert last.text == "Two files: a.log and b.log."
    # message_start usage (input 30, cache read 900) updated by message_delta (output 9)
    assert last.usage == Usage(prompt_tokens=930, completion_tokens=9, cache_read_tokens=900, cache_creation_tokens=0)
    assert ctx.warnings == []


def test_responses_previous_response_id_chain():
    _, sessions, ctx = parse(HERE / "responses_previous_id.yaml")
    (s,) = sessions
    assert [(m.role, m.text) for m in s.messages] == [
        ("system", "Be brief."), ("user", "Hi there"), ("assistant", "Hello!"), ("user", "Name a colour."),
        ("assistant", "Blue."),
    ]
    assert s.messages[4].usage == Usage(prompt_tokens=41, completion_tokens=3, cache_read_tokens=0, reasoning_tokens=0)
    assert s.messages[4].meta["response_id"] == "resp_2"
    assert ctx.skipped == {"non-LLM interaction": 2}  # the OAuth POST and the GET of a stored response


def test_gemini_stream_merge():
    _, sessions, ctx = parse(HERE / "gemini_stream.yaml")
    (s,) = sessions
    assert [m.role for m in s.messages] == ["system", "user", "assistant", "tool", "user", "assistant"]
    a = s.messages[2]
    assert a.text == "Let me check."
    assert [(c.name, c.arguments) for c in a.tool_calls] == [("rain_check", '{"city": "Lyon"}')]
    # the last chunk's usageMetadata: completion = candidates 9 + thoughts 30
    assert a.usage == Usage(prompt_tokens=31, completion_tokens=39, cache_read_tokens=16, reasoning_tokens=30)
    assert a.meta["request"]["model"] == "gemini-2.5-flash" and a.meta["request"]["max_tokens"] == 512
    assert a.meta["request"]["stream"] is True
    assert (s.messages[3].name, s.messages[3].text) == ("rain_check", "no rain")
    assert s.messages[4].parts[0]["width"] == 3
    assert ctx.skipped == {"non-LLM interaction": 1}  # countTokens


def test_ruby_vcr_and_json_cassettes():
    _, (ruby,), _ = parse(HERE / "ruby_vcr.yml")
    assert ruby.messages[-1].usage == Usage(prompt_tokens=9, completion_tokens=4)
    assert ruby.started_at == "2024-01-02T10:00:00Z"
    _, (ollama,), _ = parse(HERE / "json_cassette.json")
    assert ollama.messages[-1].text == "Rayleigh scattering."
    assert ollama.messages[-1].usage == Usage(prompt_tokens=26, completion_tokens=5)


def test_unrecorded_answer_is_taken_from_the_next_request():
    # Old cassettes: !!python/unicode tags, and a stream the recorder saved as an empty body.
    _, (s,), ctx = parse(HERE / "unrecorded_stream.yaml")
    assert [(m.role, m.text) for m in s.messages] == [
        ("user", "Count to three."), ("assistant", "1, 2, 3."), ("user", "Now backwards."), ("assistant", "3, 2, 1."),
    ]
    first = s.messages[1]
    assert first.usage is None and first.meta["no_response"] is True and first.meta["call_index"] == 0
    assert "recorded_response" not in first.meta
    assert any("interaction 0" in w and "empty" in w for w in ctx.warnings)


def test_bedrock_converse_and_event_streams():
    _, sessions, ctx = parse(HERE / "bedrock.yaml")
    nova, claude = sessions
    assert [m.role for m in nova.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert nova.messages[2].tool_calls[0].id == "tooluse_1"
    assert nova.messages[2].usage == Usage(prompt_tokens=400, completion_tokens=30)
    assert nova.messages[2].model == "amazon.nova-micro-v1:0"  # from the URL-encoded model id
    assert nova.messages[3].text == '{"weather": "rain"}' and nova.messages[3].name == "get_weather"
    # ConverseStream frames; prompt = input 20 + cache read 430
    last = nova.messages[4]
    assert last.text == "It is raining."
    assert last.usage == Usage(prompt_tokens=450, completion_tokens=5, cache_read_tokens=430)
    assert last.meta["request"]["max_tokens"] == 300
    # InvokeModelWithResponseStream with an Anthropic body: base64 chunks of Messages events
    assert [m.text for m in claude.messages] == ["Say hi", "Hi!"]
    assert claude.messages[1].usage == Usage(prompt_tokens=10, completion_tokens=4)
    assert ctx.skipped == {"unsupported model API": 1}  # the Titan invoke


def test_broken_yaml_names_the_line():
    with pytest.raises(InputError) as e:
        parse(HERE / "broken.yaml")
    assert "broken.yaml:10:" in str(e.value)


def test_parse_sse_handles_multiline_and_done():
    events = parse_sse('event: a\ndata: {"x":\ndata: 1}\n\ndata: [DONE]\n\n: comment\ndata: {"y": 2}\n')
    assert events == [{"x": 1}, {"y": 2}]


def test_sniff_ignores_other_yaml(tmp_path):
    imp = importers.get("vcr_cassette")
    cfg = tmp_path / "config.yaml"
    cfg.write_text("interactions:\n- request:\n    uri: https://api.github.com/repos\n    method: GET\n")
    plain = tmp_path / "plain.yaml"
    plain.write_text("models:\n  default: gpt-4o\n")
    for p in (cfg, plain):
        assert not imp.sniff(p, read_head(p)), p.name


# ---------------------------------------------------------------- the real corpus
# Counts below were read off the cassettes by hand: each request body's messages/contents,
# plus one assistant message per response; usage values are the response bodies' usage
# (Anthropic streams: message_delta's usage, which updates message_start's).


def _one(rel: str):
    fmt, sessions, ctx = parse(corpus(f"{CASSETTE_DIR}/{rel}"))
    assert fmt == "vcr_cassette"
    return sessions, ctx


def test_corpus_openai_chat_tool_chain():
    # 2 interactions; request 2 = request 1 (system, user) + the assistant tool calls + 2 tool results.
    (s,), ctx = _one("openai/test_chat_completion_tool_calls_with_content.yaml")
    assert [m.role for m in s.messages] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    calls = s.messages[2].tool_calls
    assert [c.id for c in calls] == ["call_JpNb8OiAkbIbHzDggfpdDHpi", "call_vaFQc3zK6hHTRZKXRI5Eo2cJ"]
    assert s.messages[2].usage == Usage(prompt_tokens=75, completion_tokens=51, cache_read_tokens=0, reasoning_tokens=0)
    assert [m.text for m in s.messages[3:5]] == ["50 degrees and raining", "70 degrees and sunny"]
    assert s.messages[5].usage == Usage(prompt_tokens=99, completion_tokens=25, cache_read_tokens=0, reasoning_tokens=0)
    assert s.messages[5].model == "gpt-4o-mini-2024-07-18"
    assert not ctx.skipped and not ctx.warnings


def test_corpus_openai_responses_function_call():
    (s,), _ = _one("openai/test_responses_create_captures_tool_call_content.yaml")
    assert [m.role for m in s.messages] == ["user", "assistant"]
    assert s.messages[0].text == "What's the weather in Seattle right now?"
    (call,) = s.messages[1].tool_calls
    assert (call.name, call.arguments, call.id) == (
        "get_current_weather", '{"location":"Seattle, WA"}', "call_90uO5LcGP5vTBTCrjyhYtWsA")
    assert s.messages[1].usage == Usage(prompt_tokens=72, completion_tokens=8, cache_read_tokens=0, reasoning_tokens=0)


def test_corpus_vertex_gemini_function_turns():
    # contents: user text, model with 2 functionCalls, user with 2 functionResponses; plus the answer.
    (s,), _ = _one("vertexai-gemini/test_tool_events.yaml")
    assert [m.role for m in s.messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c.arguments for c in s.messages[1].tool_calls] == [
        '{"location": "New Delhi"}', '{"location": "San Francisco"}'
    ]
    assert s.messages[2].text == '{"temperature": 35, "unit": "C"}'
    # promptTokenCount 128; candidates 26 + thoughts 692
    assert s.messages[4].usage == Usage(prompt_tokens=128, completion_tokens=718, reasoning_tokens=692)
    assert s.model == "gemini-2.5-pro"


@pytest.mark.parametrize(
    "name, roles, usages",
    [
        ("test_prompt.yaml", ["user", "assistant"], [(17, 10)]),
        ("test_thinking_prompt.yaml", ["user", "assistant"], [(46, 84)]),
        ("test_tools.yaml", ["user", "assistant", "tool", "tool", "assistant"], [(542, 62), (678, 82)]),
        ("test_fixed_version_tool_chain_regression.yaml", ["user", "assistant", "tool", "assistant"],
         [(563, 37), (617, 41)]),
        # input_tokens grows from 2039 (message_start) to 10423 (message_delta) with the search results
        ("test_web_search.yaml", ["user", "assistant"], [(10423, 341)]),
    ],
)
def test_corpus_anthropic(name, roles, usages):
    (s,), ctx = _one(f"anthropic-messages/{name}")
    assert [m.role for m in s.messages] == roles
    got = [(m.usage.prompt_tokens, m.usage.completion_tokens) for m in s.messages if m.usage]
    assert got == usages
    assert all(m.usage.cache_read_tokens == 0 for m in s.messages if m.usage)
    assert not ctx.warnings


def test_corpus_anthropic_details():
    (s,), _ = _one("anthropic-messages/test_prompt.yaml")
    assert s.messages[1].text == "- Captain\n- Scoop"
    (s,), _ = _one("anthropic-messages/test_thinking_prompt.yaml")
    (thinking,) = s.messages[1].parts
    assert thinking["type"] == "thinking" and thinking["text"].startswith("The user wants two names")
    (s,), _ = _one("anthropic-messages/test_tools.yaml")  # the gzip'd, !!binary SSE bodies
    assert [m.text for m in s.messages[2:4]] == ["Charles", "Sammy"]
    assert s.messages[4].text.startswith("Here are two great names")
    (s,), _ = _one("anthropic-messages/test_web_search.yaml")
    a = s.messages[1]
    assert a.tool_calls[0].name == "web_search"
    assert a.tool_calls[0].arguments == '{"query": "San Francisco weather today"}'
    (result,) = a.parts
    assert result["type"] == "web_search_tool_result" and len(result["results"]) == 10
    assert a.text.startswith("Based on the search results, here's the current weather in San Francisco:")


def test_provider_sniffs_claim_only_cassettes_in_the_corpus():
    if not CORPUS.exists():
        pytest.skip("corpus not available")
    names = ["vcr_cassette", "openai_chat", "openai_responses", "anthropic_messages"]
    imps = {n: importers.get(n) for n in names}
    for f in sorted(CORPUS.rglob("*")):
        if not f.is_file():
            continue
        head = read_head(f)
        claims = [n for n, imp in imps.items() if imp.sniff(f, head)]
        expected = ["vcr_cassette"] if CASSETTE_DIR in f.parts else []
        assert claims == expected, f
