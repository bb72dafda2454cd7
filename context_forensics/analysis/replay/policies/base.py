"""The contract every eviction policy keeps, and the incremental engine they share.

A replay walks a session's model calls (steps) in order. Before step ``j`` the messages
``[0, steps[j])`` are the history; a policy decides, for each, one state:

    KEPT           in the window as recorded
    EVICTED        dropped from the window
    CLEARED        still there, its content replaced by a short placeholder (tool results)
    SUMMARIZED     dropped, but carried by a compaction summary in the window
    OUTSIDE_LOCAL  in the window, but beyond a local (sliding-window) attention span:
                   only global-attention layers reach it. Not evicted.

The engine keeps a state per message and a running token total, so a whole session costs
O(messages + state changes) per policy, never O(messages²). Policies only move messages
between states through the engine; the engine records what changed at each step.

Invariants (property-tested): the window never exceeds ``budget`` (limit − reserved output)
except under ``reject``, which reports the overflow instead; an assistant message with tool
calls and the tool results answering it change state together (a *group*); system messages
stay when the policy preserves them; a replay is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import numpy as np

from ....plugins import GROUPS, Registry
from ....records import COMPACTION_EDIT_TYPES, MARKER_KINDS

NOT_YET = -1
KEPT = 0
EVICTED = 1
CLEARED = 2
SUMMARIZED = 3
OUTSIDE_LOCAL = 4
STATE_NAMES = {NOT_YET: "not_yet", KEPT: "kept", EVICTED: "evicted", CLEARED: "cleared",
               SUMMARIZED: "summarized", OUTSIDE_LOCAL: "outside_local"}
IN_WINDOW = (KEPT, CLEARED, OUTSIDE_LOCAL)  # states whose tokens count toward the window
LOST = (EVICTED, CLEARED, SUMMARIZED)  # states of a message the model no longer reads (whole)

_S = TypeVar("_S")


def is_compaction(event: dict[str, Any]) -> bool:
    """Whether a replay event is a compaction, in every count (a summary, ``max_compactions``, the
    views): one a policy simulated or the log recorded, of any record type (a boundary or summary,
    a history edit that is a compaction, truncation, condensing or compression:
    ``records.COMPACTION_EDIT_TYPES``), or a truncation the log did not record that the replay
    applied by the agent's own policy (``unrecorded_truncation`` that dropped messages)."""
    kind = event.get("type")
    if kind == "compaction":
        return True
    if kind == "history_edit":
        return event.get("edit") in COMPACTION_EDIT_TYPES
    return kind == "unrecorded_truncation" and bool(event.get("applied")) and bool(event.get("would_drop"))


def rewrites_only(event: dict[str, Any]) -> bool:
    """Whether an ``unrecorded_truncation`` event (the JSON type, a contract, stays) took nothing
    out: the agent's own policy the replay applied only rewrote messages in place (Cline's
    ContextManager rewriting duplicate file reads to a notice, the one rewrite modelled). What a
    person reads names it a rewrite, not a truncation."""
    return (event.get("type") == "unrecorded_truncation" and bool(event.get("applied"))
            and not event.get("would_drop") and bool(event.get("rewritten")))


