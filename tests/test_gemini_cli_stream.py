"""Gemini CLI headless ``--output-format stream-json`` transcripts (``gemini_cli_stream``).

Fixture: fixtures/gemini_cli_stream/ (written from gemini-cli 5411f113's event types, see its
README). Corpus: ../shared/corpus/gemini-cli-stream-json/ (an eval harness's captures, counted by
hand in PROVENANCE.md). Before this importer the 49bdd49a capture was read as ``openai_responses``
(11 of its 174 records) and then left alone.
"""

from __future__ import annotations

import json

import pytest

from context_forensics import importers
from context_forensics.analysis.check import check_session
from context_forensics.importers.base import read_head
from context_forensics.importers.gemini_cli import GeminiCliStream
from context_forensics.store.db import Store
from context_forensics.store.ingest import ingest_paths
from helpers import FIXTURES, corpus, parse_all

F = FIXTURES / "gemini_cli_stream" / "two_runs.jsonl"
IMP = GeminiCliStream()
FIGMA = "gemini-cli-stream-json/metaphi-figma-eval-49bdd49a/transcript.jsonl"
LOGIN = "gemini-cli-stream-json/metaphi-figma-eval-d00f7a9b/transcript.jsonl"


def _claimants(path):
    head = read_head(path)
    return [name for name, imp in importers.registry().items() if imp.sniff(path, head)]


def test_only_this_importer_claims_the_fixture_and_the_corpus_files():
    for p in (F, corpus(FIGMA), corpus(LOGIN)):
        assert _claimants(p) == ["gemini_cli_stream"], p


def test_no_other_fixture_is_claimed():
    others = [p for p in FIXTURES.rglob("*.json*") if p.is_file() and "gemini_cli_stream" not in p.parts]
    assert others and not [p for p in others if IMP.sniff(p, read_head(p))]


def test_a_file_of_two_runs_is_two_sessions_with_every_event_read():
    sessions, ctx = parse_all(IMP, F)
    assert not ctx.skipped and not ctx.warnings
    a, b = sessions
    assert (a.external_id, b.external_id) == ("11111111-2222-4333-8444-555555555555",
                                              "66666666-7777-4888-8999-aaaaaaaaaaaa")
    assert [m.role for m in a.messages] == ["user", "assistant", "tool", "tool", "assistant"]
    first = a.messages[1]
    # the two deltas are one reply; the two tool_use events of that response are its calls
    assert first.text == "I will look at the test and the parser first."
    assert [c.name for c in first.tool_calls] == ["read_file", "run_shell_command"]
    assert json.loads(first.tool_calls[1].arguments) == {"command": "pytest -q tests/test_parser.py"}
    # results paired by id, in order, the error one kept with its error
    assert [m.tool_call_id for m in a.messages[2:4]] == [c.id for c in first.tool_calls]
    assert a.messages[3].meta["status"] == "error" and a.messages[3].text == "1 failed: test_empty_input"
    assert a.messages[2].meta["output_is_display"] is True
    # stats are run totals: no message claims them as its own call's usage
    assert all(m.usage is None for s in sessions for m in s.messages)
    assert a.metadata["stream_stats"]["input_tokens"] == 9000
    assert a.metadata["notices"][0]["message"] == "Loop detected, stopping execution"
    assert a.outcome == "unknown" and a.model == "gemini-2.5-pro"
    assert b.outcome == "failure" and b.metadata["result"]["status"] == "error"
    assert "invalid argument" in b.metadata["result"]["error"]["message"]


def test_the_corpus_capture_of_two_runs_and_an_error_result():
    sessions, ctx = parse_all(IMP, corpus(FIGMA))
    # the harness's own prompt line before each init (no CLI timestamp) belongs to no run
    assert dict(ctx.skipped) == {"line outside a CLI run (before its init or after its result)": 2}
    a, b = sessions
    # 174 lines = 2 harness + 2 init + 2 user + 84 tool_use + 83 tool_result + 1 result
    assert [len(s.messages) for s in sessions] == [1 + 47 + 47, 1 + 37 + 36]
    assert sum(len(m.tool_calls) for s in sessions for m in s.messages) == 84
    assert a.outcome == "failure" and "INVALID_ARGUMENT" in a.metadata["result"]["error"]["message"]
    assert a.metadata["stream_stats"]["input_tokens"] == 2_330_609
    assert a.metadata["stream_stats"]["tool_calls"] == sum(len(m.tool_calls) for m in a.messages) == 47
    assert b.outcome == "unknown" and "stream_stats" not in b.metadata
    assert b.metadata["unanswered_tool_calls"] == ["run_shell_command-1769811265036-49c8eaf751c22"]
    assert a.started_at == "2026-01-30T06:12:28.925Z" and b.external_id == "8491166e-bcfc-4be4-90be-7116d2d1a1d1"


def test_the_corpus_capture_cut_off_before_its_result():
    sessions, ctx = parse_all(IMP, corpus(LOGIN))
    assert dict(ctx.skipped) == {"line outside a CLI run (before its init or after its result)": 1}
    (s,) = sessions
    assert len(s.messages) == 1 + 41 + 40 and s.outcome == "unknown"
    assert s.metadata["ended"].startswith("the stream ends without a result")
    assert len(s.metadata["unanswered_tool_calls"]) == 1


@pytest.fixture()
def store(tmp_path):
    with Store.open(tmp_path / "s.db") as s:
        yield s


def _sid(store, external_id):
    return next(r["id"] for r in store.sessions() if r["external_id"] == external_id)


def test_check_sets_the_run_totals_beside_the_replay(store, tmp_path):
    ingest_paths(store, [F])
    res = check_session(store, _sid(store, "11111111-2222-4333-8444-555555555555"), only=["totals"])
    assert res.found == []  # 2 tool calls both sides; the windows under the 9,000 prompt tokens
    # a stats record claiming a tool call the stream does not show is a finding
    text = F.read_text().replace('"tool_calls":2,', '"tool_calls":3,')
    bad = tmp_path / "bad.jsonl"
    bad.write_text(text)
    with Store.open(tmp_path / "b.db") as s2:
        ingest_paths(s2, [bad])
        found = check_session(s2, _sid(s2, "11111111-2222-4333-8444-555555555555"), only=["totals"]).found
    assert [f.figures["total"] for f in found] == ["tool_calls"]
    assert (found[0].figures["recorded"], found[0].figures["ctxf"]) == (3, 2)


def test_check_finds_windows_beyond_the_prompt_total(store, tmp_path):
    text = F.read_text().replace('"input_tokens":9000,"output_tokens":300,"cached":4000,"input":5000,"duration_ms"',
                                 '"input_tokens":5,"output_tokens":300,"cached":4000,"input":5000,"duration_ms"')
    text = text.replace('"gemini-2.5-pro":{"total_tokens":9300,"input_tokens":9000',
                        '"gemini-2.5-pro":{"total_tokens":9300,"input_tokens":5')
    bad = tmp_path / "bad.jsonl"
    bad.write_text(text)
    ingest_paths(store, [bad])
    found = check_session(store, _sid(store, "11111111-2222-4333-8444-555555555555"), only=["totals"]).found
    assert [f.figures["total"] for f in found] == ["prompt_tokens"] and found[0].figures["at_most"] is True
