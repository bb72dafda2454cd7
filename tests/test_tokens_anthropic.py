"""Anthropic counting: the tool-use prompt per model and tool_choice, tool definitions, turn and
block framing, thinking kept or dropped per model, images and documents, the Claude stand-in;
and the uncalibrated error over the corpus' Claude calls whose log holds the exact request."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from context_forensics.config.models import resolve_model
from context_forensics.importers.anthropic_messages import convert_messages, request_params
from context_forensics.importers.base import ImportContext
from context_forensics.records import Message, ToolCall, Usage
from context_forensics.store.db import Store
from context_forensics.store.ingest import ingest_paths
from context_forensics.tokens import TokenCounter, anthropic_image_tokens
from context_forensics.tokens.claude_standin import OTHER_SCALE, claude_standin
from context_forensics.tokens.fidelity import session_fidelity
from context_forensics.tokens.framing import (
    ANTHROPIC_PER_IMAGE,
    ANTHROPIC_PER_MESSAGE,
    ANTHROPIC_PER_TOOL_RESULT,
    ANTHROPIC_PER_TOOL_USE,
    ANTHROPIC_REPLY_PRIMING,
    anthropic_tool_prompt,
    keeps_thinking,
)
from context_forensics.tokens.tool_schemas import render_anthropic_functions
from helpers import CORPUS, FIXTURES

HERE = FIXTURES / "tokens_anthropic"
WEATHER = {"name": "get_weather", "description": "Get the weather",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def counter(model: str) -> TokenCounter:
    return TokenCounter(resolve_model(model))


@pytest.mark.parametrize("model, choice, tokens", [
    ("claude-haiku-4-5-20251001", None, 496),
    ("claude-haiku-4-5-20251001", {"type": "auto"}, 496),
    ("claude-haiku-4-5-20251001", {"type": "none"}, 496),
    ("claude-sonnet-4-5-20250929", {"type": "any"}, 588),
    ("claude-opus-4-5-20251101", {"type": "tool", "name": "x"}, 588),
    ("claude-opus-4-6", None, 497),
    ("claude-opus-4-1-20250805", None, 313),
    ("claude-sonnet-4-20250514", {"type": "any"}, 315),
    ("claude-3-5-sonnet-20241022", None, 346),
    ("claude-3-5-sonnet-20240620", {"type": "any"}, 261),
    ("claude-3-opus-20240229", None, 530),
    ("claude-3-haiku-20240307", {"type": "any"}, 340),
])
def test_tool_prompt_per_model_and_tool_choice(model, choice, tokens):
    assert anthropic_tool_prompt(model, choice) == (tokens, None)


def test_an_undocumented_model_gets_the_latest_prompt_and_a_flag():
    tokens, flag = anthropic_tool_prompt("claude-nova-9", None)
    assert tokens == 497 and "not documented" in flag


def test_tool_definitions_are_rendered_and_counted():
    line = render_anthropic_functions([{"name": "get_weather", "description": "Get the weather",
                                        "parameters": WEATHER["input_schema"]}])
    assert line == ('<function>{"description": "Get the weather", "name": "get_weather", "parameters": '
                    '{"properties": {"city": {"type": "string"}}, "required": ["city"], "type": "object"}}</function>')
    c = counter("claude-haiku-4-5-20251001")
    bare = c.call_overhead({"model": "claude-haiku-4-5-20251001"})
    with_tools = c.call_overhead({"model": "claude-haiku-4-5-20251001", "tools": [WEATHER]})
    forced = c.call_overhead({"model": "claude-haiku-4-5-20251001", "tools": [WEATHER], "tool_choice": {"type": "any"}})
    assert bare.tokens == ANTHROPIC_REPLY_PRIMING and bare.tools == 0
    assert with_tools.tokens - bare.tokens == 496 + claude_standin().count(line) == with_tools.tools
    assert forced.tokens - with_tools.tokens == 588 - 496
    assert with_tools.n_tools == 1 and not with_tools.flags


def test_anthropic_schema_tools_cost_what_the_docs_say():
    c = counter("claude-sonnet-4-5")
    over = c.call_overhead({"model": "claude-sonnet-4-5", "tools": [{"type": "bash_20250124", "name": "bash"}]})
    assert over.tokens == ANTHROPIC_REPLY_PRIMING + 496 + 245 and not over.flags
    web = c.call_overhead({"model": "claude-sonnet-4-5",
                           "tools": [{"type": "web_search_20250305", "name": "web_search"}]})
    assert any("non-function tool" in f for f in web.flags)
    assert any("server tool web_search_20250305" in f for f in web.flags)


def test_thinking_prompt_when_thinking_is_on():
    c = counter("claude-sonnet-4-5")
    base = c.call_overhead({"model": "claude-sonnet-4-5"}).tokens
    assert c.call_overhead({"thinking": {"type": "enabled", "budget_tokens": 1024}}).tokens - base == 29
    assert c.call_overhead({"thinking": {"type": "adaptive"}}).tokens - base == 17
    assert c.call_overhead({"thinking": {"type": "disabled"}}).tokens == base


@pytest.mark.parametrize("model, kept", [
    ("claude-opus-4-5-20251101", True), ("claude-opus-4-6", True), ("claude-sonnet-4-6", True),
    ("claude-opus-4-1-20250805", False), ("claude-opus-4-20250514", False), ("claude-sonnet-4-5-20250929", False),
    ("claude-haiku-4-5-20251001", False), ("claude-3-7-sonnet-20250219", False),
])
def test_which_models_keep_earlier_thinking(model, kept):
    assert keeps_thinking(model) is kept


def test_earlier_thinking_counts_only_where_the_model_keeps_it():
    thought = "Let me weigh the three options against the budget and the deadline first. " * 5
    reply = Message(role="assistant", text="Option two.", parts=({"type": "thinking", "text": thought},))
    plain = Message(role="assistant", text="Option two.")
    keep, drop = counter("claude-opus-4-5"), counter("claude-sonnet-4-5")
    assert drop.count_messages([reply]).total == drop.count_messages([plain]).total
    assert keep.count_messages([reply]).total == keep.count_messages([plain]).total + claude_standin().count(thought)
    assert keep.scheme != drop.scheme  # the two never share a cached sum
    assert any("thinking" in f for _, f in keep.count_messages([reply]).flags)


def test_kept_thinking_is_sized_by_its_calls_output():
    """The API re-reads the full thinking; the log holds its summary: the call's output tokens
    (less the visible reply), or its recorded thinking tokens, size it."""
    parts = ({"type": "thinking", "text": "Weigh it."},)
    out = Message(role="assistant", text="Done.", parts=parts, usage=Usage(prompt_tokens=900, completion_tokens=500))
    told = Message(role="assistant", text="Done.", parts=parts,
                   usage=Usage(prompt_tokens=900, completion_tokens=500, reasoning_tokens=300))
    keep, drop, sc = counter("claude-opus-4-6"), counter("claude-sonnet-4-5"), claude_standin()
    counts = keep.count_messages([out, told])
    assert counts.tokens.tolist() == [ANTHROPIC_PER_MESSAGE + 500, ANTHROPIC_PER_MESSAGE + sc.count("Done.") + 300]
    assert any("sized from its call's output tokens" in f for _, f in counts.flags)
    assert drop.count_messages([out]).total == ANTHROPIC_PER_MESSAGE + sc.count("Done.")


def test_turns_and_tool_blocks():
    c, sc = counter("claude-sonnet-4-5"), claude_standin()
    user = Message(role="user", text="Two names for a pet pelican, be brief")
    system = Message(role="system", text="You are a scientist")
    call = Message(role="assistant", text="", tool_calls=(ToolCall(name="lookup", arguments='{"q": "x"}', id="t1"),))
    result = Message(role="tool", text="Charles", name="lookup", tool_call_id="t1")
    got = c.count_messages([system, user, call, result]).tokens.tolist()
    assert got == [sc.count(system.text), sc.count(user.text) + ANTHROPIC_PER_MESSAGE,
                   sc.count("lookup") + sc.count('{"q": "x"}') + ANTHROPIC_PER_MESSAGE + ANTHROPIC_PER_TOOL_USE,
                   sc.count("Charles") + ANTHROPIC_PER_TOOL_RESULT]


def test_images_and_documents_are_framed():
    c = counter("claude-sonnet-4-5")
    sized = Message(role="user", text="", parts=({"type": "image", "width": 1000, "height": 1000},))
    unsized = Message(role="user", text="", parts=({"type": "image"},))
    text_doc = Message(role="user", text="", parts=({"type": "document", "source": "text", "text": "Dear reader"},))
    pdf = Message(role="user", text="", parts=({"type": "document", "source": "base64", "media_type": "application/pdf",
                                                "bytes": 40_000},))
    counts = c.count_messages([sized, unsized, text_doc, pdf])
    base = ANTHROPIC_PER_MESSAGE
    assert counts.tokens[0] == base + anthropic_image_tokens(1000, 1000) + ANTHROPIC_PER_IMAGE
    assert counts.tokens[1] == base + 1600 + ANTHROPIC_PER_IMAGE
    assert any(i == 1 and "estimated 1600" in f for i, f in counts.flags)
    assert counts.tokens[2] == base + claude_standin().count("Dear reader")
    assert counts.tokens[3] == base and any(i == 3 and "PDF" in f for i, f in counts.flags)


def test_the_stand_in_weighs_words_and_the_rest():
    sc = claude_standin()
    assert sc.count("Two names for a pet pelican") == 7  # seven plain words
    assert sc.count("x.__dict__[0]") > len("x.__dict__[0]") // 4  # code: every piece weighs OTHER_SCALE
    assert sc.count("__") == round(OTHER_SCALE)
    assert sc.count_batch(["", "a b"]).tolist() == [0, 2]
    assert sc.count("\ud800 lone") >= 2  # a lone surrogate is counted, not an error


def _documented():
    return json.loads((HERE / "count_tokens_examples.json").read_text())["examples"]


@pytest.mark.parametrize("ex", _documented(), ids=lambda e: e["name"])
def test_documented_count_tokens_examples(ex):
    """Anthropic's published count_tokens figures (none of them fitted on): the basic example
    exactly, the tool and thinking ones within the error the module docstring reports."""
    req = ex["request"]
    msgs = convert_messages(req.get("system"), req["messages"], ImportContext(Path("doc")))
    c = counter(ex["model"])
    got = c.count_messages(msgs).total + c.call_overhead({**request_params(req), "model": ex["model"]}).tokens
    tolerance = {"basic": 0, "tools": 0.03, "thinking": 0.06}[ex["name"]]
    assert abs(got - ex["input_tokens"]) <= max(0.5, tolerance * ex["input_tokens"]), (got, ex["input_tokens"])


# --------------------------------------------------------------------------------------------
# the corpus: every Claude call whose log holds the exact request


def _exact_request_calls():
    roots = [CORPUS / "llm-api-vcr-cassette" / "anthropic-messages", CORPUS / "openhands-llm-completions",
             *sorted((CORPUS / "swebench-pairs").glob("*/openhands-codeact_claude-3-5-sonnet"))]
    if not all(r.exists() for r in roots[:2]):
        pytest.skip("corpus not available")
    return roots


def test_uncalibrated_error_on_calls_with_the_exact_request(tmp_path):
    """Targets of issue 15: median |computed - recorded| / recorded <= 5% on calls that sent tools,
    <= 3% on calls that sent none (the Anthropic cassettes and the OpenHands logs)."""
    roots = _exact_request_calls()
    with_tools, without = [], []
    with Store.open(tmp_path / "s.db") as store:
        ingest_paths(store, roots, recursive=True)
        for ses in store.sessions():
            if not ses["usage_count"]:
                continue
            fid = session_fidelity(store, ses["id"])
            if fid.spec.tokenizer != "claude":
                continue
            for st in fid.recorded_steps():
                (with_tools if st.n_tools else without).append(abs(st.error) / st.recorded)
    assert len(with_tools) >= 60 and len(without) >= 2
    assert statistics.median(with_tools) <= 0.05
    assert statistics.median(without) <= 0.03


def test_the_word_mask_is_the_same_on_every_backend():
    """The stand-in's plain-word table is built fast (tiktoken's ranks, quicktok's batch decode);
    each must equal the rule applied id by id to the token's bytes."""
    import re

    import numpy as np

    from context_forensics.tokens.assets import get_encoding
    from context_forensics.tokens.claude_standin import _word_mask

    encs = [get_encoding("o200k_base")]
    try:
        import quicktok

        encs.append(quicktok.get_encoding("o200k_base"))
    except Exception:  # noqa: BLE001 - quicktok is optional
        pass
    word = re.compile(rb" ?[A-Za-z]+")
    ref_enc = encs[0]
    n = ref_enc.max_token_value + 1
    ref = np.zeros(n, dtype=bool)
    for i in range(n):
        try:
            ref[i] = word.fullmatch(ref_enc.decode_single_token_bytes(i)) is not None
        except KeyError:  # an id with no bytes
            pass
    assert 100_000 < ref.sum() < n  # o200k: about half its tokens are plain words
    for enc in encs:
        assert np.array_equal(_word_mask(enc), ref), type(enc).__name__


