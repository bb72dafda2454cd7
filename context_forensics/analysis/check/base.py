"""What a check reports: one ``Inconsistency`` per disagreement, and a session's ``SessionCheck``.

An inconsistency is two signals about one session that do not agree: what the log records (a
recorded prompt size, a compaction record, an edit call, a tool call) against what ctxf
reconstructs from it (a replayed window, a counted compaction, an edit an analysis sees, a
paired result). ``accounted`` says when ctxf already reports it elsewhere (an inferred event on
the step, a flag on the replay), so a reader can tell a disagreement ctxf explains from one it
does not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CHECK_VERSION = 1


@dataclass(frozen=True)
class Inconsistency:
    """One disagreement between the log and ctxf's reconstruction of it."""

    check: str  # the check that found it (``CHECKS``)
    message: str  # one line for a person: what disagrees, with the figures
    step: int | None = None  # the model call it is at (1-based), when it is at one
    seq: int | None = None  # the message it is at
    figures: dict[str, Any] = field(default_factory=dict)
    accounted: str | None = None  # where ctxf already reports it, when it does

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "step": self.step, "seq": self.seq, "message": self.message,
                "figures": self.figures, "accounted": self.accounted}


@dataclass
class SessionCheck:
    """Every check run on one session: what each found, and the checks that could not run."""

    session: dict[str, Any]
    ran: list[str]
    skipped: dict[str, str]  # check -> why it did not run
    found: list[Inconsistency]

    @property
    def consistent(self) -> bool:
        return not self.found

    def by_check(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.found:
            out[f.check] = out.get(f.check, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"session": self.session, "consistent": self.consistent, "checks": self.ran,
                "skipped": self.skipped, "counts": self.by_check(),
                "inconsistencies": [f.to_dict() for f in self.found]}


CheckFn = Callable[[Any], list[Inconsistency]]
"""A check: the session's ``CheckInput`` in, its inconsistencies out (``[]``: it agrees)."""


class NotApplicable(Exception):
    """Raised by a check that cannot judge this session; the message says why."""
