"""Provider accounting per format: what each importer makes of a log's recorded usage.

``Usage.prompt_tokens`` is everything the call read, cached or not: replay compares a window's
size with it and decides overflow on it. So cache reads added on top of a total that already
holds them, a call's usage counted twice because the log repeats its record, or reasoning
counted as prompt make every verdict wrong. Each test below reads a small hand-written log
(tests/fixtures/usage/) with cache reads and writes, reasoning and repeated records in the
shape the agent or provider writes it (sources in each importer's docstring), and asserts the
figures exactly; the last tests check the same rules over the whole real corpus.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import pytest

from context_forensics.importers._agent_calls import usage_from
from context_forensics.importers._openai_shapes import usage_from_openai
from context_forensics.importers.cassette.bedrock import usage_from_converse
from context_forensics.importers.cassette.gemini import usage_from_gemini
from context_forensics.importers.cline.history import _metrics_usage
from context_forensics.importers.cline.ui import ui_usage
from context_forensics.importers.inspect_log.events import model_usage
from context_forensics.importers.pydantic_ai import usage_of as pydantic_usage
from context_forensics.records import Usage
from helpers import FIXTURES, parse

HERE = FIXTURES / "usage"


def _calls(path, fmt):
    """The assistant messages that carry usage, and the parse context."""
    _, sessions, ctx = parse(path, fmt)
    (s,) = sessions
    return [m for m in s.messages if m.usage is not None], s, ctx


# -- Anthropic: input_tokens leaves the cache out -------------------------------------------

def test_anthropic_prompt_is_input_plus_cache_creation_plus_cache_read():
    (m,), _, _ = _calls(HERE / "anthropic_request_response.json", "anthropic_messages")
    assert m.usage == Usage(prompt_tokens=12 + 300 + 5000, completion_tokens=40, cache_read_tokens=5000,
                            cache_creation_tokens=300)


def test_bedrock_converse_input_leaves_the_cache_out():
    u = usage_from_converse({"inputTokens": 20, "outputTokens": 7, "cacheReadInputTokens": 4000,
                             "cacheWriteInputTokens": 100})
    assert u == Usage(prompt_tokens=4120, completion_tokens=7, cache_read_tokens=4000, cache_creation_tokens=100)


def test_claude_code_one_response_in_three_records_counts_once():
    # Three records (thinking, text, tool_use) share message.id msg_1 and requestId req_1, each
    # with a copy of the usage; the last copy has the final output count.
    calls, s, _ = _calls(HERE / "claude_code" / "cafe0000-0000-4000-8000-000000000001.jsonl", "claude_code")
    assert [m.meta["message_id"] for m in calls] == ["msg_1", "msg_2"]
    assert sum(m.role == "assistant" for m in s.messages) == 2
    assert calls[0].usage == Usage(prompt_tokens=3 + 2000 + 15000, completion_tokens=180, cache_read_tokens=15000,
                                   cache_creation_tokens=2000)
    assert calls[0].tool_calls[0].name == "Grep" and "sleep calls" in calls[0].text
    assert calls[1].usage == Usage(prompt_tokens=7 + 450 + 17000, completion_tokens=60, cache_read_tokens=17000,
                                   cache_creation_tokens=450)


# -- OpenAI: cached inside prompt, reasoning inside completion ------------------------------

def test_openai_chat_cached_and_reasoning_are_inside_their_totals():
    (m,), _, _ = _calls(HERE / "openai_chat_request_response.json", "openai_chat")
    assert m.usage == Usage(prompt_tokens=1800, completion_tokens=333, cache_read_tokens=1536, reasoning_tokens=320)


def test_litellm_anthropic_passthrough_adds_only_what_prompt_tokens_leaves_out():
    # A proxy's prompt_tokens already holds reads and writes (OpenHands corpus: 7,598 = 4 + 6,246 + 1,348).
    proxy = {"prompt_tokens": 7598, "completion_tokens": 381, "cache_creation_input_tokens": 6246,
             "cache_read_input_tokens": 1348, "prompt_tokens_details": {"cached_tokens": 1348}}
    assert usage_from_openai(proxy).prompt_tokens == 7598
    assert usage_from(proxy).prompt_tokens == 7598
    # Direct Anthropic through litellm: prompt_tokens = input + cache reads, writes left out.
    direct = {"prompt_tokens": 1352, "completion_tokens": 5, "cache_creation_input_tokens": 6246,
              "cache_read_input_tokens": 1348}
    assert usage_from_openai(direct).prompt_tokens == 1352 + 6246
    assert usage_from(direct).prompt_tokens == 1352 + 6246
    # An old litellm that passed input_tokens through: both left out.
    bare = {"prompt_tokens": 4, "completion_tokens": 5, "cache_creation_input_tokens": 6246,
            "cache_read_input_tokens": 1348}
    assert usage_from_openai(bare).prompt_tokens == 4 + 1348 + 6246


def test_openai_responses_usage_sits_on_the_answer_not_the_reasoning_item():
    _, sessions, _ = parse(HERE / "openai_responses_response.json", "openai_responses")
    (s,) = sessions
    assert [(m.role, m.kind, m.usage is not None) for m in s.messages] == [
        ("system", "message", False), ("assistant", "message", True), ("assistant", "reasoning", False)]
    assert s.messages[1].usage == Usage(prompt_tokens=2400, completion_tokens=530, cache_read_tokens=2304,
                                        reasoning_tokens=512)


def test_codex_last_token_usage_is_the_call_and_a_repeated_event_is_not_a_call():
    calls, _, ctx = _calls(
        HERE / "codex" / "rollout-2026-01-05T10-00-00-019c0000-0000-7000-8000-000000000001.jsonl", "codex")
    assert [m.usage for m in calls] == [
        Usage(prompt_tokens=6000, completion_tokens=300, cache_read_tokens=2048, reasoning_tokens=256,
              context_window=272000),
        # last_token_usage, not the running total (13,000 input)
        Usage(prompt_tokens=7000, completion_tokens=120, cache_read_tokens=5888, reasoning_tokens=64,
              context_window=272000),
    ]
    assert ctx.skipped["event_msg:token_count (repeat)"] == 1


def test_codex_without_last_token_usage_takes_what_the_total_grew_by(tmp_path):
    src = HERE / "codex" / "rollout-2026-01-05T10-00-00-019c0000-0000-7000-8000-000000000001.jsonl"
    lines = []
    for line in src.read_text().splitlines():
        rec = json.loads(line)
        info = rec.get("payload", {}).get("info")
        if isinstance(info, dict):
            info.pop("last_token_usage")
        lines.append(json.dumps(rec))
    path = tmp_path / src.name
    path.write_text("\n".join(lines) + "\n")
    calls, _, _ = _calls(path, "codex")
    assert [(m.usage.prompt_tokens, m.usage.cache_read_tokens, m.usage.completion_tokens, m.usage.reasoning_tokens)
            for m in calls] == [(6000, 2048, 300, 256), (13000 - 6000, 7936 - 2048, 420 - 300, 320 - 256)]


# -- Gemini: cached inside prompt, thoughts apart from candidates ---------------------------

def test_gemini_usage_metadata():
    u = usage_from_gemini({"promptTokenCount": 9000, "cachedContentTokenCount": 6000, "candidatesTokenCount": 70,
                           "thoughtsTokenCount": 400, "toolUsePromptTokenCount": 25, "totalTokenCount": 9495})
    assert u == Usage(prompt_tokens=9025, completion_tokens=470, cache_read_tokens=6000, reasoning_tokens=400)
    assert u.prompt_tokens + u.completion_tokens == 9495


def test_gemini_cli_record_written_three_times_is_one_call():
    calls, s, _ = _calls(HERE / "gemini_cli" / "session-2026-05-02T09-00-beef0001.jsonl", "gemini_cli")
    assert sum(m.role == "assistant" for m in s.messages) == 1
    (m,) = calls
    assert m.usage == Usage(prompt_tokens=9000 + 25, completion_tokens=70 + 400, cache_read_tokens=6000,
                            reasoning_tokens=400)


# -- Agents that normalise the figures themselves -------------------------------------------

def test_cline_tokens_in_per_provider_and_a_retried_call():
    calls, _, _ = _calls(HERE / "cline" / "1760000000000", "cline")
    assert [m.usage for m in calls] == [
        # providerId anthropic: tokensIn is Anthropic's input_tokens, the cache apart
        Usage(prompt_tokens=10 + 3000 + 9000, completion_tokens=200, cache_read_tokens=9000,
              cache_creation_tokens=3000),
        # providerId openai (OpenAI compatible): tokensIn is prompt_tokens, cached reads inside it;
        # the streaming-failed attempt was a call of its own, then its retry
        Usage(prompt_tokens=12500, completion_tokens=90, cache_read_tokens=11000, cache_creation_tokens=0),
        Usage(prompt_tokens=12600, completion_tokens=95, cache_read_tokens=12288, cache_creation_tokens=0),
    ]


def test_cline_and_roo_figures_without_a_file():
    fig = {"tokensIn": 900, "tokensOut": 10, "cacheReads": 800, "cacheWrites": 50}
    assert ui_usage(fig).prompt_tokens == 1750  # no provider known: Anthropic's reading
    assert ui_usage(fig, "openrouter").prompt_tokens == 1750  # Cline subtracts the cached part
    assert ui_usage(fig, "lmstudio").prompt_tokens == 900
    assert ui_usage({**fig, "apiProtocol": "openai"}).prompt_tokens == 900  # Roo / Kilo
    assert ui_usage({**fig, "apiProtocol": "anthropic"}, "openai").prompt_tokens == 1750
    # cache reads above a tokensIn said to hold them cannot be: read the other way
    assert ui_usage({"tokensIn": 10, "cacheReads": 800}, "openai").prompt_tokens == 810
    assert _metrics_usage({"prompt": 900, "completion": 10, "cached": 850}).prompt_tokens == 1750
    assert _metrics_usage({"prompt": 900, "completion": 10, "cached": 850}, "openai").prompt_tokens == 900


def test_pi_input_holds_cache_reads_only_where_pi_ai_passed_them_through():
    calls, _, _ = _calls(HERE / "pi" / "session.jsonl", "pi")
    assert [(m.meta["api"], m.usage.prompt_tokens, m.usage.cache_read_tokens) for m in calls] == [
        ("anthropic-messages", 4 + 8000 + 600, 8000),
        ("google-generative-ai", 9100, 8192),  # input = promptTokenCount, which holds the cached part
        ("openai-completions", 9600, 9088),  # 2025-11-20: before pi 0.12.7 subtracted cached_tokens
        ("openai-completions", 512 + 9600, 9600),  # 2025-12-06: after
    ]


def test_copilot_assistant_usage_written_twice_counts_once():
    calls, s, _ = _calls(HERE / "copilot_cli" / "events.jsonl", "copilot_cli")
    assert sum(m.role == "assistant" for m in s.messages) == 2
    assert [m.usage for m in calls] == [
        Usage(prompt_tokens=1900, completion_tokens=12, cache_read_tokens=1200, cache_creation_tokens=0),
        Usage(prompt_tokens=2300, completion_tokens=20, cache_read_tokens=1800, cache_creation_tokens=0),
    ]
    # inputTokens holds the cache reads: the shutdown's sums are the calls' sums
    assert sum(m.usage.prompt_tokens for m in calls) == 4200


def test_otel_call_recorded_by_two_instrumentations_counts_once():
    calls, s, ctx = _calls(HERE / "otel" / "wrapped.jsonl", "otel")
    assert [m.text for m in s.messages if m.role == "assistant"] == ["Sunny.", "Rain."]
    assert ctx.skipped["call span wrapping another call span (one call recorded twice)"] == 1
    assert [m.usage for m in calls] == [
        # input_tokens holds the cache, as the conventions say it should
        Usage(prompt_tokens=5210, completion_tokens=30, cache_read_tokens=5000, cache_creation_tokens=200),
        # an instrumentation that passed Anthropic's input_tokens through: the cache is added
        Usage(prompt_tokens=9 + 5200 + 40, completion_tokens=12, cache_read_tokens=5200, cache_creation_tokens=40),
    ]


def test_inspect_model_usage_by_version_and_total():
    openai_old = {"input_tokens": 3000, "output_tokens": 50, "total_tokens": 3050, "input_tokens_cache_read": 2048}
    assert model_usage(openai_old, "openai/gpt-4o", "0.3.120").prompt_tokens == 3000
    anthropic_old = {"input_tokens": 5, "output_tokens": 50, "total_tokens": 2105, "input_tokens_cache_read": 2000,
                     "input_tokens_cache_write": 50}
    assert model_usage(anthropic_old, "anthropic/claude-sonnet-4-5", "0.3.120").prompt_tokens == 2055
    # 0.3.184 (2026-02-26) subtracts the cache for every provider; Google's total holds the
    # tool-use prompt, so the total alone could not tell
    google_new = {"input_tokens": 2952, "output_tokens": 470, "total_tokens": 3497, "input_tokens_cache_read": 48,
                  "reasoning_tokens": 400}
    u = model_usage(google_new, "google/gemini-2.5-pro", "0.3.190")
    assert u == Usage(prompt_tokens=3000, completion_tokens=470, cache_read_tokens=48, reasoning_tokens=400)
    assert model_usage(google_new, "google/gemini-2.5-pro", None).prompt_tokens == 2952  # the old reading


def test_pydantic_ai_input_tokens_hold_the_cache():
    u = pydantic_usage({"input_tokens": 5200, "cache_read_tokens": 5000, "cache_write_tokens": 150,
                        "output_tokens": 60, "details": {}})
    assert u == Usage(prompt_tokens=5200, completion_tokens=60, cache_read_tokens=5000, cache_creation_tokens=150)


# -- The whole corpus -----------------------------------------------------------------------

CALL_IDS = ("message_id", "request_id", "response_id", "api_call_id", "entry_id")


@pytest.fixture(scope="module")
def corpus_usage(corpus_ingest):
    db, r = corpus_ingest  # conftest: the corpus ingested once for the suite
    assert r.exit_code == 0, r.stderr
    with sqlite3.connect(db) as c:
        rows = c.execute(
            "SELECT s.format, m.session_id, m.seq, m.role, m.kind, m.usage, m.meta, s.source FROM messages m "
            "JOIN sessions s ON s.id = m.session_id ORDER BY m.session_id, m.seq").fetchall()
    return rows


def test_corpus_no_prompt_smaller_than_its_cache_and_no_reasoning_above_completion(corpus_usage):
    seen = Counter()
    bad = []
    for fmt, sid, seq, role, kind, usage, _, _ in corpus_usage:
        if usage is None:
            continue
        u = json.loads(usage)
        seen[fmt] += 1
        p, cr, cc = u.get("prompt_tokens"), u.get("cache_read_tokens") or 0, u.get("cache_creation_tokens") or 0
        if p is not None and p < cr + cc:
            bad.append((fmt, sid, seq, "prompt < cache read + cache creation", u))
        r, c = u.get("reasoning_tokens"), u.get("completion_tokens")
        if r is not None and c is not None and r > c:
            bad.append((fmt, sid, seq, "reasoning > completion", u))
        if role != "assistant" or kind != "message":
            bad.append((fmt, sid, seq, f"usage on a {role} {kind} (no replay step)", u))
    assert not bad, bad[:5]
    # the formats whose corpus logs record usage all reached this check
    assert set(seen) >= {"claude_code", "cline", "codex", "gemini_cli", "inspect", "mini_swe_agent", "openhands",
                         "pi", "vcr_cassette"}


def test_corpus_recorded_totals_match_prompt_plus_completion(corpus_usage):
    # Pi's totalTokens = input + output + cacheRead + cacheWrite; Gemini CLI's total (Gemini's
    # totalTokenCount) = input + output + thoughts + tool: each is our prompt + completion, or a
    # figure is counted twice. Not token-audit's session-sample.json: hand-written ("shape-only;
    # do not use as ground truth", PROVENANCE.md), its total adds the cached count once more.
    checked = Counter()
    for fmt, sid, seq, _, _, usage, meta, source in corpus_usage:
        if usage is None or "token-audit" in source:
            continue
        u, m = json.loads(usage), json.loads(meta or "{}")
        total = m.get("total_tokens") if fmt == "pi" else (m.get("tokens") or {}).get("total")
        if fmt in ("pi", "gemini_cli") and total:
            assert u["prompt_tokens"] + u.get("completion_tokens", 0) == total, (fmt, sid, seq, u, total)
            checked[fmt] += 1
    assert checked["pi"] > 100 and checked["gemini_cli"] > 10


def test_corpus_no_call_carries_usage_twice(corpus_usage):
    by_id = Counter()
    prev: dict[str, tuple] = {}
    repeats = []
    for fmt, sid, seq, role, _, usage, meta, _ in corpus_usage:
        if role == "user":
            prev.pop(sid, None)  # a new input: equal figures after it are a new call
        if usage is None:
            continue
        m = json.loads(meta or "{}")
        for key in CALL_IDS:
            if m.get(key):
                by_id[(fmt, sid, key, m[key])] += 1
        if prev.get(sid) == usage:
            repeats.append((fmt, sid, seq, usage))
        prev[sid] = usage
    assert [k for k, n in by_id.items() if n > 1] == []
    assert sum(by_id.values()) > 300  # Claude Code's message ids and others were there to check
    assert repeats == []
