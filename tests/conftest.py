"""Suite-wide settings."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _fixed_terminal(monkeypatch):
    """Human views are rendered 120 columns wide and without colour whatever terminal runs the
    tests, so what a test reads does not depend on $COLUMNS (CI terminals differ). Tests of other
    widths set $COLUMNS themselves (tests/test_render_widths.py)."""
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.fixture(autouse=True)
def _private_user_store(monkeypatch, tmp_path_factory):
    """No test reads or writes the user-level store of whoever runs the suite: each test's user
    data folder (platformdirs': $XDG_DATA_HOME, which CLI subprocesses inherit) is a new empty
    folder, and a $CTXF_DB set in the runner's shell is not taken. The cache folder stays shared
    (the tokenizer files and the ONNX export are built once). Tests of the store's location
    (tests/test_store_location.py) set these themselves."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("user-data")))
    monkeypatch.delenv("CTXF_DB", raising=False)


def _loaded(make):
    """An embedder from ``make()``, warmed up; skips, saying how to install it, where it is not."""
    from context_forensics.errors import UsageError

    try:
        e = make()
        e.encode(["warm up"])
    except UsageError as err:
        pytest.skip(str(err))
    return e


@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 from its package (the torch backend), loaded once for the suite."""
    from context_forensics.embed import SentenceTransformerEmbedder

    return _loaded(SentenceTransformerEmbedder)


@pytest.fixture(scope="session")
def minilm_default():
    """The same model on the backend a user's ctxf picks (``get_embedder``: ONNX Runtime where it
    runs, 4x the torch backend's throughput here), for tests that embed a whole corpus."""
    from context_forensics.embed.embedders import get_embedder

    return _loaded(get_embedder)


@pytest.fixture()
def hashing(monkeypatch):
    """Commands build their embedder from the config: unit tests swap in the deterministic hashing
    stand-in (integration tests use ``minilm``, the real model)."""
    from context_forensics.embed import HashingEmbedder

    monkeypatch.setattr("context_forensics.embed.embedders.get_embedder", lambda *a, **k: HashingEmbedder())


@pytest.fixture(scope="session")
def corpus_ingest(tmp_path_factory):
    """The whole real corpus ingested once for the suite with `ctxf ingest --recursive --json`:
    (store path, the CLI result). Skips where ../shared/corpus is absent. Tests that read it must
    not change it (a re-ingest adds nothing, which test_corpus asserts)."""
    from typer.testing import CliRunner

    from context_forensics.cli import app
    from helpers import CORPUS

    if not CORPUS.exists():
        pytest.skip("corpus not available")
    db = str(tmp_path_factory.mktemp("corpus") / "store.db")
    r = CliRunner().invoke(app, ["ingest", str(CORPUS), "--recursive", "--db", db, "--json"])
    return db, r


@pytest.fixture(scope="session")
def ray_cluster():
    """One real local Ray for the whole run (2 CPUs, no dashboard), shared by every Ray test:
    its start-up (seconds) is paid once, never in the fast unit tests. Skipped when the ``ray``
    extra is not installed."""
    import os

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[dev]')")
    import logging

    from context_forensics.executors.ray_backend import start_local_ray

    started = not ray.is_initialized()
    if started:
        here = Path(__file__).parent  # the workers import the tests' job functions (executor_jobs.py)
        start_local_ray(ray, 2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
                        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(here.parent), str(here)])}})
    yield ray
    if started:
        ray.shutdown()
