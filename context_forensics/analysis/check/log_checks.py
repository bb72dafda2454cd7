"""The checks that set the log's own actions beside what the analyses make of them.

- ``edits``: the successful edit calls the log holds (counted on their own, per agent, by
  ``diverge.consistency``) against the edits explain and diverge see, and the calls it says did
  not apply (proposed, not applied) that they see all the same;
- ``tool_pairs``: the log's tool calls against their results (a call never answered, a result
  answering no call), as every rule and analysis pairs them.
"""

from __future__ import annotations

from typing import Any

from .base import Inconsistency


def edits(inp: Any) -> list[Inconsistency]:
    """Every successful edit call of the log that the edits explain and diverge see leave out, and
    every edit call the log says did not apply (an Aider SEARCH/REPLACE block it could not match)
    that they see all the same."""
    from ..diverge import edit_consistency

    got = edit_consistency(inp.store, inp.sid)
    rendered = (inp.session.get("metadata") or {}).get("tool_arguments") == "rendered"
    out = []
    unrecorded = [{**m, "path": None, "why": "the export does not hold the call's path"} for m in got["unrecorded"]]
    for m in sorted([*got["missing"], *unrecorded], key=lambda m: m["seq"]):
        where = f"step {m['step']}" if m.get("step") is not None else f"seq {m['seq']}"
        out.append(Inconsistency(
            "edits",
            f"{where}: the log's {m['tool']} call on {m.get('path') or 'a file'} applied, but explain and diverge do "
            f"not see it ({m['why']})",
            step=m.get("step"), seq=m.get("seq"),
            figures={"tool": m["tool"], "path": m.get("path"), "why": m["why"], "calls": got["calls"],
                     "seen": got["seen"], "failed": got["failed"]},
            accounted="the session's metadata (tool_arguments: rendered) says the export holds the calls' arguments "
                      "as rendered text, not as sent"
            if rendered else None))
    for m in got["seen_not_applied"]:
        where = f"step {m['step']}" if m.get("step") is not None else f"seq {m['seq']}"
        out.append(Inconsistency(
            "edits",
            f"{where}: the log says its {m['tool']} call on {m.get('path') or 'a file'} did not apply, but explain and "
            "diverge see it as an edit",
            step=m.get("step"), seq=m.get("seq"),
            figures={"tool": m["tool"], "path": m.get("path"), "why": "did not apply", "calls": got["calls"],
                     "seen": got["seen"], "failed": got["failed"]}))
    return out


def tool_pairs(inp: Any) -> list[Inconsistency]:
    """Every tool call of the log without a result, and every result without its call, as every
    rule and analysis pairs them (``tool_output.pair_tools``: by call id, else the latest call's;
    results written as user text too). The last model call's calls (the log may have ended while
    they ran) and a cut-off reply's (never run) are not counted."""
    from ...tool_output import tool_pairs as pairs_of

    got = pairs_of(inp.messages, inp.session.get("format"))
    out = []
    for c in got["unanswered"]:
        where = f"step {c['step']}" if c.get("step") is not None else f"seq {c['seq']}"
        out.append(Inconsistency(
            "tool_pairs", f"{where}: the {c['tool']} call{' ' + c['call_id'] if c.get('call_id') else ''} has no "
            "result in the log", step=c.get("step"), seq=c["seq"],
            figures={"tool": c["tool"], "call_id": c.get("call_id"), "calls": got["calls"], "results": got["results"]},
            accounted="the audit's no_orphan_tool_results rule fails on it"))
    for r in got["orphan_results"]:
        out.append(Inconsistency(
            "tool_pairs",
            f"seq {r['seq']}: a tool result answers call {r.get('call_id') or '(no id)'}, which no earlier "
            "call of the log made", seq=r["seq"],
            figures={"call_id": r.get("call_id"), "calls": got["calls"], "results": got["results"]},
            accounted="the audit's no_orphan_tool_results rule fails on it"))
    return out
