"""Helpers shared by several policies (not a policy: the registry skips ``_`` modules)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import EVICTED, IN_WINDOW, Engine


def last_group(eng: Engine) -> int:
    """The group of the newest history message: the one a policy never drops."""
    return eng.group[eng.end - 1] if eng.end else -1


def evict_oldest(eng: Engine, cursor: int, preserve_system: bool,
                 done: Callable[[], bool]) -> tuple[int, list[int]]:
    """Evict whole groups, oldest first from ``cursor``, until ``done()`` or the newest group.

    Preserved system messages and messages already out of the window are stepped over.
    Returns the new cursor (everything before it is out of the window or preserved, or the
    cursor stopped at the newest group) and the seqs evicted, in order.
    """
    last = last_group(eng)
    state, group, is_sys, end = eng.state, eng.group, eng.is_sys, eng.end
    dropped: list[int] = []
    i = cursor
    while i < end and not done():
        if state[i] not in IN_WINDOW or (preserve_system and is_sys[i]):
            i += 1
            continue
        if group[i] == last:
            break
        for m in eng.members(i):
            if state[m] != EVICTED and eng.movable(m):
                eng.move(m, EVICTED)
                dropped.append(m)
        i += 1
    return i, sorted(dropped)


def eviction_event(eng: Engine, policy: str, dropped: list[int], **data: Any) -> None:
    """One ``eviction`` event for the messages evicted at this step (``count`` counts messages)."""
    if dropped:
        eng.event("eviction", policy=policy, count=len(dropped), first=dropped[0], last=dropped[-1], **data)


def report_overflow(eng: Engine, reason: str, *, would_fail: bool = True, **data: Any) -> int:
    """Emit an ``overflow`` event when the window is over budget; return the overflow (≥ 0)."""
    over = eng.total() - eng.inp.budget
    if over > 0:
        eng.event("overflow", would_fail=would_fail, overflow=over,
                  message=f"{reason} exceed the budget by {over:,} tokens", **data)
        return over
    return 0


def check_int(name: str, value: Any, *, minimum: int = 0, optional: bool = False) -> None:
    """A ValueError naming the parameter unless ``value`` is an int ≥ minimum (or None if optional)."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        want = f"an integer ≥ {minimum}" + (" or null" if optional else "")
        raise ValueError(f"parameter {name!r} must be {want}, not {value!r}")


def check_choice(name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"parameter {name!r} must be one of {list(allowed)}, not {value!r}")
