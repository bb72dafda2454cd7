"""Who may read and write the store: a read-only store works for every reading command without
caching (and says so once), refuses writes with a clear error; the store's folder and files,
and the report, are private (0700 / 0600) whatever the umask.

The tests run as root in CI, and root passes every permission check: a read-only store is made
with ``chmod 0444`` and, for root, also simulated at the one place ctxf asks (``os.access``);
from there on everything is real (SQLite's ``mode=ro``, its refusals, the fallbacks).
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path

import pytest
import sqlite_utils
from typer.testing import CliRunner

from context_forensics import environ
from context_forensics.analysis.replay.engine import replay_session
from context_forensics.cli import app
from context_forensics.store import base, connection
from context_forensics.store.db import Store
from context_forensics.store.files import write_private_text
from context_forensics.store.ingest import ingest_paths
from helpers import unprivileged
from store_checks import file_bytes, write_sharegpt

SAMPLES = Path(__file__).parent.parent / "sample_logs"
FIXTURES = Path(__file__).parent / "fixtures"
OVERFLOW = SAMPLES / "agent-overflow" / "shopcart-tiered-discounts.openai.json"
PAIR = SAMPLES / "pair-csv-bom"
NOTE = "the store is read-only: working without caching"
CACHES = ("replays", "token_counts", "embeddings")


@pytest.fixture(autouse=True)
def _fresh_process(monkeypatch):
    monkeypatch.setattr(environ, "_HANDED", {})  # the notes said (connection.notice_once)
    monkeypatch.setattr(base, "_cache_skipped_until", {})


def _as_a_new_process() -> None:
    """What the next command starts with, as a process of its own (see the fixture above)."""
    environ._HANDED.clear()
    base._cache_skipped_until.clear()


def _cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def _cache_rows(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        return sum(c.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in CACHES)


def make_read_only(db: Path, monkeypatch) -> None:
    """``chmod 0444`` the store; for root (who may write it anyway), ``os.access`` says what it
    says to anyone else."""
    db.chmod(0o444)
    if os.geteuid() != 0:
        return
    real = os.access

    def access(path, mode, *args, **kwargs):
        if mode & os.W_OK and Path(path).resolve() == db.resolve():
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(connection.os, "access", access)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The samples ingested into two stores: one to make read-only, one that stays writable."""
    out = []
    for name in ("ro", "rw"):
        db = tmp_path_factory.mktemp(name) / "s.db"
        with Store.open(db) as store:
            assert ingest_paths(store, [SAMPLES], recursive=True).exit_code == 0
            ids = {Path(s["source"]).relative_to(SAMPLES.resolve()).as_posix(): s["id"] for s in store.sessions()}
        out.append(db)
    assert _cache_rows(out[0]) == 0
    return out[0], out[1], ids


def _commands(ids: dict[str, str], out: Path) -> dict[str, list]:
    overflow = ids["agent-overflow/shopcart-tiered-discounts.openai.json"]
    chat = ids["drift-chat/cover-letter-drift.sharegpt.json"]  # short: few texts to embed
    good = ids["pair-csv-bom/success/acme__csvtool-42.traj.json"]
    bad = ids["pair-csv-bom/failure/acme__csvtool-42.traj.json"]
    return {
        "sessions": ["sessions", "--json"],
        "show": ["show", overflow, "--json"],
        "replay": ["replay", overflow, "--json"],
        "replay what-if": ["replay", overflow, "--model", "gpt-4o-mini", "--json"],
        "facts": ["facts", "show", chat, "--fact", "the letter is for a data analyst role", "--json"],
        "drift": ["drift", chat, "--json"],
        "diverge": ["diverge", good, bad, "--json"],
        "audit": ["audit", "--config", FIXTURES / "audit" / "small_window.yaml", "--json"],
        "report": ["report", chat, "--html", out],
    }


def _results(stdout: str) -> object:
    """A command's --json without the cache's own figures (hits, rows written, seconds), which
    are what a read-only store changes, and the audit's measured timing, which two runs never share."""
    def strip(o: object) -> object:
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k != "timing" and (
                k not in ("embed_stats", "embedding") or k == "embedding" and isinstance(v, dict) and "hits" not in v)}
        if isinstance(o, list):
            return [strip(v) for v in o]
        return o
    return strip(json.loads(stdout)) if stdout.strip() else stdout


