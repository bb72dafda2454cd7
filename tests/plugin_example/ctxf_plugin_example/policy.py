"""A replay policy for the ctxf plugin example: never evicts; reports any overflow."""

from __future__ import annotations

from context_forensics import Policy


class KeepAll(Policy):  # registered by ctxf from the entry point (no decorator needed)
    name = "keep_all"
    description = "keep every message; report the overflow (the plugin example)"
    as_of = "2026-12-06"
    source = "tests/plugin_example"

    def fit(self, eng, step: int, p: dict) -> int:
        return max(0, eng.total() - eng.inp.budget)