@dataclass(frozen=True)
class ReplayInput:
    """What a policy sees of a session: per-message token counts and structure, no text.

    ``tokens[i]`` already includes message i's per-message overhead. ``group[i]`` is the
    atomic unit message i belongs to (an assistant message with tool calls and its tool
    results share one id); ``steps[j]`` is the seq of the assistant message of step j+1, so
    the context of that step is ``[0, steps[j])``. ``fixed[j]`` counts the tokens of step j+1
    that no policy can remove (reply priming, the tool schemas sent with that call).
    """

    tokens: np.ndarray  # int64[n]
    roles: tuple[str, ...]
    kinds: tuple[str, ...]
    group: np.ndarray  # int64[n]
    steps: np.ndarray  # int64[m]
    limit: int
    reserved: int = 0
    fixed: np.ndarray | None = None  # int64[m]; None means 0 for every step
    tool_names: tuple[str | None, ...] = ()  # per message: the tool a tool result answers
    placeholder_tokens: int = 0  # tokens of a cleared tool result's placeholder
    recorded_prompt: tuple[int | None, ...] = ()  # per step: recorded prompt tokens, if any
    # per step: the log shows the call accepted and answered under this replay's model, so its
    # window fit the real budget: no policy reports it as an overflow while its window is the
    # one the log recorded (see recorded.py, reject.py)
    answered: tuple[bool, ...] = ()
    # int64[n], the tokenizer's own figure of each message when ``tokens`` is calibrated
    # (scaled): a window's rows show these, and the scale gets a row of its own. None: ``tokens``.
    raw_tokens: np.ndarray | None = None
    # marker seq -> the recorded history edit it holds (records.HistoryEdit; ``recorded`` applies them)
    edits: dict[int, Any] = field(default_factory=dict)
    # per step: the recorded output tokens of that call, if any (an agent's trigger adds them to the
    # prompt: Claude Code, Pi, Cline, Codex compare prompt + output of the last call)
    recorded_output: tuple[int | None, ...] = ()
    # int64[n] or None: characters of each message's text and tool-call arguments (Claude Code
    # estimates the messages since its last call as characters / 4)
    chars: np.ndarray | None = None
    # 1-based step -> what the log did not record before that call (``unrecorded.Inferred``: the
    # recorded prompt fell with no edit recorded; what the agent's own policy took out)
    inferred: dict[int, Any] = field(default_factory=dict)
    # seq -> fraction of its tokens left once the agent rewrote it in place (Cline's duplicate
    # file reads): a CLEARED message costs that much, not a placeholder
    rewritten: dict[int, float] = field(default_factory=dict)
    # seq of a compaction boundary -> the tokens before it as the log records them (Claude Code's
    # compactMetadata.preTokens, Inspect's tokens_before): the compaction event carries it beside
    # the replay's own window figures
    recorded_before: dict[int, int] = field(default_factory=dict)
    # 1-based step -> (seqs the harness leaves out of that call and every later one, why), whatever
    # the policy (Pi's cut-off replies: ``unrecorded.left_out``); the engine applies them first
    left_out: dict[int, tuple[tuple[int, ...], str]] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def budget(self) -> int:
        return self.limit - self.reserved

    def is_system(self, i: int) -> bool:
        return self.roles[i] in ("system", "developer")


@dataclass
class StepResult:
    step: int  # 1-based
    seq: int  # message seq of the assistant message making this call
    window_tokens: int  # what the model sees: in-window messages + placeholders + summaries + fixed
    history_tokens: int  # the whole history before this call, as if nothing were removed
    counts: dict[str, int]  # kept / evicted / cleared / summarized / outside_local
    new: dict[str, list[int]] = field(default_factory=dict)  # state -> seqs that entered it now
    events: list[dict[str, Any]] = field(default_factory=list)
    overflow: int = 0  # tokens over budget (reject: the call would fail)
    # The parts of ``window_tokens`` a window's rows show: in-window messages (KEPT and
    # OUTSIDE_LOCAL) and cleared placeholders as the tokenizer counts them
    # (``ReplayInput.raw_tokens``), and the synthetic content (simulated compaction summaries).
    kept_tokens: int = 0
    cleared_tokens: int = 0
    extra: int = 0
    # Only on a run's last step: the events of the log's records after its last call (a
    # compaction written after the final answer), which no step's window shows.
    after_last_call: list[dict[str, Any]] = field(default_factory=list)
    # Only on a run's last step: the seqs in the window at the end of the session, once the records
    # after the last call are applied (what a log's own final window, Letta's in-context list, is to match).
    end_window: list[int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "message_seq": self.seq,
            "window_tokens": self.window_tokens,
            "history_tokens": self.history_tokens,
            **self.counts,
            "new": {k: v for k, v in self.new.items() if v},
            "events": self.events,
            "overflow": self.overflow,
        }