def test_every_reading_command_works_on_a_read_only_store_without_caching(stores, tmp_path, monkeypatch):
    ro, rw, ids = stores
    make_read_only(ro, monkeypatch)
    before = file_bytes(ro)
    for name, args in _commands(ids, tmp_path / "ro.html").items():
        r = _cli(*args, "--db", ro)
        assert r.exit_code in (0, 3), (name, r.stderr)  # 3: the audit's rules found something
        assert r.stderr.count(NOTE) == 1, (name, r.stderr)
        _as_a_new_process()
        w = _cli(*[tmp_path / "rw.html" if a == tmp_path / "ro.html" else a for a in args], "--db", rw)
        assert w.exit_code == r.exit_code and NOTE not in w.stderr, (name, w.stderr)
        if name != "report":
            assert _results(r.stdout.replace(str(ro), str(rw))) == _results(w.stdout), name  # the same results
    assert file_bytes(ro) == before and _cache_rows(ro) == 0
    assert _cache_rows(rw) > 0  # the writable store cached: the read-only one would have
    assert stat.S_IMODE((tmp_path / "ro.html").stat().st_mode) == 0o600


def test_writing_commands_on_a_read_only_store_are_clear_errors(stores, tmp_path, monkeypatch):
    ro, _, ids = stores
    make_read_only(ro, monkeypatch)
    before = file_bytes(ro)
    new = tmp_path / "new.json"
    write_sharegpt(new, n_sessions=1, seed=3)
    for args in (["ingest", new], ["rm", next(iter(ids.values()))], ["replay", new]):
        r = _cli(*args, "--db", ro)
        assert r.exit_code == 1, (args, r.stderr)
        assert "read-only" in r.stderr and str(ro) in r.stderr, (args, r.stderr)
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    assert file_bytes(ro) == before


def test_a_store_on_a_read_only_connection_replays_without_caching(tmp_path):
    """A store whose connection SQLite opened read-only (``mode=ro``) though ctxf did not ask:
    the replay cache's write is refused, the replay returned all the same, said once."""
    db = tmp_path / "s.db"
    with Store.open(db) as store:
        sid = ingest_paths(store, [OVERFLOW]).files[0].sessions[0]
        expected = replay_session(store, sid, use_cache=False).to_dict()
    before = file_bytes(db), _cache_rows(db)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    notes: list[str] = []
    ro = Store(sqlite_utils.Database(conn), db, notice=notes.append)
    assert replay_session(ro, sid).to_dict() == expected
    assert replay_session(ro, sid, model="gpt-4o-mini").steps
    assert ro.read_only and len(notes) == 1 and "read-only" in notes[0]
    conn.close()
    assert (file_bytes(db), _cache_rows(db)) == before


def test_opening_read_only_asks_sqlite_for_mode_ro(tmp_path):
    db = tmp_path / "s.db"
    Store.open(db).close()
    notes: list[str] = []
    with Store.open(db, read_only=True, notice=notes.append) as store:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store.db.execute("INSERT INTO files (hash) VALUES ('x')")
        assert store.write_rows("INSERT INTO token_counts VALUES (?, ?, ?)", [("h", "t", 1)]) is False
        assert store.replay_save("k", "s", "m", "p", {}) is False
    assert len(notes) == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder anyway")
def test_a_store_in_a_read_only_folder_is_read(tmp_path):
    folder = tmp_path / "ro"
    db = folder / "s.db"
    with Store.open(db) as store:
        ingest_paths(store, [OVERFLOW])
    folder.chmod(0o555)
    try:
        with Store.open(db, notice=lambda _: None) as store:
            assert store.read_only and len(store.sessions()) == 1
    finally:
        folder.chmod(0o755)


# ---------------------------------------------------------------- private modes


@pytest.fixture()
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o000], indirect=True)
def test_the_store_folder_and_files_are_private_whatever_the_umask(tmp_path, umask):
    tmp_path.chmod(0o755)
    folder = tmp_path / "data" / "ctxf"
    db = folder / "sessions.db"
    write_sharegpt(tmp_path / "c.json", n_sessions=2, seed=1)
    with Store.open(db) as store:
        ingest_paths(store, [tmp_path / "c.json"])
        files = sorted(p.name for p in folder.iterdir())
        assert files == ["sessions.db", "sessions.db-shm", "sessions.db-wal"]
        assert {f: _mode(folder / f) for f in files} == dict.fromkeys(files, 0o600)
    assert _mode(folder) == _mode(folder.parent) == 0o700
    assert _mode(tmp_path) == 0o755  # a folder that existed keeps its mode


