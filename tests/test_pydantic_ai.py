"""Pydantic AI message histories (format ``pydantic_ai``): ``ModelMessagesTypeAdapter.dump_json`` of
``all_messages()`` as one session, each response's recorded usage on its assistant message
(``input_tokens`` already holds the cached tokens), tool calls paired with their returns, retries
as the model is shown them, a bad item costing only itself, and no other importer's file claimed.

The generated fixtures under fixtures/pydantic_ai/ were written by scripts/make_pydantic_ai_fixtures.py
with TestModel / FunctionModel (README there: versions; the usage figures are the models' canned
ones); legacy_retry_prompt.json is hand-written in the older shape. The last test regenerates the
files when the ``fixtures`` extra is installed.
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
from context_forensics.importers import detect, get, registry
from context_forensics.importers.base import read_head
from context_forensics.store.db import Store
from context_forensics.store.ingest import ingest_paths
from context_forensics.tokens.fidelity import session_fidelity
from helpers import CORPUS, FIXTURES, parse_all

F = FIXTURES / "pydantic_ai"
GENERATED = ("test_model_run.json", "continued.json", "function_model.json")
LEGACY = F / "legacy_retry_prompt.json"
IMP = get("pydantic_ai")
ROOT = Path(__file__).resolve().parent.parent


def parse(path: Path):
    return parse_all(IMP, path)


def dumped(path: Path) -> list[dict]:
    return json.loads(path.read_text("utf-8"))


def test_the_fixtures_are_this_format_and_no_other_fixture_or_corpus_file_is():
    for name in (*GENERATED, LEGACY.name):
        assert detect(F / name).name == IMP.name, name
        # no other importer's sniff takes them either (the generic JSON ones come later anyway)
        assert [n for n, i in registry().items() if i.sniff(F / name, read_head(F / name))] == [IMP.name]
    others = [p for p in FIXTURES.rglob("*") if p.is_file() and p.parent != F]
    if CORPUS.exists():
        others += [p for p in CORPUS.rglob("*") if p.is_file()]
    assert [p for p in others if IMP.sniff(p, read_head(p))] == []


@pytest.mark.parametrize("name", GENERATED)
def test_each_response_is_one_assistant_message_with_its_recorded_usage(name):
    (s,), ctx = parse(F / name)
    assert ctx.warnings == [] and not ctx.skipped
    doc = dumped(F / name)
    responses = [d for d in doc if d["kind"] == "response"]
    assistants = [m for m in s.messages if m.role == "assistant"]
    assert len(assistants) == len(responses) == s.metadata["model_calls"]
    for m, r in zip(assistants, responses):
        assert m.usage.prompt_tokens == r["usage"]["input_tokens"]  # cached tokens are inside it already
        assert m.usage.completion_tokens == r["usage"]["output_tokens"]
        assert (m.usage.cache_read_tokens or 0) == r["usage"]["cache_read_tokens"]
        assert m.model == r["model_name"] and m.timestamp == r["timestamp"]
    assert s.metadata["agent"] == "pydantic-ai" and s.format == "pydantic_ai"
    assert s.external_id == doc[0]["conversation_id"] and s.metadata["runs"] == list(
        dict.fromkeys(d["run_id"] for d in doc))


@pytest.mark.parametrize("name", GENERATED)
def test_every_tool_message_answers_a_call_of_the_reply_before_it(name):
    (s,), _ = parse(F / name)
    calls: dict[str, str] = {}
    for m in s.messages:
        for c in m.tool_calls:
            calls[c.id] = c.name
        if m.role == "tool":
            assert calls.get(m.tool_call_id) == m.name


def test_a_run_is_instructions_system_prompt_user_then_the_tool_loop():
    (s,), _ = parse(F / "test_model_run.json")
    assert [(m.role, m.text) for m in s.messages[:3]] == [
        ("system", "Answer weather questions in one sentence."), ("system", "You are a weather assistant."),
        ("user", "What is the weather in London?")]
    assert s.messages[0].meta == {"source": "instructions"}
    assert [m.role for m in s.messages[3:]] == ["assistant", "tool", "assistant"]
    assert s.messages[3].tool_calls[0].arguments == '{"city": "a"}' and s.messages[4].text == "Sunny in a, 21 C"


def test_a_continued_run_holds_the_first_run_then_the_new_turn():
    (first,), _ = parse(F / "test_model_run.json")
    (both,), _ = parse(F / "continued.json")
    n = len(first.messages)
    assert [m.hash for m in both.messages[:n]] == [m.hash for m in first.messages]
    # the same instructions are not repeated for the second run
    assert [(m.role, m.text) for m in both.messages[n:]][0] == ("user", "And tomorrow?")
    assert len(both.metadata["runs"]) == 2


def test_retried_calls_reach_the_model_as_errors_and_thinking_is_kept():
    (s,), _ = parse(F / "function_model.json")
    tools = [m for m in s.messages if m.role == "tool"]
    assert [m.meta.get("outcome") for m in tools] == ["retried", "retried", None]
    assert json.loads(tools[0].text)["error"][0]["loc"] == ["city"]
    assert json.loads(tools[1].text) == {"error": "city must be capitalised, got 'paris'"}
    assert tools[2].text == "Sunny in Paris, 21 C"
    first = next(m for m in s.messages if m.role == "assistant")
    assert first.parts == ({"type": "thinking", "text": "The user wants the weather; call get_weather."},)
    assert [m.usage.prompt_tokens for m in s.messages if m.role == "assistant"] == [120, 160, 200, 240]


def test_legacy_retry_prompts_and_usage_names():
    (s,), ctx = parse(LEGACY)
    assert ctx.warnings == []
    assert [m.role for m in s.messages] == ["system", "user", "assistant", "tool", "assistant", "tool",
                                            "assistant", "user", "assistant"]
    retry = s.messages[3]
    assert retry.tool_call_id == "call_0" and retry.name == "get_weather" and retry.meta["is_error"]
    assert retry.text.startswith("1 validation error:\n```json\n") and retry.text.endswith(
        "Fix the errors and try again.")
    assert s.messages[7].text == "Validation feedback:\nPlease include the temperature\n\nFix the errors and try again."
    assert [m.usage.prompt_tokens for m in s.messages if m.role == "assistant"] == [50, 110, 130, 160]
    assert [m.usage.completion_tokens for m in s.messages if m.role == "assistant"] == [8, 9, 3, 6]
    assert s.external_id == "legacy_retry_prompt"  # no conversation id in older dumps: the file names it


def test_a_bad_item_costs_only_itself_and_nothing_readable_fails_naming_the_file(tmp_path):
    doc = dumped(F / "test_model_run.json")
    doc.insert(2, {"kind": "response", "parts": "not a list"})
    doc.insert(3, [1, 2])
    doc[4]["parts"][0]["content"] = {"nested": True}  # a tool return of structured content
    path = tmp_path / "h.json"
    path.write_text(json.dumps(doc))
    (s,), ctx = parse(path)
    assert ctx.skipped["malformed item"] == 2 and len(ctx.warnings) == 2
    assert [m.role for m in s.messages].count("assistant") == 2
    assert '{"nested":true}' in [m.text for m in s.messages if m.role == "tool"]
    junk = tmp_path / "junk.json"
    junk.write_text(json.dumps([{"kind": "other", "parts": []}]))
    with pytest.raises(InputError) as e:
        parse(junk)
    assert str(junk) in str(e.value.where)


def test_unmeasured_usage_is_not_recorded(tmp_path):
    doc = dumped(F / "test_model_run.json")
    doc[1]["usage"]["unmeasured_requests"] = 1
    path = tmp_path / "h.json"
    path.write_text(json.dumps(doc))
    (s,), _ = parse(path)
    assert [m.usage is None for m in s.messages if m.role == "assistant"] == [True, False]


def test_fidelity_reads_the_recorded_prompt_of_each_call(tmp_path):
    with Store.open(tmp_path / "s.db") as store:
        ingest_paths(store, [F / "function_model.json"])
        (ses,) = store.sessions()
        steps = session_fidelity(store, ses["id"]).recorded_steps()
        assert [st.recorded for st in steps] == [120, 160, 200, 240]


def test_cli_ingest_replay_and_sessions_by_agent(tmp_path):
    db = str(tmp_path / "s.db")
    r = CliRunner().invoke(app, ["ingest", str(F / "continued.json"), str(LEGACY), "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["sessions", "--agent", "pydantic-ai", "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["sessions"]
    assert len(rows) == 2
    sid = next(x["id"] for x in rows if x["external_id"] == "legacy_retry_prompt")
    r = CliRunner().invoke(app, ["replay", sid, "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    (rep,) = json.loads(r.stdout)["replays"]
    # one step per response; the retry prompts are context, no steps
    assert [st["message_seq"] for st in rep["steps"]] == [2, 4, 6, 8]


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _stable(value):
    """A dump without what changes on every run: timestamps and run / conversation ids."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in ("timestamp", "run_id", "conversation_id")}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