class Engine:
    """Per-message states and a running window total; policies act through it.

    ``state``, ``tokens``, ``group``, ``is_sys`` and ``precleared`` are plain lists indexed by
    seq: policies read and write them one message at a time, thousands of times per replay,
    and a list is several times cheaper per access than a numpy scalar.

    What a policy itself keeps over a run (a cursor, its thresholds) is its own typed state, set
    on the engine in ``Policy.start`` (``set_policy_state``) and read back by its class
    (``policy_state``): one per class, so a policy run under another (``goal_anchoring``'s
    ``under``) keeps its own beside it. A policy is one shared instance; its state is the run's.
    """

    def __init__(self, inp: ReplayInput):
        self.inp = inp
        n = inp.n
        self.state: list[int] = [NOT_YET] * n
        self.tokens: list[int] = np.asarray(inp.tokens, dtype=np.int64).tolist()
        self.group: list[int] = np.asarray(inp.group, dtype=np.int64).tolist()
        self.is_sys: list[bool] = [r in ("system", "developer") for r in inp.roles]
        # A marker (a compaction boundary, a history edit) is no text the model read: it is never lost.
        self.is_marker: list[bool] = [k in MARKER_KINDS for k in inp.kinds] if len(inp.kinds) == n else [False] * n
        self.window = 0  # tokens of messages in the window (KEPT + OUTSIDE_LOCAL + CLEARED placeholders)
        self.extra = 0  # tokens of synthetic content (compaction summaries)
        self.history = 0
        self.end = 0  # messages [0, end) are history
        self.step_index = 0  # 0-based index of the step being fitted
        self._fixed: list[int] = np.asarray(inp.fixed, dtype=np.int64).tolist() if inp.fixed is not None \
            else [0] * len(inp.steps)
        self._new: dict[str, list[int]] = {}
        self.events: list[dict[str, Any]] = []
        self.counts = {name: 0 for s, name in STATE_NAMES.items() if s != NOT_YET}
        # Group members (in seq order), for moving a tool call and its results together.
        self._members: dict[int, list[int]] = {}
        for i, g in enumerate(self.group):
            self._members.setdefault(g, []).append(i)
        self._first = [self._members[g][0] for g in self.group]  # first member of each message's group
        # A message the log already recorded as cleared shows the model its own (placeholder) text.
        self.precleared: list[bool] = [k == "cleared_tool_result" for k in inp.kinds] \
            if len(inp.kinds) == n else [False] * n
        # The tokenizer's figures of the in-window messages, brought up to date once per step
        # from the messages that changed state (``_sync_raw``), so the hot paths stay as they are.
        self._raw: list[int] = self.tokens if inp.raw_tokens is None \
            else np.asarray(inp.raw_tokens, dtype=np.int64).tolist()
        self._seen: list[int] = [NOT_YET] * n  # each message's state at the last snapshot
        self._seen_end = 0
        self.kept_raw = 0
        self.cleared_raw = 0
        self._policy_states: dict[type, object] = {}

    # -- a policy's own state

    def set_policy_state(self, state: _S) -> _S:
        """Keep a policy's state for this run (``Policy.start``), found again by its class."""
        self._policy_states[type(state)] = state
        return state

    def policy_state(self, kind: type[_S]) -> _S:
        """The state of class ``kind`` a policy set on this engine (``set_policy_state``)."""
        state = self._policy_states.get(kind)
        if not isinstance(state, kind):
            raise RuntimeError(f"no {kind.__name__} on this engine: the policy's start() sets it up before fit()")
        return state

    # -- growth

    def advance(self, end: int) -> None:
        """Messages up to ``end`` (exclusive) join the history, KEPT.

        A message whose group already left the window (a tool result arriving after its
        call was evicted or summarized) joins in its group's state, so a pair never splits.
        """
        state, tokens, first_of, counts = self.state, self.tokens, self._first, self.counts
        history, window, kept = self.history, self.window, 0
        for i in range(self.end, end):
            t = tokens[i]
            history += t
            first = first_of[i]
            if first < i and state[first] in (EVICTED, SUMMARIZED):
                s = state[first]
                state[i] = s
                counts[STATE_NAMES[s]] += 1
                self._new.setdefault(STATE_NAMES[s], []).append(i)
                continue
            state[i] = KEPT
            window += t
            kept += 1
        self.history, self.window, self.end = history, window, end
        counts["kept"] += kept

    # -- moves

    def members(self, i: int) -> list[int]:
        """Message i's group, limited to messages already in the history."""
        end = self.end
        return [m for m in self._members[self.group[i]] if m < end]

    def cost(self, i: int) -> int:
        """Tokens message i currently takes in the window."""
        s = self.state[i]
        if s == KEPT or s == OUTSIDE_LOCAL:
            return self.tokens[i]
        if s == CLEARED:
            return self._cleared(i, self.tokens[i])
        return 0

    def _cleared(self, i: int, tokens: int) -> int:
        """A cleared message's cost: its own text when the log cleared it, what is left of it
        when the agent rewrote it in place, else the placeholder."""
        if self.precleared[i]:
            return tokens
        if i in self.inp.rewritten:
            return int(round(tokens * self.inp.rewritten[i]))
        return min(tokens, self.inp.placeholder_tokens)

    def move(self, i: int, new_state: int) -> int:
        """Move one message; return the window tokens freed (negative if it grew). A marker never
        moves into a lost state (``movable``)."""
        state = self.state
        old = state[i]
        if old == new_state or (new_state in LOST and self.is_marker[i]):
            return 0
        # cost(i) before and after, without the calls in the common cases (a policy moves
        # thousands of messages per replay)
        before = self.tokens[i] if old == KEPT else self.cost(i)
        state[i] = new_state
        after = 0 if new_state == EVICTED or new_state == SUMMARIZED else self.cost(i)
        self.window += after - before
        self.counts[STATE_NAMES[old]] -= 1
        self.counts[STATE_NAMES[new_state]] += 1
        self._new.setdefault(STATE_NAMES[new_state], []).append(int(i))
        return before - after

    def movable(self, i: int) -> bool:
        """Whether message i can leave the window: anything but a marker (it holds no text)."""
        return not self.is_marker[i]

    def move_group(self, i: int, new_state: int) -> int:
        return sum(self.move(m, new_state) for m in self.members(i))

    def leave_out(self, step: int) -> None:
        """What the harness itself never sends again from this call on (``ReplayInput.left_out``):
        out of the window (EVICTED), whatever the policy, with a ``left_out`` event that says why."""
        seqs, why = self.inp.left_out.get(step, ((), ""))
        gone = [i for i in seqs if self.state[i] in IN_WINDOW]
        tokens = sum(self.cost(i) for i in gone)
        for i in gone:
            self.move(i, EVICTED)
        if gone:
            self.event("left_out", recorded=False, seqs=gone, count=len(gone), tokens=tokens, reason=why)

    def event(self, kind: str, **data: Any) -> None:
        self.events.append({"type": kind, **data})

    # -- reading

    def fixed(self) -> int:
        return self._fixed[self.step_index] if self._fixed else 0

    def total(self) -> int:
        """Tokens the model would see now: window messages, synthetic summaries, fixed overhead."""
        return self.window + self.extra + self.fixed()

    def _raw_cost(self, i: int, s: int) -> int:
        if s == KEPT or s == OUTSIDE_LOCAL:
            return self._raw[i]
        if s == CLEARED:
            return self._cleared(i, self._raw[i])
        return 0

    def _sync_raw(self, new: dict[str, list[int]]) -> None:
        """Bring ``kept_raw`` / ``cleared_raw`` up to date: every state change goes through
        ``advance`` or ``move``, which list what they touched, so only those are looked at."""
        seen, state = self._seen, self.state
        changed = set(range(self._seen_end, self.end))
        for seqs in new.values():
            changed.update(seqs)
        for i in changed:
            old, now = seen[i], state[i]
            if old == now:
                continue
            if old == CLEARED:
                self.cleared_raw -= self._raw_cost(i, old)
            else:
                self.kept_raw -= self._raw_cost(i, old)
            if now == CLEARED:
                self.cleared_raw += self._raw_cost(i, now)
            else:
                self.kept_raw += self._raw_cost(i, now)
            seen[i] = now
        self._seen_end = self.end

    def snapshot(self, step: int, seq: int, overflow: int = 0) -> StepResult:
        new, self._new = self._new, {}
        events, self.events = self.events, []
        for seqs in new.values():
            seqs.sort()
        self._sync_raw(new)
        fixed = self.fixed()
        # step, seq, window_tokens, history_tokens, counts, new, events, overflow, kept, cleared, extra
        return StepResult(step, seq, self.window + self.extra + fixed, self.history + fixed, dict(self.counts),
                          new, events, overflow, self.kept_raw, self.cleared_raw, self.extra)