@pytest.mark.parametrize("umask", [0o022, 0o000], indirect=True)
def test_a_report_is_written_private_whole_and_through_a_link(tmp_path, umask):
    out = tmp_path / "reports" / "r.html"
    write_private_text(out, "<p>one</p>")
    assert out.read_text() == "<p>one</p>" and _mode(out) == 0o600 and _mode(out.parent) == 0o700
    out.chmod(0o644)
    write_private_text(out, "<p>two</p>")  # an existing wider file is replaced by a private one
    assert out.read_text() == "<p>two</p>" and _mode(out) == 0o600
    link = tmp_path / "link.html"
    link.symlink_to(out)
    write_private_text(link, "<p>three</p>")
    assert link.is_symlink() and out.read_text() == "<p>three</p>" and _mode(out) == 0o600
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.html"]  # no temporary file left
    with pytest.raises(IsADirectoryError):
        write_private_text(tmp_path, "x")


@pytest.mark.parametrize("umask", [0o000], indirect=True)
def test_ctxf_report_writes_its_html_private(tmp_path, umask):
    out = tmp_path / "out" / "r.html"
    r = _cli("report", OVERFLOW, "--html", out, "--db", tmp_path / "s.db")
    assert r.exit_code == 0, r.stderr
    assert _mode(out) == 0o600 and out.read_text().startswith("<!DOCTYPE html>")
    bad = _cli("report", OVERFLOW, "--html", tmp_path, "--db", tmp_path / "s.db")
    # A folder as --html is a usage error found before any work (issue 13), not exit 1 after it.
    assert bad.exit_code == 2 and "is a folder, not a file" in bad.stderr and "internal error" not in bad.stderr


def test_an_existing_store_keeps_its_mode(tmp_path):
    db = tmp_path / "s.db"
    Store.open(db).close()
    db.chmod(0o640)
    Store.open(db).close()
    assert _mode(db) == 0o640  # the owner chose it (a shared store): ctxf does not tighten it


def test_a_note_is_said_once_per_run_even_by_the_workers_it_spawns():
    from context_forensics.executors import ProcessExecutor

    before = dict(os.environ)
    said: list[str] = []
    for key in ("read-only:/a", "busy-cache:/a", "read-only:/a", "read-only:/b", "busy-cache:/a"):
        connection.notice_once(said.append, key, key)
    assert said == ["read-only:/a", "busy-cache:/a", "read-only:/b"]
    import executor_jobs

    with ProcessExecutor(1) as ex:
        [out] = list(ex.run(executor_jobs.say_notes, [["read-only:/a", "read-only:/c", "read-only:/c"]]))
    assert out.error is None, out.error
    assert out.value == ["read-only:/c"]  # what the parent said is not said again
    assert dict(os.environ) == before  # handed to the worker, not through the host's environment


@pytest.mark.parametrize("umask", [0o022], indirect=True)
def test_every_file_a_command_writes_is_private_and_its_new_folders_too(tmp_path, umask, hashing):
    """issue 31: audit --junit/--markdown were 0644 and --plot images 0644 in a 0755 folder. Each
    writing command, under the usual umask, into folders that do not exist yet."""
    db, out = tmp_path / "s.db", tmp_path / "out"
    chat = SAMPLES / "drift-chat" / "cover-letter-drift.sharegpt.json"
    runs = [
        ["ingest", SAMPLES, "--recursive"],
        ["audit", SAMPLES / "agent-overflow", "--junit", out / "audit" / "a.xml", "--markdown", out / "audit" / "a.md",
         "--jsonl", out / "audit" / "a.jsonl"],
        ["replay", OVERFLOW, "-m", "gpt-4o-mini", "--plot", out / "plots" / "u.png"],
        ["replay", OVERFLOW, "--plot", out / "plots" / "u.svg"],
        ["facts", OVERFLOW, "--fact", "Do not touch the tests.", "--plot", out / "plots" / "f.png"],
        ["drift", chat, "--plot", out / "plots" / "d.pdf"],
        ["report", OVERFLOW, "--html", out / "html" / "r.html"],
        ["view", OVERFLOW, "-o", out / "html" / "v.html"],
    ]
    for args in runs:
        r = _cli(*args, "--db", db)
        assert r.exit_code in (0, 3), (args, r.stderr)  # 3: the audit's rules found something
    files = {p.relative_to(tmp_path).as_posix(): _mode(p) for p in [db, *out.rglob("*")] if p.is_file()}
    assert set(files) == {"s.db", "out/audit/a.xml", "out/audit/a.md", "out/audit/a.jsonl", "out/plots/u.png",
                          "out/plots/u.svg", "out/plots/f.png", "out/plots/d.pdf", "out/html/r.html",
                          "out/html/v.html"}
    assert files == dict.fromkeys(files, 0o600)
    heads = {n: (out / "plots" / n).read_bytes()[:5] for n in ("u.png", "f.png", "d.pdf", "u.svg")}
    assert heads == {"u.png": b"\x89PNG\r", "f.png": b"\x89PNG\r", "d.pdf": b"%PDF-", "u.svg": b"<?xml"}
    folders = {p.relative_to(tmp_path).as_posix(): _mode(p) for p in [out, *out.rglob("*")] if p.is_dir()}
    assert folders == dict.fromkeys(["out", "out/audit", "out/plots", "out/html"], 0o700)


