"""``constraint_selection``: pin the goal and the constraints, choose the rest by recency under the budget.

Follows lethes (kb5000/lethes, as of 2025-12: ``engine/constraints.py`` ``ConstraintSet``
``require_all_system`` / ``require_last_user``, ``algorithms/greedy.py`` pinned messages first
then a greedy fill of the budget, ``algorithms/recency.py`` recency weighting,
``algorithms/dependency.py`` a kept message brings its dependencies). Before each call, from
the whole history the client keeps:

1. **pinned** (kept whatever their age): preserved system messages, the goal (the task statement)
   and every message stating a tracked constraint (``pinned``), the newest group (the message
   being answered) and the last user message (lethes' ``require_last_user``);
2. the rest is filled **newest first**: each tool-call group (a call and its results, whole) is
   kept if it fits what is left of the budget, else skipped, and older, smaller ones may still
   fit (lethes' greedy does not stop at the first that does not fit);
3. **dependencies**: a kept assistant reply brings the user message it answers (the nearest user
   message before it) when that fits too; a tool result always brings its call (groups).

The selection is recomputed at each call over the full history, so a message dropped at one
call can be back at a later one (a ``restored`` event), as with ``middle_out``. When the pinned
messages alone do not fit, the oldest pins (not system, not the newest group) are dropped until
they do, and the overflow that is left is reported.

What the pins rest on: ``pinned`` is filled before the replay (``bind``) from the session's
messages by ``replay.pins.find_pins``, a lexical rule (the fact's numbers and names, and two
thirds of its content words, in the message; no embedder), over the facts given in ``facts``
(``ctxf facts`` passes the facts it tracks) or else the config's ``facts:``. A constraint worded
differently in the log is not found and so not pinned: ``pinned_facts`` says which were.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ._common import check_int, last_group, report_overflow
from .base import EVICTED, IN_WINDOW, KEPT, Engine, Policy, register_policy


def check_seqs(name: str, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"parameter {name!r} must be a list of message seqs, not {value!r}")
    for v in value:
        check_int(name, v)


def bind_pins(p: dict[str, Any], messages: Any, config: Any, *, first_only: bool = False) -> dict[str, Any]:
    """``p`` with ``facts`` and ``pinned`` filled from the session (unless ``pinned`` is given)."""
    from ..pins import bind_facts, find_pins

    p = dict(p)
    facts = bind_facts(p, config)
    p["facts"] = facts
    if p.get("pinned") is None:
        pins = find_pins(messages, facts)
        p["pinned"] = pins.seqs(goal=p.get("pin_goal", True), first_only=first_only)
        p["pinned_facts"] = {f: list(s[:1] if first_only else s) for f, s in pins.facts.items()}
        p["goal_seq"] = pins.goal if p.get("pin_goal", True) else None
    return p


@dataclass(slots=True)
class _SelectionState:
    pinned: list[int]  # the pinned seqs, in order
    pin_at: int = 0  # pinned[:pin_at] are in the history
    users: list[int] = field(default_factory=list)  # user messages in the history, in order
    user_scan: int = 0


@register_policy
class ConstraintSelection(Policy):
    name = "constraint_selection"
    description = "pin system, goal and constraint messages; fill the budget newest first (lethes)"
    as_of = "2025-12-02"
    source = ("lethes (github.com/kb5000/lethes): engine/constraints.py ConstraintSet, algorithms/greedy.py, "
              "algorithms/recency.py, algorithms/dependency.py")
    uses_facts = True  # ``ctxf facts`` passes the facts it tracks as ``facts``
    defaults: ClassVar[dict[str, Any]] = {"facts": None, "pinned": None, "pin_goal": True,
                                          "pinned_facts": None, "goal_seq": None}

    def params(self, given: dict[str, Any] | None) -> dict[str, Any]:
        p = super().params(given)
        check_seqs("pinned", p["pinned"])
        if not isinstance(p["pin_goal"], bool):
            raise ValueError(f"parameter 'pin_goal' must be true or false, not {p['pin_goal']!r}")
        return p

    def bind(self, p: dict[str, Any], messages: Any, config: Any) -> dict[str, Any]:
        return bind_pins(p, messages, config)

    def start(self, eng: Engine, p: dict) -> None:
        eng.set_policy_state(_SelectionState(sorted(set(p["pinned"] or ()))))

    def fit(self, eng: Engine, step: int, p: dict) -> int:
        inp, end = eng.inp, eng.end
        roles, kinds = inp.roles, inp.kinds
        st = eng.policy_state(_SelectionState)
        while st.pin_at < len(st.pinned) and st.pinned[st.pin_at] < end:
            st.pin_at += 1
        for i in range(st.user_scan, end):
            if roles[i] == "user" and kinds[i] == "message":
                st.users.append(i)
        st.user_scan = end
        budget = inp.budget
        if eng.counts["evicted"] == 0 and eng.total() <= budget:
            return 0  # everything fits: nothing to choose
        chosen = self._select(eng, st, p, budget)
        evicted, restored = [], []
        state = eng.state
        for i in range(end):
            want = KEPT if chosen[i] else EVICTED
            s = state[i]
            if want == EVICTED and s in IN_WINDOW:
                eng.move(i, EVICTED)
                evicted.append(i)
            elif want == KEPT and s == EVICTED:
                eng.move(i, KEPT)
                restored.append(i)
        pinned_now = st.pinned[:st.pin_at]
        kept_pins = sum(1 for i in pinned_now if chosen[i])
        if evicted:
            eng.event("eviction", policy=self.name, count=len(evicted), first=evicted[0], last=evicted[-1],
                      pinned_kept=kept_pins, pinned=len(pinned_now))
        if restored:
            eng.event("restored", policy=self.name, count=len(restored), first=restored[0], last=restored[-1])
        if kept_pins < len(pinned_now):
            eng.event("pins_dropped", policy=self.name, count=len(pinned_now) - kept_pins,
                      seqs=[i for i in pinned_now if not chosen[i]],
                      message=f"{len(pinned_now) - kept_pins} pinned message(s) do not fit the budget "
                              f"with the newest messages: the oldest pins were dropped")
        return report_overflow(eng, "the pinned and the most recent messages")

    def _select(self, eng: Engine, st: _SelectionState, p: dict, budget: int) -> list[bool]:
        """Which history messages the window keeps at this call (see the module docstring)."""
        end, tokens, group, members = eng.end, eng.tokens, eng.group, eng.members
        chosen = [False] * end
        room = budget - eng.fixed() - eng.extra

        def cost(i: int) -> int:
            return sum(tokens[m] for m in members(i) if not chosen[m])

        def take(i: int) -> None:
            nonlocal room
            for m in members(i):
                if not chosen[m]:
                    chosen[m] = True
                    room -= tokens[m]

        last = last_group(eng)
        must = [i for i in range(end) if (p["preserve_system"] and eng.is_sys[i]) or not eng.movable(i)]
        newest = [i for i in range(end) if group[i] == last] if end else []
        last_user = [st.users[-1]] if st.users else []
        for i in must + newest + last_user:
            take(i)
        # pins, newest first, while they fit; the ones that do not are the oldest
        for i in reversed(st.pinned[:st.pin_at]):
            if not chosen[i] and cost(i) <= room:
                take(i)
        # recency fill with dependencies
        users = st.users
        u = len(users) - 1
        for i in range(end - 1, -1, -1):
            if chosen[i] or cost(i) > room:
                continue
            take(i)
            first = members(i)[0]
            if eng.inp.roles[first] == "assistant":
                while u >= 0 and users[u] > first:
                    u -= 1
                if u >= 0 and not chosen[users[u]] and cost(users[u]) <= room:
                    take(users[u])
        return chosen