_REGISTRY: Registry["Policy"] = Registry("policy", GROUPS["policy"])
_POLICIES = _REGISTRY.items  # name -> policy


def register_policy(cls: type["Policy"]) -> type["Policy"]:
    """Class decorator: add a policy to the registry under ``cls.name``."""
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise TypeError(f"{cls!r} is not a subclass of the replay Policy")
    _REGISTRY.add(getattr(cls, "name", None), cls())  # no name: the registry's ValueError
    return cls


def load_plugins() -> None:
    """Register the policies of the installed packages' ``ctxf.policies`` entry points (once)."""
    _REGISTRY.load_plugins(lambda cls: None if cls in {type(p) for p in _POLICIES.values()}
                           else register_policy(cls))  # type: ignore[arg-type]  # register_policy checks the class


class Policy:
    """An overflow behaviour. ``fit`` is called once per step after the history grew."""

    name: ClassVar[str]
    description: ClassVar[str]
    # When the behaviour was last checked against its provider's or framework's docs.
    as_of: ClassVar[str]
    source: ClassVar[str] = ""
    defaults: ClassVar[dict[str, Any]] = {}
    preserves_system: ClassVar[bool] = True

    def params(self, given: dict[str, Any] | None) -> dict[str, Any]:
        """Defaults overlaid with ``given``; unknown keys are a ValueError naming the allowed ones."""
        given = dict(given or {})
        unknown = set(given) - set(self.defaults) - {"preserve_system"}
        if unknown:
            raise ValueError(
                f"unknown parameter(s) {sorted(unknown)} for policy {self.name}; "
                f"allowed: {sorted(self.defaults) + ['preserve_system']}"
            )
        return {"preserve_system": True, **self.defaults, **given}

    def start(self, eng: Engine, p: dict[str, Any]) -> None:
        """Called once before the first step: set up the policy's own state (``Engine.set_policy_state``)."""

    def fit(self, eng: Engine, step: int, p: dict[str, Any]) -> int:
        """Bring the window within budget for this step; return the overflow left (0 if it fits)."""
        raise NotImplementedError

    def after_last_call(self, eng: Engine, p: dict[str, Any]) -> None:
        """Called once after the last step of a whole run, the messages after the last call in the
        history: a policy that reads the log's records (``recorded``) reports those (events)."""

    def run(self, inp: ReplayInput, params: dict[str, Any] | None = None,
            *, upto: int | None = None) -> tuple[list[StepResult], np.ndarray]:
        """Replay every step (or steps 1..upto); return the results and the final states."""
        p = self.params(params)
        eng = Engine(inp)
        self.start(eng, p)
        results = []
        for j, seq in enumerate(inp.steps.tolist(), start=1):
            if upto is not None and j > upto:
                break
            eng.step_index = j - 1
            eng.advance(seq)
            if inp.left_out:
                eng.leave_out(j)
            overflow = self.fit(eng, j, p)
            results.append(eng.snapshot(j, seq, overflow))
        if results and (upto is None or upto >= len(inp.steps)):
            states = np.array(eng.state, dtype=np.int8)  # the history of the last step, as before
            self.after_last_call(eng, p)
            results[-1].after_last_call = eng.events
            # (a policy that reads no records after the last call leaves the later messages NOT_YET: they join)
            results[-1].end_window = [i for i, s in enumerate(eng.state) if s in IN_WINDOW or s == NOT_YET]
            eng.events = []
            return results, states
        return results, np.array(eng.state, dtype=np.int8)


def registered() -> dict[str, "Policy"]:
    """The policies registered so far (``policies.policies()`` first imports every policy module)."""
    return dict(sorted(_POLICIES.items()))