@pytest.mark.skipif(not _importable("pydantic_ai"), reason="the fixtures extra (pydantic-ai-slim) is not installed")
def test_the_generator_writes_the_committed_histories(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_pydantic_ai_fixtures.py"), str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    for name in GENERATED:
        assert _stable(dumped(tmp_path / name)) == _stable(dumped(F / name)), name


def test_a_user_prompt_of_text_and_images_keeps_the_images_as_placeholders(tmp_path):
    doc = dumped(F / "test_model_run.json")
    doc[0]["parts"][1]["content"] = ["What is in this picture?", {"url": "https://example.com/cat.png",
                                                                  "kind": "image-url"},
                                     {"data": "iVBORw0KGgo=", "media_type": "image/png", "kind": "binary"}]
    path = tmp_path / "h.json"
    path.write_text(json.dumps(doc))
    (s,), _ = parse(path)
    user = next(m for m in s.messages if m.role == "user")
    assert user.text == "What is in this picture?"
    assert [p["type"] for p in user.parts] == ["image", "image"]


def test_a_first_prompt_longer_than_the_head_is_still_recognised(tmp_path):
    doc = dumped(F / "test_model_run.json")
    doc[0]["parts"][0]["content"] = "You are a weather assistant. " * 5000  # 145 KB before the first part_kind
    path = tmp_path / "long.json"
    path.write_text(json.dumps(doc, indent=2))
    assert b'"part_kind"' not in read_head(path)
    assert detect(path).name == IMP.name
    (s,), _ = parse(path)
    assert len(s.messages[1].text) == 145000
