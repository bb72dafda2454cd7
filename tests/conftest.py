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
