"""The checks that set the log's own actions beside what the analyses make of them.

- ``edits``: the successful edit calls the log holds (counted on their own, per agent, by
  ``diverge.consistency``) against the edits explain and diverge see.
"""

from __future__ import annotations

from typing import Any

from .base import Inconsistency


def edits(inp: Any) -> list[Inconsistency]:
    """Every successful edit call of the log that the edits explain and diverge see leave out."""
    from ..diverge import edit_consistency

    got = edit_consistency(inp.store, inp.sid)
    out = []
    for m in got["missing"]:
        where = f"step {m['step']}" if m.get("step") is not None else f"seq {m['seq']}"
        out.append(Inconsistency(
            "edits",
            f"{where}: the log's {m['tool']} call on {m.get('path') or 'a file'} applied, but explain and diverge do "
            f"not see it ({m['why']})",
            step=m.get("step"), seq=m.get("seq"),
            figures={"tool": m["tool"], "path": m.get("path"), "why": m["why"], "calls": got["calls"],
                     "seen": got["seen"], "failed": got["failed"]}))
    return out
