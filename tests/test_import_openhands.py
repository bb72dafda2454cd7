"""OpenHands llm_completions/ importer (one JSON file per LLM call)."""

from __future__ import annotations

from collections import Counter

import pytest

from context_forensics import importers
from context_forensics.errors import InputError
from context_forensics.importers.base import read_head
from context_forensics.records import Usage
from helpers import CORPUS, FIXTURES, corpus, parse

FX = FIXTURES / "openhands"
INSTANCE = FX / "run" / "llm_completions" / "owner__repo-9"


# ------------------------------------------------------------------ fixtures


def test_instance_folder_numeric_order_usage_and_dropped_retry():
    fmt, (s,), ctx = parse(INSTANCE)
    assert fmt == "openhands"
    # notes.json is not a call; the ...1000000009.0.json call is truncated
    assert ctx.skipped == {"non-call file": 1, "unreadable call file": 1}
    assert [m.role for m in s.messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    a1, a2, a3 = (m for m in s.messages if m.role == "assistant")
    # name times 999999990.5 < 999999999.25 < 1000000002.0 < 1000000005.0 (lexically the 1000... sort first)
    assert [a.meta["call_index"] for a in (a1, a2, a3)] == [0, 1, 3]
    assert a1.usage == Usage(prompt_tokens=500, completion_tokens=20)
    assert a2.usage == Usage(prompt_tokens=560, completion_tokens=15, cache_read_tokens=490, cache_creation_tokens=66)
    assert a3.usage == Usage(prompt_tokens=610, completion_tokens=12, cache_read_tokens=556, cache_creation_tokens=50)
    assert a2.text == "" and a2.tool_calls[0].id == "toolu_b"  # assistant message without content
    assert s.messages[3].name == "execute_bash" and s.messages[3].tool_call_id == "toolu_a"
    assert s.messages[0].meta["cache_control"] and s.messages[5].meta["cache_control"]
    # call 2 asked with the same prefix as call 3 but its answer is not in the conversation
    (unattached,) = s.metadata["unattached_calls"]
    assert unattached["call_index"] == 2 and unattached["usage"] == {"prompt_tokens": 600, "completion_tokens": 5}
    assert any("1 of 4 calls" in w for w in ctx.warnings)
    req = a1.meta["request"]
    assert req["model"] == "litellm_proxy/claude-3-5-sonnet-20241022" and req["tools_count"] == 2
    assert req["temperature"] == 0.0 and "extra_headers" not in req
    assert a1.meta["request"]["tools_hash"] == a3.meta["request"]["tools_hash"]
    assert [t["function"]["name"] for t in s.metadata["tools"]] == ["execute_bash", "finish"]
    assert s.metadata["calls"] == 4 and s.metadata["attached_calls"] == 3
    assert s.metadata["cost"] == 0.065
    assert s.started_at == "2001-09-09T01:46:30.600000+00:00"
    # instance id from the folder name; verdict in <run>/output.swebench_eval.logs/instance_<id>.log
    assert (s.task, s.outcome, s.external_id) == ("owner__repo-9", "success", "owner__repo-9")


def test_run_folder_yields_one_session_per_instance_and_flags_condensation():
    _, sessions, ctx = parse(FX / "run")
    assert [s.external_id for s in sessions] == ["owner__repo-10", "owner__repo-9"]
    condensed = sessions[0]
    # the last call's messages (system + summary) are not an extension of the first call's
    assert [m.text for m in condensed.messages] == ["You are OpenHands agent.",
                                                   "Summary of earlier events: listed files.", "Done."]
    assert condensed.messages[-1].usage == Usage(prompt_tokens=300, completion_tokens=9)
    (entry,) = condensed.metadata["unattached_calls"]
    assert entry["call_index"] == 0 and entry["reason"].startswith("messages differ")
    assert condensed.outcome == "unknown"
    assert [p.name for p in importers.get("openhands").sidecars(FX / "run")] == ["instance_owner__repo-9.log"]


def test_single_call_file_and_its_folder():
    call = next((FX / "single" / "llm_completions").glob("*.json"))
    for path in (call, FX / "single", FX / "single" / "llm_completions"):
        fmt, (s,), ctx = parse(path)
        assert fmt == "openhands"
        assert [m.role for m in s.messages] == ["system", "user", "assistant"]
        assert s.messages[-1].usage == Usage(prompt_tokens=1875, completion_tokens=118)
        # eval_instance_owner__repo-11.log one level above llm_completions/
        assert (s.task, s.outcome) == ("owner__repo-11", "failure")
        assert s.metadata["calls"] == 1


def test_folder_without_calls_raises(tmp_path):
    (tmp_path / "llm_completions").mkdir()
    (tmp_path / "llm_completions" / "x.json").write_text('{"a": 1}')
    with pytest.raises(InputError):
        parse(tmp_path, "openhands")


# ------------------------------------------------------------------ corpus


def test_corpus_django_10973():
    folder = corpus("openhands-llm-completions/django__django-10973")
    fmt, (s,), ctx = parse(folder)
    assert fmt == "openhands" and not ctx.warnings and not ctx.skipped
    # 13 calls; the last has 26 messages + its response = 27: system 1, user 2, assistant 13, tool 11
    assert Counter(m.role for m in s.messages) == {"system": 1, "user": 2, "assistant": 13, "tool": 11}
    assistants = [m for m in s.messages if m.role == "assistant"]
    assert [m.meta["call_index"] for m in assistants] == list(range(13))
    # call 9 (…1733343869.391975.json, 18 messages): litellm usage with Anthropic cache fields
    assert s.messages[18].usage == Usage(prompt_tokens=7598, completion_tokens=381, cache_read_tokens=1348,
                                         cache_creation_tokens=6246)
    assert assistants[-1].usage == Usage(prompt_tokens=10237, completion_tokens=312)
    assert assistants[-1].tool_calls[0].name == "finish"
    assert [t["function"]["name"] for t in s.metadata["tools"]] == ["execute_bash", "finish", "str_replace_editor"]
    assert s.model == "litellm_proxy/claude-3-5-sonnet-20241022"
    assert assistants[0].model == "litellm_proxy/anthropic.claude-3-5-sonnet-20241022-v2:0"
    assert (s.task, s.outcome) == ("django__django-10973", "success")
    # the same session from the llm_completions folder itself
    _, (again,), _ = parse(folder / "llm_completions")
    assert [m.hash for m in again.messages] == [m.hash for m in s.messages]
    assert importers.get("openhands").sidecars(folder) == [folder / "eval_instance_django__django-10973.log"]


@pytest.mark.parametrize(("instance", "calls", "n_messages"), [
    # the last call's messages + response; every call attaches (no condensation in v0.15 no-condensation runs)
    ("astropy__astropy-14365", 13, 27),
    ("django__django-11206", 16, 33),
    ("django__django-11276", 22, 45),
])
def test_corpus_pairs_every_call_attaches(instance, calls, n_messages):
    _, (s,), ctx = parse(corpus(f"swebench-pairs/{instance}/openhands-codeact_claude-3-5-sonnet"))
    assert len(s.messages) == n_messages
    assert s.metadata["calls"] == s.metadata["attached_calls"] == calls
    assert sum(1 for m in s.messages if m.usage) == calls
    assert "unattached_calls" not in s.metadata


def test_sniff_claims_only_openhands_paths():
    if not CORPUS.exists():
        pytest.skip("corpus not available")
    imp = importers.get("openhands")
    claims = [p for p in CORPUS.rglob("*") if imp.sniff(p, read_head(p))]
    assert claims
    for p in claims:
        rel = p.relative_to(CORPUS).as_posix()
        assert "llm_completions" in rel or (p / "llm_completions").is_dir(), rel
    files = [p for p in claims if p.is_file()]
    assert len(files) == 13 + 13 + 16 + 22  # every call file, nothing else
    assert all(p.parent.name == "llm_completions" for p in files)


@pytest.mark.parametrize("rel", [
    "openhands-llm-completions/django__django-10973",
    "swebench-pairs/django__django-11206/openhands-codeact_claude-3-5-sonnet",
])
def test_corpus_run_ingested_by_folder_and_by_parent_is_one_session(rel, tmp_path):
    """Issue 9 item 8: the llm_completions/ folder, then its parent, used to give two sessions
    with one content hash (27 + 27 messages for django__django-10973); now one, and the second
    ingest is `unchanged`."""
    from context_forensics.store.db import Store
    from context_forensics.store.ingest import ingest_paths

    run_dir = corpus(rel)
    with Store.open(tmp_path / "s.db") as store:
        (a,) = ingest_paths(store, [run_dir / "llm_completions"]).files
        (b,) = ingest_paths(store, [run_dir]).files
        rows = store.sessions()
    assert (a.status, b.status) == ("ingested", "unchanged")
    assert b.sessions == a.sessions and b.same_as == [{"session": a.sessions[0],
                                                        "source": str((run_dir / "llm_completions").resolve())}]
    assert len(rows) == 1 and rows[0]["message_count"] == a.messages
