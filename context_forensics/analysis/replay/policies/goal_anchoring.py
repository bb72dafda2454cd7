"""``goal_anchoring``: restate the goal and its constraints at every call, over an underlying truncation.

The "goal anchoring" / "instruction reminder" strategy of agent harnesses: the task statement and
the constraints given with it are re-sent with every request (a reminder block at the end of the
prompt), so a truncation of the history cannot take them out of view. Claude Code re-injects its
todo list and CLAUDE.md as ``<system-reminder>`` blocks; Manus describes "recitation" (rewriting
``todo.md`` at the end of the context to keep the goal in recent attention: "Context Engineering for
AI Agents: Lessons from Building Manus", 2025-07). This replay models the generic form:

- the **anchor** is a copy of the goal message (the task statement) and of the first message
  stating each tracked constraint (``anchored``, found as ``constraint_selection`` finds its pins:
  ``replay.pins``, lexical, no embedder), restated verbatim from the call after each joined the
  history. A message longer than ``max_restated_tokens`` is not restated (a harness restates an
  instruction, not a whole tool output); ``skipped`` in the event lists them;
- its tokens are each restated message's own count, added at **every** call (synthetic content,
  ``eng.extra``: the window's "simulated" part; its text is a copy of the log's, so the count is
  as good as the message's);
- ``under`` (default ``left_truncation``; also ``sliding_window``, ``middle_out``,
  ``tool_result_clearing``) then fits the history into what the anchor leaves of the budget,
  with its own parameters (``under_params``).

An ``anchoring`` event (``simulated: true``) marks each call whose anchor changed. Fact tracking
counts a constraint whose statement is anchored as present from the call it joined on, whatever
the truncation did to the original, and says "restated by goal anchoring".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ._common import check_choice, check_int, report_overflow
from .base import Engine, Policy, ReplayInput, register_policy
from .constraint_selection import bind_pins, check_seqs

UNDERLYING = ("left_truncation", "sliding_window", "middle_out", "tool_result_clearing")
MAX_RESTATED = 2_000  # tokens: a reminder restates instructions, not a long tool output


@dataclass(slots=True)
class _AnchorState:
    under: Policy  # the truncation the anchor sits over, with its own state on the engine
    under_p: dict[str, Any]
    items: list[int]  # the messages the anchor restates (``GoalAnchoring.restated``)
    skipped: list[int]  # ... and the pinned ones too long to
    at: int = 0  # items[:at] are restated
    tokens: int = 0  # the anchor's tokens
    seen_skipped: int = 0  # skipped messages already reported


@register_policy
class GoalAnchoring(Policy):
    name = "goal_anchoring"
    description = "restate the goal and constraint messages at every call, over a truncation (simulated)"
    as_of = "2025-12-02"
    source = ("Manus, 'Context Engineering for AI Agents' (2025-07: recitation of todo.md); Claude Code "
              "<system-reminder> re-injection; generic reminder block over left truncation")
    uses_facts = True
    defaults: ClassVar[dict[str, Any]] = {"under": "left_truncation", "under_params": None, "facts": None,
                                          "pinned": None, "pin_goal": True, "pinned_facts": None,
                                          "goal_seq": None, "max_restated_tokens": MAX_RESTATED}

    def _under(self, p: dict[str, Any]) -> tuple[Policy, dict[str, Any]]:
        from . import get_policy

        under = get_policy(p["under"])
        up = dict(p["under_params"] or {})
        up.setdefault("preserve_system", p["preserve_system"])
        return under, under.params(up)

    def params(self, given: dict[str, Any] | None) -> dict[str, Any]:
        p = super().params(given)
        check_choice("under", p["under"], UNDERLYING)
        if p["under_params"] is not None and not isinstance(p["under_params"], dict):
            raise ValueError(f"parameter 'under_params' must be a mapping, not {p['under_params']!r}")
        check_seqs("pinned", p["pinned"])
        check_int("max_restated_tokens", p["max_restated_tokens"])
        self._under(p)  # the underlying policy's parameters are checked now
        return p

    def bind(self, p: dict[str, Any], messages: Any, config: Any) -> dict[str, Any]:
        return bind_pins(p, messages, config, first_only=True)

    def restated(self, inp: ReplayInput, p: dict[str, Any]) -> tuple[list[int], list[int]]:
        """The messages the anchor restates, and the pinned ones too long to (``max_restated_tokens``).
        Fact tracking reads the first: their content is in view from the call after they joined."""
        cap = p["max_restated_tokens"]
        pins = [i for i in sorted(set(p["pinned"] or ())) if i < inp.n]
        return [i for i in pins if inp.tokens[i] <= cap], [i for i in pins if inp.tokens[i] > cap]

    def start(self, eng: Engine, p: dict) -> None:
        under, up = self._under(p)
        st = eng.set_policy_state(_AnchorState(under, up, *self.restated(eng.inp, p)))
        under.start(eng, st.under_p)

    def fit(self, eng: Engine, step: int, p: dict) -> int:
        st = eng.policy_state(_AnchorState)
        items = st.items
        added = []
        while st.at < len(items) and items[st.at] < eng.end:
            i = items[st.at]
            st.tokens += eng.tokens[i]
            added.append(i)
            st.at += 1
        eng.extra = st.tokens  # the underlying policies leave ``extra`` alone
        skipped = [i for i in st.skipped if i < eng.end]
        if added or len(skipped) > st.seen_skipped:
            st.seen_skipped = len(skipped)
            # count/first/last: the messages added at this call (they add up over a run of steps);
            # restated/seqs: all the anchor holds now
            eng.event("anchoring", policy=self.name, simulated=True, count=len(added),
                      first=added[0] if added else None, last=added[-1] if added else None,
                      restated=st.at, seqs=items[:st.at], added=added,
                      anchor_tokens=st.tokens, skipped=skipped, under=p["under"])
        over = st.under.fit(eng, step, st.under_p)
        if over:
            return over
        return report_overflow(eng, "the restated goal and constraints with the most recent messages")
