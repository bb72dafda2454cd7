"""SQLite inputs are read-only, bounded and interruptible (issue 31, "Hangs").

A 4 KiB SQLite file whose ``messages`` "table" is a view over an endless recursive CTE hung
ingest, ignored Ctrl-C and grew SQLite's temp file without bound (the fuzzer's reproducer,
built here). Views, virtual tables and tables with virtual generated columns are never read as
logs; every query runs under a work budget proportional to the file, and a Ctrl-C stops it.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from context_forensics.errors import InputError
from context_forensics.importers import _sqlite
from context_forensics.importers._sqlite import SQLiteBudgetError, open_sqlite_readonly, sqlite_tables
from helpers import parse

ROOT = Path(__file__).resolve().parent.parent
ENDLESS = ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
           "SELECT 'c' AS session_id, i AS seq, 'user' AS role, printf('%.*c', 1000, 'x') AS content FROM r")


def sqlite_file(path: Path, *statements: str) -> Path:
    """An SQLite file made by ``statements``."""
    conn = sqlite3.connect(path)
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()
    return path


def endless_view(path: Path, name: str = "messages") -> Path:
    """The fuzzer's reproducer: a 4 KiB file whose only "table" never ends."""
    return sqlite_file(path, f"CREATE VIEW {name} AS {ENDLESS}")


