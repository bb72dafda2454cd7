"""Replay events in words, and runs of alike events folded into one range (the HTML report).

The words follow the terminal replay's labels (render/replay.py: "compaction (recorded)",
"truncation (recorded): 3 out", "overflow +1,234 ✗ would fail") and say the rest of what an
event records: which policy did what to which messages, the tokens before and after. A run of
steps whose events are alike (an overflow at each of 90 steps, by a growing number of tokens)
is one row, "steps 40–129 (90 steps)", with each figure given as the range it took.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

# Figures that add up over a run (a total), that mark its first or last message, or that vary
# (the range they took); anything else numeric is a range too.
_TOTALS = frozenset({"count", "removed", "summarized", "inputs_cleared", "tokens_cleared"})
_FIRSTS = frozenset({"first", "at", "removed_first"})
_LASTS = frozenset({"last", "removed_last"})
# What makes two events alike: the same kind, by the same policy, the same way.
_SHAPE = ("type", "policy", "recorded", "would_fail", "reason", "edit", "action", "source", "record", "preset",
          "applied", "rests_on")
_NUMBER = re.compile(r"\d[\d,]*")
# A history edit the log does not record but the agent's own code makes (``HistoryEdit`` figures
# ``rests_on``): labelled so, never "(recorded)".
EDIT_BY_CODE = "agent's code"


def _plural(figure: str, one: str) -> str:
    """``one`` or its plural, for a figure as shown (a range like "2–5" is plural)."""
    return one if figure == "1" else one + "s"


Fig = Callable[[str], str]


def _fig_of(e: dict[str, Any]) -> Fig:
    def fig(key: str) -> str:
        v = e.get(key)
        return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)
    return fig


def edit_label(e: dict[str, Any], fig: Fig | None = None) -> str:
    """A history edit's name: recorded by the log, or made by the agent's code (``rests_on``; one
    that takes nothing out, as Aider reloading its chat history, says no count)."""
    fig = fig or _fig_of(e)
    if e.get("rests_on"):
        return f"{e.get('edit', 'edit')} ({EDIT_BY_CODE})" + (f": {fig('removed')} out" if e.get("removed") else "")
    return f"{e.get('edit', 'edit')} (recorded): {fig('removed')} out"


def event_label(e: dict[str, Any], fig: Fig | None = None) -> str:
    """The event's name, as the terminal replay's events column has it."""
    fig = fig or _fig_of(e)
    kind = e["type"]
    if kind == "history_edit":
        return edit_label(e, fig)
    if kind in ("compaction", "clearing"):
        return kind + (" (recorded)" if e.get("recorded") else " (inferred)" if e.get("inferred") else " (simulated)")
    if kind == "overflow":
        return "overflow" + (" ✗ would fail" if e.get("would_fail") else "")
    if kind == "anchoring":
        return "anchoring (simulated)"
    if kind == "left_out":
        return left_out_label(e)
    if kind == "unrecorded_call":
        return UNRECORDED_CALL + (f" (ui entry {e['ui_index']})" if "ui_index" in e else "")
    if kind == "unrecorded_truncation":
        name = unrecorded_name(e)
        if name != TRUNCATION_NOT_RECORDED:
            return f"{name}: {_count(e.get('rewritten'))} rewritten"
        return f"{name}: {fig('removed') if 'removed' in e else _count(e.get('would_drop'))} out"
    return kind.replace("_", " ")


TRUNCATION_NOT_RECORDED = "truncation (not recorded)"
UNRECORDED_CALL = "then a model call the log does not record"


def left_out_label(e: dict[str, Any]) -> str:
    """A ``left_out`` event: what the harness never sends again (Pi's cut-off replies)."""
    return f"{e.get('count', 0):,} cut-off repl{'y' if e.get('count') == 1 else 'ies'} left out (not recorded)"


def unrecorded_name(e: dict[str, Any]) -> str:
    """What a person reads for an ``unrecorded_truncation`` event: a truncation, unless the agent's
    policy the replay applied only rewrote messages in place (``replay.rewrites_only``)."""
    from ..analysis.replay import rewrites_only

    if rewrites_only(e):
        return "duplicate file reads rewritten (not recorded)"
    return TRUNCATION_NOT_RECORDED


def _count(v: Any) -> str:
    return f"{len(v):,}" if isinstance(v, (list, tuple)) else "0"


def _unrecorded(e: dict[str, Any], fig: Fig) -> str:
    """An unrecorded truncation in words: the recorded fall, what the agent's policy names, and
    whether the replay applied it."""
    said = (f"the recorded prompt fell from {fig('recorded_before')} to {fig('recorded_after')} tokens "
            f"though {fig('tokens_added')} joined the history (≈{fig('tokens_gone')} gone), and the log "
            "records no edit")
    would = e.get("would_drop") or []
    rewritten = e.get("rewritten") or []
    policy = e.get("policy")
    if not policy:
        return said + ": no agent policy is modelled to say what left; the replay keeps the history"
    what = []
    if would:
        worth = f", {fig('would_drop_tokens')} tokens" if e.get("would_drop_tokens") is not None else ""
        what.append(f"{'took' if e.get('applied') else 'would have taken'} out {len(would):,} "
                    f"{_plural(str(len(would)), 'message')} ({_words(_ranges(would))}{worth})")
    if rewritten:
        what.append(f"rewrote {len(rewritten):,} duplicate file {_plural(str(len(rewritten)), 'read')} to a notice "
                    f"({_words(_ranges(rewritten))})")
    did = " and ".join(what) or "names nothing to take out"
    basis = f", {e['basis']}" if e.get("basis") else ""
    how = ("; the replay applies it" if e.get("applied")
           else "; not applied: the log holds no summary to put in their place")
    return f"{said}: {policy}'s policy{basis} {did}{how}"


def _ranges(seqs: list[int]) -> list[str]:
    """Sorted seqs as runs: [2, 3, 4, 9] -> ["2–4", "9"]."""
    out: list[str] = []
    start = prev = None
    for s in sorted(seqs):
        if prev is not None and s == prev + 1:
            prev = s
            continue
        if start is not None:
            out.append(str(start) if start == prev else f"{start}–{prev}")
        start = prev = s
    if start is not None:
        out.append(str(start) if start == prev else f"{start}–{prev}")
    return out


def _messages(e: dict[str, Any], fig: Fig, first: str = "first", last: str = "last") -> str:
    if e.get(first) is None:
        return ""
    a, b = fig(first), fig(last) if e.get(last) is not None else fig(first)
    return f" (message {a})" if a == b else f" (messages {a}–{b})"


def _logged_before(e: dict[str, Any], fig: Fig) -> str:
    """The tokens before a recorded compaction as the log records them, when it does."""
    if e.get("recorded_tokens_before") is None:
        return ""
    return f" ({fig('recorded_tokens_before')} tokens before, as the log records)"


def _window_figures(e: dict[str, Any], fig: Fig) -> str:
    """The replay's own window before and after an edit: its reconstruction, never the log's figure."""
    if e.get("tokens_before") is None or e.get("tokens_after") is None:
        return ""
    return f"; the replay's window: {fig('tokens_before')} → {fig('tokens_after')} tokens (estimated)"


def event_detail(e: dict[str, Any], fig: Fig | None = None) -> str:
    """What the event did, in words (never a dict)."""
    fig = fig or _fig_of(e)
    kind, policy = e["type"], e.get("policy") or "the policy"
    if kind == "eviction":
        how = "dropped the oldest" if policy in ("left_truncation", "sliding_window") else \
            "removed from the middle" if policy == "middle_out" else \
            "left out" if policy == "constraint_selection" else "evicted"
        why = f", to fit the {e['reason'].replace('_', ' ')}" if e.get("reason") else ""
        pins = (f", filling the budget newest first around its pins ({fig('pinned_kept')} of {fig('pinned')} "
                f"pinned kept)") if policy == "constraint_selection" and e.get("pinned") is not None else ""
        return f"{policy} {how} {fig('count')} {_plural(fig('count'), 'message')}{_messages(e, fig)}{why}{pins}"
    if kind == "anchoring":
        skipped = (f"; {len(e['skipped'])} pinned message(s) too long to restate ({_words(e['skipped'])})"
                   if e.get("skipped") else "")
        return (f"{policy} restates {fig('count')} more {_plural(fig('count'), 'message')}{_messages(e, fig)} at "
                f"every call from here ({fig('restated')} in all: the goal and the constraint statements), "
                f"{fig('anchor_tokens')} tokens of simulated text, over {e.get('under') or 'a truncation'}{skipped}")
    if kind == "pins_dropped":
        return (f"{policy}: {fig('count')} pinned {_plural(fig('count'), 'message')} ({_words(e.get('seqs') or [])}) "
                f"did not fit with the newest messages: left out, oldest pins first")
    if kind == "restored":
        return f"{policy} brought back {fig('count')} {_plural(fig('count'), 'message')}{_messages(e, fig)}"
    if kind == "overflow":
        said = e.get("message") or f"the window exceeds the budget by {fig('overflow')} tokens"
        return said + ("; the provider would reject this call" if e.get("would_fail") else "")
    if kind == "compaction":
        tokens = (f": {fig('tokens_before')} → {fig('tokens_after')} tokens"
                  if e.get("tokens_before") is not None and e.get("tokens_after") is not None else "")
        moved = f", {fig('summarized')} {_plural(fig('summarized'), 'message')} summarized" \
            if e.get("summarized") is not None else ""
        if e.get("recorded"):
            where = f" at message {fig('at')}" if e.get("at") is not None else ""
            return f"the log records a compaction{where}{_logged_before(e, fig)}{moved}{_window_figures(e, fig)}"
        summary = f"; summary {fig('summary_tokens')} tokens" if e.get("summary_tokens") is not None else ""
        if e.get("rolling"):
            return (f"{policy} folded {fig('summarized')} {_plural(fig('summarized'), 'message')}{_messages(e, fig)} "
                    f"into its running summary{tokens}; summary {fig('summary_tokens')} tokens (simulated: its size "
                    f"is an estimate)")
        preset = f" ({e['preset']})" if e.get("preset") else ""
        note = f" ({e['note']})" if e.get("note") else ""
        return f"{policy}{preset} summarized the history{tokens}{moved}{summary}{note}"
    if kind == "history_edit":
        parted = f"; {fig('parted_pairs')} tool call/result pair(s) split" if e.get("parted_pairs") else ""
        src = f" by {e['source']}" if e.get("source") else ""
        said = (f"the log does not record this {e.get('edit', 'history edit')}: the replay follows {e['rests_on']}; "
                f"at message {fig('at')}" if e.get("rests_on") else
                f"the log records a {e.get('edit', 'history edit')}{src} at message {fig('at')}")
        return (f"{said}"
                f"{_logged_before(e, fig)}: {fig('removed')} {_plural(fig('removed'), 'message')} "
                f"{e.get('action') or 'removed'}{_window_figures(e, fig)}{parted}")
    if kind == "clearing":
        what = f"{fig('count')} tool {_plural(fig('count'), 'result')}"
        if e.get("inputs_cleared"):
            what += f" and {fig('inputs_cleared')} tool {_plural(fig('inputs_cleared'), 'input')}"
        freed = f", {fig('tokens_cleared')} tokens freed" if e.get("tokens_cleared") is not None else ""
        who = "the log records" if e.get("recorded") else policy
        why = f": {e['reason']}" if e.get("reason") else ""
        return f"{who} cleared {what}{_messages(e, fig)}{freed}{why}"
    if kind == "clearing_skipped":
        return (f"{policy} would free only {fig('would_clear')} tokens, less than its clear_at_least of "
                f"{fig('clear_at_least')}: nothing cleared")
    if kind == "unrecorded_truncation":
        return _unrecorded(e, fig)
    if kind in ("outside_local", "inside_local"):
        moved = "moved outside" if kind == "outside_local" else "came back inside"
        return (f"{fig('count')} {_plural(fig('count'), 'message')}{_messages(e, fig)} {moved} the local attention "
                f"window of {fig('local_window')} tokens (still in the window for global layers)")
    said = e.get("message")
    rest = "; ".join(f"{k.replace('_', ' ')} {_words(v)}" for k, v in e.items() if k not in ("type", "message"))
    return "; ".join(x for x in (said, rest) if x)


def _words(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k.replace('_', ' ')} {_words(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(_words(x) for x in v)
    if isinstance(v, bool):
        return "yes" if v else "no"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _shape(e: dict[str, Any]) -> tuple:
    key = tuple(e.get(k) for k in _SHAPE)
    msg = e.get("message")
    return key + (_NUMBER.sub("#", msg) if isinstance(msg, str) else None,)


@dataclass
class Run:
    """Steps in a row (of one replay) whose events are alike."""

    steps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def first(self) -> int:
        return self.steps[0]["step"]

    @property
    def last(self) -> int:
        return self.steps[-1]["step"]

    def step_text(self) -> str:
        if len(self.steps) == 1:
            return f"step {self.first}"
        n, span = len(self.steps), self.last - self.first + 1
        return (f"steps {self.first}–{self.last} ({n} steps)" if n == span
                else f"{n} steps in {self.first}–{self.last}")

    def seq_text(self) -> str:
        a, b = self.steps[0]["message_seq"], self.steps[-1]["message_seq"]
        return str(a) if a == b else f"{a}–{b}"

    def lost(self) -> list[int]:
        return sorted({s for st in self.steps for s in st["newly_lost"]})

    def words(self) -> list[tuple[str, str]]:
        """(label, detail) of each event, its figures merged over the run."""
        out = []
        for i, e in enumerate(self.steps[0]["events"]):
            alike = [st["events"][i] for st in self.steps]
            fig = _run_fig(alike) if len(alike) > 1 else None
            detail = event_detail(_merged_message(e, alike, fig) if fig else e, fig)
            out.append((event_label(e, fig), detail))
        return out


def _run_fig(events: list[dict[str, Any]]) -> Fig:
    def fig(key: str) -> str:
        vals = [v for e in events if isinstance(v := e.get(key), int) and not isinstance(v, bool)]
        if not vals:
            return str(events[0].get(key))
        if key in _TOTALS:
            return f"{sum(vals):,}"
        if key in _FIRSTS:
            return f"{min(vals):,}"
        if key in _LASTS:
            return f"{max(vals):,}"
        lo, hi = min(vals), max(vals)
        return f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}"
    return fig


def _merged_message(e: dict[str, Any], events: list[dict[str, Any]], fig: Fig) -> dict[str, Any]:
    """An overflow's message with each of its figures as the range it took over the run."""
    msg = e.get("message")
    if not isinstance(msg, str):
        return e
    numbers = [[int(x.replace(",", "")) for x in _NUMBER.findall(ev["message"])] for ev in events]
    if len({len(n) for n in numbers}) != 1:
        return e
    ranges = iter([min(col), max(col)] for col in zip(*numbers))

    def sub(_: re.Match[str]) -> str:
        lo, hi = next(ranges)
        return f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}"
    return {**e, "message": _NUMBER.sub(sub, msg)}


def event_runs(steps: list[dict[str, Any]]) -> list[Run]:
    """The steps that have events, alike neighbours (no other event between them) folded into one run."""
    runs: list[Run] = []
    last_shape = None
    for st in steps:
        if not st["events"]:
            continue
        shape = tuple(_shape(e) for e in st["events"])
        if runs and shape == last_shape:
            runs[-1].steps.append(st)
        else:
            runs.append(Run([st]))
            last_shape = shape
    return runs
