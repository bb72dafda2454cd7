"""``tool_result_clearing``: Anthropic context editing, strategy ``clear_tool_uses_20250919``.

Server-side, before the prompt reaches Claude (beta header ``context-management-2025-06-27``):
once the prompt exceeds ``trigger``, the API clears the oldest tool results in chronological
order, replacing each with a short placeholder so Claude knows a result was removed, and keeps
the ``keep`` most recent tool uses. Parameters and documented defaults:

``trigger``            ``{"type": "input_tokens", "value": 100000}`` (an int means input
                       tokens); ``{"type": "tool_uses", "value": N}`` counts tool uses instead.
``keep``               ``{"type": "tool_uses", "value": 3}`` (an int is accepted): the most
                       recent N tool uses are never cleared. Counted over all tool uses,
                       excluded tools included (as LangChain's ``ClearToolUsesEdit`` mirror does).
``clear_at_least``     None. "If the API can't clear at least the specified amount, the strategy
                       will not be applied": all or nothing, to make breaking the prompt cache
                       worthwhile.
``exclude_tools``      None: tool names whose uses and results are never cleared.
``clear_tool_inputs``  false: also clear the ``tool_use`` inputs of the call. Modelled as the
                       assistant message that made the call shrinking to a placeholder (state
                       CLEARED) once every result it asked for is cleared; a list of tool names
                       limits this to calls of those tools.

A cleared result costs ``ReplayInput.placeholder_tokens`` (or its own tokens if smaller) and
still answers its call, so the pair stays in the window. Nothing is ever evicted: when
clearing is not enough (or the trigger is set above the budget) the window overflows and the
overflow is reported, as the API would reject the request.

The client keeps the full history and the server re-applies the edit on every request, but the
raw prompt, the set of clearable tool uses and the tokens they free only grow, so once a result
is cleared it stays cleared; the replay can therefore clear incrementally, each result once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ._common import check_int, report_overflow
from .base import CLEARED, KEPT, Engine, Policy, register_policy


def _typed(name: str, value: Any, types: tuple[str, ...]) -> tuple[str, int]:
    """Normalise ``N`` or ``{"type": t, "value": N}`` to ``(t, N)``; ValueError naming the fix."""
    if isinstance(value, dict):
        if set(value) != {"type", "value"} or value["type"] not in types:
            raise ValueError(f"parameter {name!r} must be an integer or "
                             f"{{'type': one of {list(types)}, 'value': integer}}, not {value!r}")
        check_int(name, value["value"])
        return value["type"], value["value"]
    check_int(name, value)
    return types[0], value


@dataclass(slots=True)
class _ClearingState:
    trigger: tuple[str, int]  # (input_tokens | tool_uses, N)
    keep: int  # the newest tool uses never cleared
    at_least: int  # clear_at_least, in tokens (0: no minimum)
    excluded: frozenset[str]  # tools whose uses and results are never cleared
    inputs_for: frozenset[str] | None  # the tools whose call inputs are cleared; None: every tool
    clear_inputs: bool
    scan: int = 0  # history scanned up to here
    tools: list[int] = field(default_factory=list)  # tool-result seqs, oldest first
    eligible: int = 0  # tools[:eligible] are older than the `keep` newest
    gain: int = 0  # tokens clearing every eligible use frees, cleared or not (for clear_at_least)
    pending: list[int] = field(default_factory=list)  # eligible messages not cleared yet (results, then call inputs)
    waiting: dict[int, int] = field(default_factory=dict)  # group -> its tool results not yet eligible
    blocked: set[int] = field(default_factory=set)  # groups whose call inputs must stay (an excluded tool)


@register_policy
class ToolResultClearing(Policy):
    name = "tool_result_clearing"
    description = "clear old tool results to a placeholder past a trigger (Anthropic clear_tool_uses_20250919)"
    as_of = "2025-11-01"
    source = ("Anthropic docs, Context editing: clear_tool_uses_20250919 "
              "(https://docs.claude.com/en/docs/build-with-claude/context-editing)")
    defaults: ClassVar[dict[str, Any]] = {
        "trigger": {"type": "input_tokens", "value": 100_000},
        "keep": {"type": "tool_uses", "value": 3},
        "clear_at_least": None,
        "exclude_tools": None,
        "clear_tool_inputs": False,
    }

    def params(self, given: dict[str, Any] | None) -> dict[str, Any]:
        p = super().params(given)
        _typed("trigger", p["trigger"], ("input_tokens", "tool_uses"))
        _typed("keep", p["keep"], ("tool_uses",))
        if p["clear_at_least"] is not None:
            _typed("clear_at_least", p["clear_at_least"], ("input_tokens",))
        ex = p["exclude_tools"]
        if ex is not None and not (isinstance(ex, (list, tuple)) and all(isinstance(t, str) for t in ex)):
            raise ValueError(f"parameter 'exclude_tools' must be a list of tool names, not {ex!r}")
        cti = p["clear_tool_inputs"]
        if not isinstance(cti, bool) and not (isinstance(cti, (list, tuple)) and all(isinstance(t, str) for t in cti)):
            raise ValueError(f"parameter 'clear_tool_inputs' must be true, false or a list of tool names, not {cti!r}")
        return p

    def start(self, eng: Engine, p: dict) -> None:
        cti = p["clear_tool_inputs"]
        eng.set_policy_state(_ClearingState(
            trigger=_typed("trigger", p["trigger"], ("input_tokens", "tool_uses")),
            keep=_typed("keep", p["keep"], ("tool_uses",))[1],
            at_least=_typed("clear_at_least", p["clear_at_least"], ("input_tokens",))[1]
            if p["clear_at_least"] is not None else 0,
            excluded=frozenset(p["exclude_tools"] or ()),
            inputs_for=None if cti is True else frozenset(cti or ()),
            clear_inputs=bool(cti)))

    def _gain(self, eng: Engine, i: int) -> int:
        if eng.precleared[i]:
            return 0
        t = eng.tokens[i]
        return t - min(t, eng.inp.placeholder_tokens)

    def _scan(self, eng: Engine, st: _ClearingState) -> None:
        inp = eng.inp
        roles, group, names = inp.roles, eng.group, inp.tool_names
        tools, waiting = st.tools, st.waiting
        for i in range(st.scan, eng.end):
            if roles[i] != "tool":
                continue
            tools.append(i)
            g = group[i]
            waiting[g] = waiting.get(g, 0) + 1
            name = names[i] if i < len(names) else None
            if name in st.excluded or (st.inputs_for is not None and name not in st.inputs_for):
                st.blocked.add(g)
        st.scan = eng.end
        inp_ok = st.clear_inputs
        while st.eligible < len(tools) - st.keep:
            i = tools[st.eligible]
            st.eligible += 1
            name = names[i] if i < len(names) else None
            if name not in st.excluded:
                st.pending.append(i)
                st.gain += self._gain(eng, i)
            g = group[i]
            waiting[g] -= 1
            if inp_ok and waiting[g] == 0 and g not in st.blocked:
                for m in eng.members(i):
                    if roles[m] == "assistant":
                        st.pending.append(m)
                        st.gain += self._gain(eng, m)

    def fit(self, eng: Engine, step: int, p: dict) -> int:
        st = eng.policy_state(_ClearingState)
        self._scan(eng, st)
        kind, value = st.trigger
        raw = eng.history + eng.fixed()
        fired = (raw if kind == "input_tokens" else len(st.tools)) > value
        if fired and st.pending:
            if st.gain >= st.at_least:
                before = eng.total()
                results = inputs = 0
                for m in st.pending:
                    if eng.state[m] == KEPT:
                        eng.move(m, CLEARED)
                        if eng.inp.roles[m] == "tool":
                            results += 1
                        else:
                            inputs += 1
                if results or inputs:
                    eng.event("clearing", policy=self.name, recorded=False, count=results,
                              inputs_cleared=inputs, first=min(st.pending), last=max(st.pending),
                              tokens_cleared=before - eng.total(), input_tokens=raw,
                              trigger={"type": kind, "value": value})
                st.pending = []
            else:
                eng.event("clearing_skipped", policy=self.name, reason="clear_at_least",
                          would_clear=st.gain, clear_at_least=st.at_least, input_tokens=raw)
        return report_overflow(eng, "the window after clearing old tool results would still")