def test_the_word_mask_is_kept_in_the_cache_folder_checked_by_its_hash(tmp_path, monkeypatch):
    """quicktok's mask is derived once and read back from <cache>/tokens/; a file whose content
    does not match the sha256 in its name is not used (the mask is derived and the file made again)."""
    import numpy as np
    import pytest

    quicktok = pytest.importorskip("quicktok")
    from context_forensics.tokens import claude_standin as cs

    monkeypatch.setenv("CTXF_CACHE_DIR", str(tmp_path))
    enc = quicktok.get_encoding("o200k_base")
    ref = cs._word_mask(enc)
    first = cs.cached_word_mask(enc, True)
    (path,) = (tmp_path / "tokens").glob("word-mask-o200k_base-quicktok-*.npy")
    assert np.array_equal(first, ref)
    derived = []
    monkeypatch.setattr(cs, "_word_mask", lambda e: derived.append(1) or ref.copy())
    assert np.array_equal(cs.cached_word_mask(enc, True), ref) and not derived  # read back, not derived
    bad = bytearray(path.read_bytes())
    bad[-1] ^= 1  # one flipped bit in the mask
    path.write_bytes(bytes(bad))
    assert np.array_equal(cs.cached_word_mask(enc, True), ref) and derived == [1]  # not trusted: derived again
    assert path.read_bytes() != bytes(bad)  # the damaged file was replaced by a good one
    assert np.array_equal(cs.cached_word_mask(enc, True), ref) and derived == [1]  # and read back
