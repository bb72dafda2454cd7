"""A file ctxf reads only in part is status "partial", never a clean "ingested" (issue 32).

Records (the denominator) are the messages stored from a file plus every record its importer
skipped; unread records are those skipped as unreadable (``units.PARTIAL_SKIPS``) or of a kind
the importer does not know (``ctx.skip(..., unknown=True)``). Records the importer knows and sets
aside (progress events, UI-only entries, duplicates) never count against the file.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from context_forensics.store.units import PARTIAL_SHARE, FileResult, mark_partial
from helpers import corpus


def _res(messages: int, skipped: dict[str, int]) -> FileResult:
    return FileResult(path="x", messages=messages, skipped=dict(skipped))


def test_unknown_kinds_past_a_tenth_of_the_records_make_the_file_partial():
    # 9 messages + 1 unknown record: 1 of 10 is exactly the share, not past it
    at = _res(9, {"item frob": 1})
    mark_partial(at, {"item frob": 1})
    assert PARTIAL_SHARE == 0.10 and (at.status, at.partial, at.records,
                                      at.unread) == ("ingested", False, 10, {"item frob": 1})
    past = _res(8, {"item frob": 2})  # 2 of 10
    mark_partial(past, {"item frob": 2})
    assert (past.status, past.partial, past.records) == ("partial", True, 10)


def test_records_set_aside_never_count_and_an_unreadable_record_always_does():
    aside = _res(10, {"progress": 1000})  # known, never sent to the model
    mark_partial(aside, {})
    assert (aside.status, aside.unread, aside.records) == ("ingested", {}, 1010)
    torn = _res(1000, {"truncated line": 1, "progress": 5})  # content lost, whatever its share
    mark_partial(torn, {})
    assert (torn.status, torn.unread) == ("partial", {"truncated line": 1})
    same = FileResult(path="x", status="unchanged", messages=3, skipped={"invalid JSON line": 1})
    mark_partial(same, {})
    assert same.status == "unchanged" and same.partial  # a status other than "ingested" stays


def _ingest(tmp_path, path, *extra):
    r = CliRunner().invoke(app, ["ingest", str(path), "--db", str(tmp_path / "c.db"), *extra])
    assert r.exit_code == 0, r.output
    return r


def _responses_log(tmp_path, unknown: int, messages: int = 2):
    lines = [{"type": "message", "role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"}
             for i in range(messages)]
    lines += [{"type": "frobnicate", "n": i} for i in range(unknown)]
    p = tmp_path / "run.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return p


def test_a_partial_file_is_partial_in_the_json_the_table_and_the_summary(tmp_path):
    log = _responses_log(tmp_path, unknown=3)
    data = json.loads(_ingest(tmp_path, log, "--format", "openai_responses", "--json").stdout)
    f = data["files"][0]
    assert (f["status"], f["partial"], f["records"], f["unread"]) == ("partial", True, 5, {"item frobnicate": 3})
    assert f["skipped"] == {"item frobnicate": 3} and f["messages"] == 2
    t = data["totals"]
    assert (t["ingested"], t["partial"], t["sessions"], t["messages"], t["unread_records"]) == (0, 1, 1, 2, 3)
    (tmp_path / "c.db").unlink()
    out = " ".join(_ingest(tmp_path, log, "--format", "openai_responses").stdout.split())
    assert "0 ingested, 1 partial" in out and " partial " in out  # the table row and the summary line
    assert "3 of 5 records not read (item frobnicate ×3); 2 message(s) stored from the rest" in out
    assert " ingested · " not in out and "openai_responses · ingested" not in out


def test_one_unknown_record_in_many_is_listed_but_the_file_is_whole(tmp_path):
    log = _responses_log(tmp_path, unknown=1, messages=20)
    f = json.loads(_ingest(tmp_path, log, "--format", "openai_responses", "--json").stdout)["files"][0]
    assert (f["status"], f["partial"], f["records"], f["unread"]) == ("ingested", False, 21, {"item frobnicate": 1})


def test_a_gemini_stream_json_transcript_forced_through_openai_responses_is_partial(tmp_path):
    # the misread: 11 of 149 records kept, status "ingested"
    log = corpus("gemini-cli-stream-json/metaphi-figma-eval-49bdd49a/transcript.jsonl")
    f = json.loads(_ingest(tmp_path, log, "--format", "openai_responses", "--json").stdout)["files"][0]
    assert f["status"] == "partial" and sum(f["unread"].values()) > 0.9 * f["records"], f["unread"]
    assert {"item tool_use", "item tool_result"} <= f["unread"].keys()


@pytest.mark.parametrize("rel", ["claude-code-jsonl/spotter/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
                                 "codex-rollout-jsonl/acidicsoil/rollout-2025-11-17T15-30-28-019a93b9-f380-7600-98ff-940e6b99603c.jsonl"])
def test_records_the_importer_sets_aside_leave_a_file_whole(tmp_path, rel):
    # 1,134 progress/snapshot records beside 324 messages; Codex: 122 duplicates and turn contexts
    f = json.loads(_ingest(tmp_path, corpus(rel), "--json").stdout)["files"][0]
    assert f["status"] == "ingested" and f["unread"] == {} and sum(f["skipped"].values()) > f["messages"] / 2
