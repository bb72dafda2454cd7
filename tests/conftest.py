"""Suite-wide settings."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _fixed_terminal(monkeypatch):
    """Human views are rendered 120 columns wide and without colour whatever terminal runs the
    tests, so what a test reads does not depend on $COLUMNS (CI terminals differ). Tests of other
    widths set $COLUMNS themselves (tests/test_render_widths.py)."""
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 from its package, loaded once for the suite (skips, saying how
    to install it, where it is not installed)."""
    from context_forensics.embed import SentenceTransformerEmbedder
    from context_forensics.errors import UsageError

    try:
        e = SentenceTransformerEmbedder()
        e.encode(["warm up"])
    except UsageError as err:
        pytest.skip(str(err))
    return e


@pytest.fixture()
def hashing(monkeypatch):
    """Commands build their embedder from the config: unit tests swap in the deterministic hashing
    stand-in (integration tests use ``minilm``, the real model)."""
    from context_forensics.embed import HashingEmbedder

    monkeypatch.setattr("context_forensics.embed.embedders.get_embedder", lambda *a, **k: HashingEmbedder())
