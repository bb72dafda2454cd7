"""One store wherever the user stands (issue 34): which store a command uses, and why.

--db, else $CTXF_DB, else storage.path in the config file, else ./forensics_data/sessions.db
when the working folder holds one (used, and said), else the user-level store in platformdirs'
user data folder. `ctxf config show` says which store and why. Each test has its own HOME and
user data folder (conftest.py keeps every test out of the real user's).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context_forensics import environ
from context_forensics.cli import app
from context_forensics.config.location import WORKING_STORE, store_location, user_cache_dir, user_store
from context_forensics.config.settings import load_config
from context_forensics.tokens.assets import cache_dir

ROOT = Path(__file__).parent.parent
LOG = ROOT / "sample_logs" / "drift-chat" / "cover-letter-drift.sharegpt.json"


@pytest.fixture()
def home(tmp_path, monkeypatch):
    """A fresh HOME with no XDG data folder set (platformdirs' default, ~/.local/share), a fresh
    working folder, no config file and no note said yet."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv("CTXF_CONFIG", raising=False)
    monkeypatch.delenv("CTXF_DB", raising=False)
    monkeypatch.setattr(environ, "_HANDED", {})
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return home


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def shown(*args) -> dict:
    r = run("config", "show", "--json", *args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["store"]


def test_the_order(home, tmp_path, monkeypatch):
    user = home / ".local" / "share" / "ctxf" / "sessions.db"
    assert user_store() == user
    cfg = load_config()
    assert cfg.storage.path is None
    assert store_location(cfg).path == str(user)
    assert store_location(cfg).origin == "user data folder"
    Path("forensics_data").mkdir()
    Path(WORKING_STORE).touch()
    assert (store_location(cfg).path, store_location(cfg).origin) == (WORKING_STORE, "working folder")
    Path("forensics_config.yaml").write_text("storage:\n  path: ~/pinned.db\n")
    cfg = load_config()
    where = store_location(cfg)
    assert (where.path, where.origin) == (str(home / "pinned.db"), "storage.path")
    assert where.reason == "storage.path in forensics_config.yaml"
    monkeypatch.setenv("CTXF_DB", "~/env.db")
    assert (store_location(cfg).path, store_location(cfg).origin) == (str(home / "env.db"), "$CTXF_DB")
    assert (store_location(cfg, "x.db").path, store_location(cfg, "x.db").origin) == ("x.db", "--db")
    monkeypatch.setenv("CTXF_DB", "  ")  # blank: unset
    assert store_location(cfg).origin == "storage.path"


def test_xdg_data_home_moves_the_user_store_and_a_relative_one_is_ignored(home, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert user_store() == tmp_path / "xdg" / "ctxf" / "sessions.db"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    assert user_store() == home / ".local" / "share" / "ctxf" / "sessions.db"


def test_the_cache_is_in_the_user_cache_folder(home, tmp_path, monkeypatch):
    monkeypatch.delenv("CTXF_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_dir() == user_cache_dir() == home / ".cache" / "ctxf"


def test_from_a_fresh_folder_every_command_uses_the_user_level_store(home, tmp_path, monkeypatch):
    user = home / ".local" / "share" / "ctxf" / "sessions.db"
    where = shown()
    assert where == {"path": str(user), "origin": "user data folder", "exists": False,
                     "reason": "the user-level store: no --db, $CTXF_DB, storage.path or "
                               "./forensics_data/sessions.db here"}
    r = run("ingest", LOG)
    assert r.exit_code == 0, r.output
    assert user.is_file() and not Path("forensics_data").exists()
    assert stat.S_IMODE(user.parent.stat().st_mode) == 0o700  # a folder ctxf made: private (issue 31)
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)  # another folder: the same store
    r = run("sessions", "--json")
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.stdout)["sessions"]) == 1
    assert r.stderr == ""  # nothing to say: the usual store
    assert shown()["exists"] is True
    r = run("config", "show")
    assert r.stdout.splitlines()[1:3] == [f"store: {user}", "  the user-level store: no --db, $CTXF_DB, "
                                          "storage.path or ./forensics_data/sessions.db here"]


def test_a_working_folder_store_is_used_and_said_once(home, tmp_path):
    assert run("ingest", LOG, "--db", WORKING_STORE).exit_code == 0  # a store made before the user-level one
    user = home / ".local" / "share" / "ctxf" / "sessions.db"
    r = run("sessions", "--json")
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.stdout)["sessions"]) == 1
    assert r.stderr == (f"note: the store is {WORKING_STORE}, found in the working folder; elsewhere ctxf uses "
                        f"the user-level store, {user}\n")
    assert run("sessions").stderr == ""  # said once (per process: each command is one)
    where = shown()
    assert (where["path"], where["origin"], where["exists"]) == (WORKING_STORE, "working folder", True)
    assert not user.exists()  # the user-level store was neither read nor made
    assert shown("--db", WORKING_STORE)["origin"] == "--db"


def test_ctxf_db_and_the_config_win_over_the_working_folder(home, tmp_path, monkeypatch):
    Path("forensics_data").mkdir()
    Path(WORKING_STORE).touch()
    monkeypatch.setenv("CTXF_DB", str(tmp_path / "env.db"))
    assert run("ingest", LOG).exit_code == 0
    assert (tmp_path / "env.db").is_file() and Path(WORKING_STORE).stat().st_size == 0
    assert shown()["reason"] == "from $CTXF_DB"
    monkeypatch.delenv("CTXF_DB")
    Path("c.yaml").write_text(f"storage:\n  path: {tmp_path / 'cfg.db'}\n")
    assert shown("--config", "c.yaml")["reason"] == "storage.path in c.yaml"
    r = run("sessions", "--config", "c.yaml")
    assert r.exit_code == 2 and f"no store at {tmp_path / 'cfg.db'} (storage.path in c.yaml)" in r.stderr


def test_a_cli_process_from_a_fresh_home_and_folder(tmp_path):
    """As a user runs it: a new process, a fresh HOME, no XDG folders, no --db."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_DATA", "CTXF_DB", "CTXF_CONFIG"))}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT),
               CTXF_CACHE_DIR=os.environ.get("CTXF_CACHE_DIR") or str(cache_dir()))  # the built tokenizer files
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    ingest = subprocess.run([sys.executable, "-m", "context_forensics", "ingest", str(LOG)], cwd=tmp_path / "a",
                            env=env, capture_output=True, text=True, timeout=300)
    assert ingest.returncode == 0, ingest.stderr
    r = subprocess.run([sys.executable, "-m", "context_forensics", "sessions", "--json"], cwd=tmp_path / "b",
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["sessions"]) == 1
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")
                  if p.is_file() and "home" not in p.parts) == []  # nothing in the working folders
    assert (home / ".local" / "share" / "ctxf" / "sessions.db").is_file()