# ---------------------------------------------------------------- as a user who is not root (issue 31)
#
# Root passes every permission check, so the tests above simulate a read-only store at the one
# place ctxf asks (os.access); SQLite itself, as a user, answered differently (a read-only folder
# is SQLITE_READONLY_DIRECTORY, not CANTOPEN) and every command failed with "attempt to write a
# readonly database". Here ctxf runs as a user would: as that user when the tests are not root,
# and as root without the capabilities that override file permissions when they are
# (``helpers.unprivileged``).


def _ctxf_as_user(*args):
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent), "COLUMNS": "80"}
    return subprocess.run([*unprivileged(), sys.executable, "-m", "context_forensics", *map(str, args)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=Path(__file__).parent)


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _reading_commands(out: Path) -> list[list]:
    return [["sessions"], ["show", OVERFLOW], ["replay", OVERFLOW], ["replay", OVERFLOW, "-m", "gpt-4o-mini"],
            ["replay", OVERFLOW, "--at", "7"], ["view", OVERFLOW, "-o", out]]


@pytest.mark.parametrize("case", ["read-only folder", "0444 store"])
def test_as_a_user_every_reading_command_reads_a_store_it_cannot_write_and_changes_nothing(tmp_path, case):
    folder = tmp_path / "store"
    db = folder / "s.db"
    assert _ctxf_as_user("ingest", SAMPLES, "--recursive", "--db", db).returncode == 0  # as the command would
    if case == "0444 store":
        db.chmod(0o444)
    else:
        folder.chmod(0o555)
    new = tmp_path / "new.json"
    write_sharegpt(new, n_sessions=1, seed=3)
    before = _listing(folder)
    try:
        for args in _reading_commands(tmp_path / "v.html"):
            r = _ctxf_as_user(*args, "--db", db)
            assert r.returncode == 0, (args, r.stderr)
            assert r.stderr.count(NOTE) == 1 and "readonly database" not in r.stderr, (args, r.stderr)
        w = _ctxf_as_user("ingest", new, "--db", db)
        assert w.returncode == 1 and "read-only" in w.stderr and "internal error" not in w.stderr, w.stderr
        assert _listing(folder) == before  # no byte changed, and no -wal or -shm file left beside it
    finally:
        folder.chmod(0o755)
        db.chmod(0o600)
    # the owner, given write access back, writes to it as before
    r = _ctxf_as_user("ingest", new, "--db", db, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["totals"]["ingested"] == 1, r.stderr


def test_as_a_user_an_unreadable_folder_in_a_walk_is_one_listed_error_and_the_rest_is_read(tmp_path):
    import shutil

    logs = tmp_path / "logs"
    for sub in ("a", "locked/inner", "z"):
        (logs / sub).mkdir(parents=True)
    shutil.copy(OVERFLOW, logs / "a" / "one.json")
    shutil.copy(OVERFLOW, logs / "locked" / "inner" / "two.json")
    shutil.copy(SAMPLES / "drift-chat" / "cover-letter-drift.sharegpt.json", logs / "z" / "three.json")
    (logs / "locked").chmod(0)
    try:
        r = _ctxf_as_user("ingest", logs, "--recursive", "--db", tmp_path / "s.db", "--json")
        only_listed = _ctxf_as_user("ingest", logs / "locked", "--recursive", "--db", tmp_path / "s2.db", "--json")
    finally:
        (logs / "locked").chmod(0o755)
    assert r.returncode == 1 and "internal error" not in r.stderr, r.stderr
    status = {Path(f["path"]).relative_to(logs).as_posix(): f["status"] for f in json.loads(r.stdout)["files"]}
    assert status == {"a/one.json": "ingested", "locked": "failed", "z/three.json": "ingested"}
    assert "cannot list this folder" in r.stderr
    assert only_listed.returncode == 1 and "internal error" not in only_listed.stderr, only_listed.stderr