def _temp_bytes(pid: int, folder: Path) -> int:
    """Bytes of the (unlinked) temp files process ``pid`` holds open in ``folder``."""
    total = 0
    fds = Path(f"/proc/{pid}/fd")
    try:
        entries = list(fds.iterdir())
    except OSError:
        return 0
    for fd in entries:
        try:
            if os.readlink(fd).startswith(str(folder)):
                total += os.stat(fd).st_size
        except OSError:
            continue
    return total


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads a process's open files from /proc")
def test_a_view_over_an_endless_cte_fails_at_once_naming_the_view_and_grows_no_temp_file(tmp_path):
    src = endless_view(tmp_path / "chat.db")
    assert src.stat().st_size <= 4096
    sqltmp = tmp_path / "sqltmp"
    sqltmp.mkdir()
    env = {**os.environ, "SQLITE_TMPDIR": str(sqltmp), "COLUMNS": "100", "NO_COLOR": "1",
           "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "context_forensics", "ingest", str(src), "--db", str(tmp_path / "c.db"), "--json"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    peak = 0
    deadline = time.monotonic() + 60  # a bound on a hang, not a timing: the fix refuses before any row
    while proc.poll() is None and time.monotonic() < deadline:
        peak = max(peak, _temp_bytes(proc.pid, sqltmp))
        time.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
        proc.communicate()
        pytest.fail(f"ingest of the endless view did not return in 60 s (temp file {peak:,} bytes)")
    out, err = proc.communicate()
    assert proc.returncode == 1, err
    assert peak < 1 << 20, f"temp grew to {peak:,} bytes"
    (result,) = json.loads(out)["files"]
    assert result["status"] == "failed"
    assert "'messages' is a view; ctxf reads stored tables only" in result["error"]
    assert "Traceback" not in err


def test_an_explicit_table_option_naming_a_view_is_refused_too(tmp_path):
    src = sqlite_file(tmp_path / "chat.db", f"CREATE VIEW m2 AS {ENDLESS}", "CREATE TABLE notes(x)")
    with pytest.raises(InputError, match="'m2' is a view"):
        parse(src, "sqlite_table", table="m2")


def test_an_agents_sdk_store_made_of_views_is_claimed_and_refused_not_read(tmp_path):
    src = sqlite_file(
        tmp_path / "agents.db",
        "CREATE TABLE agent_sessions(session_id TEXT PRIMARY KEY, created_at, updated_at)",
        "CREATE VIEW agent_messages AS WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
        "SELECT i AS id, 's' AS session_id, '{}' AS message_data, NULL AS created_at FROM r",
    )
    from context_forensics import importers

    assert importers.detect(src).name == "openai_agents_sqlite"  # claimed: its error is the file's
    with pytest.raises(InputError, match="'agent_messages' is a view; .* not read as an Agents SDK session store"):
        parse(src)


def test_an_llm_logs_db_whose_responses_are_a_view_is_refused(tmp_path):
    src = sqlite_file(tmp_path / "logs.db", "CREATE TABLE conversations(id TEXT PRIMARY KEY, name, model)",
                      "CREATE VIEW responses AS SELECT 1 AS id, NULL AS conversation_id")
    with pytest.raises(InputError, match="'responses' is a view; .* an llm logs.db"):
        parse(src)


def test_views_virtual_tables_and_virtual_generated_columns_are_not_tables(tmp_path):
    src = sqlite_file(
        tmp_path / "mixed.db",
        "CREATE TABLE plain(role, content)",
        "CREATE TABLE stored(role, content, n AS (length(content)) STORED)",
        "CREATE TABLE computed(role, x, content AS (printf('%.*c', 1000000, x)) VIRTUAL)",
        "CREATE VIRTUAL TABLE search USING fts5(role, content)",
        "CREATE VIEW v AS SELECT * FROM plain",
    )
    with open_sqlite_readonly(src) as c:
        tables = set(sqlite_tables(c))
        computed = _sqlite.sqlite_computed(c)
    assert {"plain", "stored"} <= tables
    assert not tables & {"computed", "search", "v"}
    assert computed == {"computed": "a table with a virtual generated column 'content'",
                        "search": "a virtual table", "v": "a view"}


def test_a_query_that_computes_without_end_stops_at_the_work_budget(tmp_path):
    src = endless_view(tmp_path / "chat.db")
    conn = open_sqlite_readonly(src)
    try:
        with pytest.raises(SQLiteBudgetError, match="SQLite steps, the budget of a 4,096-byte file"):
            conn.execute("SELECT * FROM messages ORDER BY content").fetchall()
        budget = max(_sqlite.WORK_FLOOR, _sqlite.WORK_PER_BYTE * 4096)
        assert budget < conn.guard.used <= budget + _sqlite.TICK
    finally:
        conn.close()


def test_a_value_larger_than_the_file_cannot_be_computed(tmp_path):
    src = sqlite_file(tmp_path / "small.db", "CREATE TABLE t(x)")
    with open_sqlite_readonly(src) as conn, pytest.raises(sqlite3.DataError, match="too big"):
        conn.execute("SELECT zeroblob(1 << 24)").fetchall()


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="SIGINT goes to the main thread")
def test_ctrl_c_stops_a_running_sqlite_query_as_keyboard_interrupt(tmp_path, monkeypatch):
    monkeypatch.setattr(_sqlite, "WORK_FLOOR", 10**12)  # no budget: only the Ctrl-C can stop it
    # A suite started in the background (``cmd &`` in a script) inherits SIGINT ignored, and Python
    # then installs no KeyboardInterrupt handler: the query ran forever. A terminal's Ctrl-C reaches a
    # ctxf whose handler is Python's own, so that is the one this test runs with.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    src = endless_view(tmp_path / "chat.db")
    conn = open_sqlite_readonly(src)
    started = threading.Event()
    original = conn.guard.tick

    def tick() -> int:
        started.set()
        return original()

    conn.set_progress_handler(tick, _sqlite.TICK)
    timer = threading.Thread(target=lambda: started.wait(30) and os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            conn.execute("SELECT count(*) FROM messages").fetchall()
    finally:
        timer.join()
        conn.close()
        signal.signal(signal.SIGINT, previous)


def test_reading_an_agents_store_costs_steps_linear_in_its_sessions(tmp_path):
    """A query per session scanned the whole table per session (no index on session_id):
    steps grew with sessions x rows. Counted in SQLite steps, not timed."""

    def steps(sessions: int) -> int:
        src = tmp_path / f"a{sessions}.db"
        conn = sqlite3.connect(src)
        conn.execute("CREATE TABLE agent_sessions(session_id TEXT PRIMARY KEY, created_at, updated_at)")
        conn.execute("CREATE TABLE agent_messages(id INTEGER PRIMARY KEY AUTOINCREMENT, session_id, "
                     "message_data TEXT, created_at)")
        item = json.dumps({"role": "user", "content": "hi"})
        conn.executemany("INSERT INTO agent_messages(session_id, message_data) VALUES (?, ?)",
                         [(f"s{i % sessions}", item) for i in range(sessions * 10)])
        conn.commit()
        conn.close()
        used = []
        real = _sqlite._Connection.close

        def close(self):
            used.append(self.guard.used)
            real(self)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_sqlite, "TICK", 100)
            mp.setattr(_sqlite._Connection, "close", close)
            _, read, _ = parse(src, "openai_agents_sqlite")
        assert len(read) == sessions
        return used[-1]

    small, large = steps(300), steps(1200)
    assert large < 6 * small, (small, large)  # 4x the input: ~4x the steps (16x when quadratic)
