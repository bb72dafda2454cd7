"""Causes: what kind of difference the first divergence is, the two events shown side by side,
and how they differ.

The events shown side by side are each run's first event in the diverging block (or, for a run
with none, the event it did next). The cause:

``run_ended``         one run has no events left;
``system_prompt``     the first differing event is an instruction;
``user_input``        ... a user input;
``tool_definitions``  the runs of one harness were given different tools (``inputs``);
``tool_output``       ... a tool result (the actions before it matched: the environment
                      answered differently);
``context_window``    the runs decided differently after the same aligned history, but their
                      windows differed: some aligned event was lost (evicted, cleared,
                      summarized) in one run's window and not in the other's at that step
                      (replay: the recorded policy, or ``--model`` as a what-if);
``assistant_action``  the same aligned history, none of it lost from either window (when both
                      runs were replayed: ``detail["windows_compared"]``), a different
                      decision. Not "the same window": the runs' own inputs (another harness's
                      system prompt, another model's tokens) are in their windows too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .alignment import OPS_SAME, Alignment, Row, block_end
from .compare import Comparer, describe
from .display import line_diff
from .events import Event

if TYPE_CHECKING:  # pragma: no cover
    from .context import RunContext

CAUSES = ("system_prompt", "user_input", "tool_definitions", "tool_output", "assistant_action", "context_window",
          "run_ended")


def _diverging_block(rows: list[Row], first: int) -> tuple[int, Event | None, Event | None, bool, bool]:
    """End of the diverging block, each side's first event in it (or next after it), and
    whether each side has any event at or after the block."""
    end = block_end(rows, first)
    a_first = next((r.a for r in rows[first:end] if r.a is not None), None)
    b_first = next((r.b for r in rows[first:end] if r.b is not None), None)
    a_next = a_first or next((r.a for r in rows[end:] if r.a is not None), None)
    b_next = b_first or next((r.b for r in rows[end:] if r.b is not None), None)
    return end, a_next, b_next, a_next is not None, b_next is not None


def classify(al: Alignment, ctx_a: RunContext | None = None, ctx_b: RunContext | None = None
             ) -> tuple[str, Event | None, Event | None, dict[str, Any]]:
    """The cause of the first divergence, the two events side by side, and detail."""
    assert al.first is not None
    rows = al.rows
    _, ev_a, ev_b, _, _ = _diverging_block(rows, al.first)
    detail: dict[str, Any] = {}
    if ev_a is None or ev_b is None:  # a side has no event at or after the block
        detail["ended"] = "a" if ev_a is None else "b"
        return "run_ended", ev_a, ev_b, detail
    first_row = rows[al.first]
    lead = [e for e in (first_row.a, first_row.b) if e is not None]
    types = {e.type for e in lead} | {ev_a.type, ev_b.type}
    for t, cause in (("system", "system_prompt"), ("user", "user_input"), ("result", "tool_output")):
        if t in types:
            return cause, ev_a, ev_b, detail
    # a decision: same history; did the windows differ?
    if ctx_a is not None and ctx_b is not None and ev_a is not None and ev_b is not None \
            and ev_a.step is not None and ev_b.step is not None:
        lost: list[dict[str, Any]] = []
        for r in rows[: al.first]:
            if r.a is None or r.b is None or r.op not in OPS_SAME:
                continue  # only the shared history: a detour's two different looks do not pair
            la, lb = ctx_a.lost_at(r.a.seq, ev_a.step), ctx_b.lost_at(r.b.seq, ev_b.step)
            if la != lb:
                lost.append({"run": "a" if la else "b", "a_seq": r.a.seq, "b_seq": r.b.seq, "type": r.a.type,
                             "event": (r.a if la else r.b).display})
        if lost:
            detail["lost_in_one_window"] = lost
            return "context_window", ev_a, ev_b, detail
        detail["windows_compared"] = True
    return "assistant_action", ev_a, ev_b, detail


def pair_similarity(comparer: Comparer, a: Event | None, b: Event | None, rows: list[Row]
                    ) -> tuple[float | None, str | None, str | None, str | None]:
    """(similarity, measure, method, reason) of the two events shown side by side."""
    if a is None or b is None:
        return None, None, None, "only one run has an event here"
    if a.type != b.type:
        return None, None, "n/a", f"not comparable: a {a.type} event and a {b.type} event"
    for r in rows:
        if r.a is a and r.b is b and r.method is not None:
            return r.similarity, r.measure, r.method, r.reason
    sim, measure, same = comparer.compare([(a, b)])[0]
    method, reason, shown = describe(measure, sim, same, a, b, threshold=comparer.threshold,
                                     embedded=measure in ("embedding", "same_output") and sim is not None)
    return shown, measure, method, reason


def event_diff(a: Event | None, b: Event | None) -> list[str]:
    """A unified diff of the two events' texts (capped)."""
    if a is None or b is None:
        return []
    return line_diff(a.text.split("\n"), b.text.split("\n"))


def explain(cause: str, a: Event | None, b: Event | None, detail: dict[str, Any]) -> str:
    """One sentence saying what the cause means for these two runs."""
    if cause == "run_ended":
        who, other = ("A", "B") if detail.get("ended") == "a" else ("B", "A")
        nxt = b if who == "A" else a
        return f"run {who} stopped here; run {other} went on ({nxt.display if nxt else 'nothing'})"
    if cause == "system_prompt":
        return "the two runs were given different instructions"
    if cause == "user_input":
        return "the user said something different (or only in one run)"
    if cause == "tool_output":
        return "after the same actions, the environment answered differently"
    if cause == "context_window":
        n = len(detail.get("lost_in_one_window", []))
        return (f"same aligned history, but {n} event(s) had left one window and not the other; "
                "then the decisions differed")
    if detail.get("windows_compared"):
        return "same aligned history, none of it lost from either window; a different decision"
    return "same aligned history, a different decision (the windows were not compared)"
