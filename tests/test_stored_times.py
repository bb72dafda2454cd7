"""Recorded times are stored in one shape, UTC to the microsecond, so they sort as text across
zones; a time with no zone is never taken as UTC: kept as recorded, counted in the session's
metadata, and `ctxf show` says so (issue 34)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from typer.testing import CliRunner

from context_forensics.cli import app
from context_forensics.records import NAIVE_TIMES_KEY, Message, Session, stored_time
from context_forensics.store.db import Store


@pytest.mark.parametrize("value, stored, naive", [
    ("2026-01-02T03:04:05.123Z", "2026-01-02T03:04:05.123000Z", False),
    ("2026-01-02T03:04:05.123000Z", "2026-01-02T03:04:05.123000Z", False),  # the stored shape: as it is
    ("2026-01-02T03:04:05Z", "2026-01-02T03:04:05.000000Z", False),
    ("2026-01-02T03:04:05.123456+00:00", "2026-01-02T03:04:05.123456Z", False),
    ("2026-01-02T03:04:05-05:00", "2026-01-02T08:04:05.000000Z", False),
    ("2026-01-02T01:04:05.5+05:30", "2026-01-01T19:34:05.500000Z", False),  # the day changes too
    ("2026-01-02 03:04:05Z", "2026-01-02T03:04:05.000000Z", False),
    ("2026-02-08T21:31:25.6296606Z", "2026-02-08T21:31:25.629660Z", False),  # past µs: cut to the µs
    ("1767323045", "2026-01-02T03:04:05.000000Z", False),  # unix seconds
    ("1767323045123", "2026-01-02T03:04:05.123000Z", False),  # milliseconds
    ("1767323045123456", "2026-01-02T03:04:05.123456Z", False),  # microseconds
    ("1767323045.25", "2026-01-02T03:04:05.250000Z", False),
    (1767323045123, "2026-01-02T03:04:05.123000Z", False),
    # no zone: the clock reading kept, in the same shape without the Z, and said to be naive
    ("2026-01-02T03:04:05", "2026-01-02T03:04:05.000000", True),
    ("2026-01-02 03:04:05.123456", "2026-01-02T03:04:05.123456", True),
    # not a time: kept as it is
    ("2026-01-02", "2026-01-02", False),
    ("yesterday", "yesterday", False),
    ("12345678", "12345678", False),
    (None, None, False),
    (True, True, False),
])
def test_stored_time(value, stored, naive):
    assert stored_time(value) == (stored, naive)


def test_the_store_keeps_times_in_one_shape_that_sorts_as_text(tmp_path):
    recorded = ["2026-01-02T03:04:05.900Z", "2026-01-01T23:04:06-05:00", "1767323047", "2026-01-02T03:04:08.5+00:00"]
    msgs = [Message("user" if i % 2 == 0 else "assistant", f"m{i}", timestamp=t) for i, t in enumerate(recorded)]
    with Store.open(tmp_path / "s.db") as store:
        with store.transaction():
            w = store.write_session(Session("x", "test", messages=iter(msgs), started_at="2026-01-02T04:04:05+01:00"),
                                    sid=None, source="a", source_hash="h", parent_id=None)
        back = [m.timestamp for m in store.messages(w.session_id)]
        row = store.session(w.session_id)
    assert back == ["2026-01-02T03:04:05.900000Z", "2026-01-02T04:04:06.000000Z", "2026-01-02T03:04:07.000000Z",
                    "2026-01-02T03:04:08.500000Z"]
    assert sorted(back) == [back[0], back[2], back[3], back[1]]  # as text, in time order across the zones
    assert row["started_at"] == "2026-01-02T03:04:05.000000Z" and NAIVE_TIMES_KEY not in row["metadata"]


def test_times_with_no_zone_are_kept_as_local_counted_and_shown(tmp_path):
    msgs = [Message("user", "hi", timestamp="2025-05-04 17:02:36"), Message("assistant", "hello"),
            Message("user", "more", timestamp="2025-05-04T17:03:00Z")]
    db = tmp_path / "s.db"
    with Store.open(db) as store, store.transaction():
        w = store.write_session(Session("x", "test", messages=iter(msgs), started_at="2025-05-04T17:02:30",
                                        metadata={"kept": 1}), sid=None, source="a", source_hash="h", parent_id=None)
    with sqlite3.connect(db) as c:
        started, metadata = c.execute("SELECT started_at, metadata FROM sessions").fetchone()
        stamps = [r[0] for r in c.execute("SELECT timestamp FROM messages ORDER BY seq")]
    assert started == "2025-05-04T17:02:30.000000"
    assert stamps == ["2025-05-04T17:02:36.000000", None, "2025-05-04T17:03:00.000000Z"]
    assert json.loads(metadata) == {"kept": 1, NAIVE_TIMES_KEY: 2}  # the start and one message
    r = CliRunner().invoke(app, ["show", w.session_id, "--db", str(db)], catch_exceptions=False)
    assert r.exit_code == 0
    assert "local time, zone unknown: 2 of its times were recorded with no zone" in " ".join(r.stdout.split())
