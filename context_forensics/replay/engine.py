"""Replay: for every model call of a session, the window a model would have had.

Builds a ``ReplayInput`` (token counts and structure, counted once per unique text) from the
stored messages, runs the model's policy over it, and adds what the log itself recorded:
recorded prompt tokens per call (fidelity: recorded vs computed) and recorded compactions.
Results are cached in the store, keyed by the session's content, the model spec and the
policy parameters, so a repeated replay is a lookup.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from ..version import __version__
from ..config.settings import Config
from ..hashing import content_hash
from ..config.models import ModelSpec, resolve_model, same_model, session_spec, spec_notes
from .policies import IN_WINDOW, STATE_NAMES, ReplayInput, StepResult, get_policy
from ..records import KIND_MESSAGE
from ..store.db import Store, StoredMessage

REPLAY_VERSION = 1
# Bump when what a stored replay holds changes, so older snapshots stop matching (2: window
# parts per step, ratios only from 3 calls).
CACHE_SCHEMA = 2
LOST_STATES = ("evicted", "cleared", "summarized")

_gc_lock = threading.Lock()
_gc_holders = 0  # replays running with the collector paused
_gc_resume = False  # whether the collector was enabled when the first of them paused it


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a replay builds its objects.

    A replay of a long session creates tens of thousands of small objects (messages, plans,
    per-step results and records) that all stay alive until it returns; the collector's
    generation scans over them free nothing and took about a sixth of a replay. Reference
    counting frees memory as usual, and the collector catches up once the last replay in
    progress (nested or in another thread) ends.
    """
    global _gc_holders, _gc_resume
    with _gc_lock:
        if _gc_holders == 0:
            _gc_resume = gc.isenabled()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_resume:
                gc.enable()


@dataclass
class Replay:
    session_id: str
    model: ModelSpec
    policy: str
    params: dict[str, Any]
    steps: list[dict[str, Any]]
    summary: dict[str, Any]
    token_kind: str  # exact | estimated | calibrated: how window tokens were computed
    flags: list[str] = field(default_factory=list)
    fidelity: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        m = self.model
        return {
            "model": m.name,
            "policy": self.policy,
            "params": self.params,
            "tokenizer": m.tokenizer,
            "token_kind": self.token_kind,
            "limit": m.context_limit,
            "reserved_output": m.reserved_output,
            "budget": m.budget,
            # where limit and reserved output come from: the table entry (and how the name
            # matched it), assumed limits, and the recorded call that bounded them
            "entry": {"name": m.entry or None, "match": m.match, "rule": m.rule or None, "as_of": m.as_of or None,
                      "source": m.source, "origin": m.origin},
            "assumed": m.assumed_dict(),
            "bound": m.bound,
            "model_notes": spec_notes(m),
            "steps": self.steps,
            "summary": self.summary,
            "fidelity": self.fidelity,
            "flags": self.flags,
        }


# ---------------------------------------------------------------- structure


def build_input(messages: Sequence[StoredMessage], spec: ModelSpec, per_message: np.ndarray,
                fixed: np.ndarray, placeholder_tokens: int = 8, raw: np.ndarray | None = None,
                same_model_of: Any = None) -> ReplayInput:
    """The policy's view of a session, in one pass over the messages.

    ``raw``: the tokenizer's figures when ``per_message`` is calibrated (see ReplayInput).
    ``same_model_of(m)``: whether assistant message m is an answered call of ``spec``'s model
    (``ReplayInput.answered``); None: no call is.

    Groups: an assistant message with tool calls and the results answering them share the
    assistant message's seq as group id; tool names come from the call a result answers.
    """
    n = len(messages)
    group = np.arange(n, dtype=np.int64)
    roles: list[str] = []
    kinds: list[str] = []
    names: list[str | None] = []
    steps: list[int] = []
    recorded: list[int | None] = []
    answered: list[bool] = []
    owner: dict[str, tuple[int, str]] = {}  # tool call id -> (assistant seq, tool name)
    for i, sm in enumerate(messages):
        m = sm.message
        roles.append(m.role)
        kinds.append(m.kind)
        name = None
        if m.role == "tool":
            found = owner.get(m.tool_call_id) if m.tool_call_id else None
            if found is not None:
                group[i] = found[0]
            name = m.name or (found[1] if found else None)
        names.append(name)
        for call in m.tool_calls:
            if call.id:
                owner[call.id] = (i, call.name)
        if m.role == "assistant" and m.kind == KIND_MESSAGE:
            steps.append(i)
            recorded.append(m.usage.prompt_tokens if m.usage else None)
            answered.append(bool(same_model_of and same_model_of(m) and is_answered(m)))
    return ReplayInput(
        tokens=per_message.astype(np.int64),
        roles=tuple(roles),
        kinds=tuple(kinds),
        group=group,
        steps=np.array(steps, dtype=np.int64),
        limit=spec.context_limit,
        reserved=spec.reserved_output,
        fixed=fixed.astype(np.int64),
        tool_names=tuple(names),
        placeholder_tokens=placeholder_tokens,
        recorded_prompt=tuple(recorded),
        raw_tokens=None if raw is None else raw.astype(np.int64),
        answered=tuple(answered),
    )


def is_answered(m: Any) -> bool:
    """Whether the log shows a model call accepted and answered: the provider's count of its
    prompt tokens and a reply (an error or a harness's synthetic notice is no answer)."""
    u = m.usage
    if u is None or not u.prompt_tokens:
        return False
    if isinstance(m.meta, dict) and (m.meta.get("error") or m.meta.get("synthetic") or m.meta.get("is_error")):
        return False
    return bool((u.completion_tokens or 0) > 0 or m.text or m.tool_calls)


def bound_by_usage(spec: ModelSpec, messages: Sequence[StoredMessage], answered_here: Any) -> ModelSpec:
    """``spec`` with the budget the session's answered calls prove.

    A call the provider accepted fit its window: its recorded prompt tokens were at most
    limit − the output it reserved. So the reserved output of this model in this session cannot
    have been more than limit − the largest answered prompt (a harness reserves the same for
    each call), and if that prompt is above the limit, the window was at least that prompt.
    ``answered_here(m)`` says whether an assistant message is such a call of ``spec``'s model.
    """
    best: tuple[int, int, int] | None = None  # (prompt tokens, step, seq)
    step = 0
    for sm in messages:
        m = sm.message
        if m.role != "assistant" or m.kind != KIND_MESSAGE:
            continue
        step += 1
        if answered_here(m) and (best is None or m.usage.prompt_tokens > best[0]):
            best = (int(m.usage.prompt_tokens), step, sm.seq)
    if best is None or best[0] <= spec.budget:
        return spec
    prompt, step, seq = best
    limit = spec.context_limit
    bound: dict[str, Any] = {"step": step, "message_seq": seq, "recorded_prompt_tokens": prompt,
                             "reserved_output": {"table": spec.reserved_output, "bound": max(0, limit - prompt)},
                             "limit": None}
    if prompt <= limit:
        return replace(spec, reserved_output=limit - prompt, bound=bound)
    bound["limit"] = {"table": limit, "bound": prompt}
    return replace(spec, reserved_output=0, context_limit=prompt, bound=bound)


def message_steps(messages: Sequence[Any]) -> list[tuple[int | None, int | None]]:
    """For each message (``Message`` or stored), (the step it makes, the step it joins).

    The first is the model call an assistant message records (steps numbered from 1, as in a
    replay); the second the first step whose window holds the message (None after the last
    call). ``show`` prints them so that a seq leads to ``replay --at``.
    """
    msgs = [getattr(m, "message", m) for m in messages]
    at = [i for i, m in enumerate(msgs) if m.role == "assistant" and m.kind == KIND_MESSAGE]
    joins = np.searchsorted(np.array(at, dtype=np.int64), np.arange(len(msgs)), side="right") + 1
    makes = {seq: k for k, seq in enumerate(at, start=1)}
    return [(makes.get(i), int(j) if j <= len(at) else None) for i, j in enumerate(joins.tolist())]


# ---------------------------------------------------------------- replay


def _policy_params(spec: ModelSpec, policy: str, params: dict[str, Any] | None) -> dict[str, Any]:
    p = dict(spec.params) if policy == spec.policy else {}
    p.update(params or {})
    p.setdefault("preserve_system", spec.preserve_system)
    return p


@dataclass
class Prepared:
    """Everything a replay of one session under one model and policy starts from."""

    session: dict[str, Any]
    spec: ModelSpec
    policy: str
    params: dict[str, Any]
    messages: list[StoredMessage]
    counted: Any  # tokens.SessionCounts
    inp: ReplayInput

    def run(self, upto: int | None = None) -> tuple[list[StepResult], np.ndarray]:
        return get_policy(self.policy).run(self.inp, self.params, upto=upto)


def prepare(store: Store, session_id: str, model: str | ModelSpec | None = None, *,
            config: Config | None = None, policy: str | None = None,
            params: dict[str, Any] | None = None) -> Prepared:
    """Resolve the model and policy, count the session's tokens, build the policy input."""
    return _prepare(store, session_id, *_resolve(store, session_id, model, config, policy, params), config=config)


def resolve_spec(session: dict[str, Any], model: str | ModelSpec | None, config: Config | None) -> ModelSpec:
    """The spec a replay of ``session`` (a session row) under ``model`` starts from: the named
    model, or by default the recorded one, or assumed limits that every output labels. (A
    replay then bounds it by the session's answered calls: ``bound_by_usage``.)"""
    if model is None:
        return session_spec(session.get("model"), config)
    return model if isinstance(model, ModelSpec) else resolve_model(model, config)


def model_notes_for(store: Store, session_id: str, model: str | ModelSpec | None,
                    config: Config | None) -> list[str]:
    """What a view of a replay-derived figure says about the limits it rests on (``spec_notes``),
    for views that do not hold the replay itself (drift, diverge)."""
    return spec_notes(resolve_spec(store.session(session_id), model, config))


def _resolve(store: Store, session_id: str, model: str | ModelSpec | None, config: Config | None,
             policy: str | None, params: dict[str, Any] | None) -> tuple[dict, ModelSpec, str, dict[str, Any]]:
    """The session row, the model spec (default: the recorded model), the policy (default: the
    model's) and its validated parameters."""
    from ..errors import UsageError

    session = store.session(session_id)
    spec = resolve_spec(session, model, config)
    policy = policy or spec.policy
    try:
        p = get_policy(policy).params(_policy_params(spec, policy, params))
    except ValueError as e:
        raise UsageError(str(e)) from None
    return session, spec, policy, p


def _prepare(store: Store, session_id: str, session: dict, spec: ModelSpec, policy: str,
             p: dict[str, Any], *, config: Config | None = None) -> Prepared:
    from ..tokens.labels import CALIBRATED  # tokenizers load lazily
    from ..tokens.fidelity import count_session

    with gc_paused():
        messages = store.messages(session_id)
        # Calls the log shows answered under this replay's model bound its budget, and were no
        # overflow whatever the estimate says (a what-if under another model has none). Replaying
        # the log's own record of its own model, every answered call is one (a session that
        # switched models sent some to another window: the replay says so in its flags).
        recorded = session.get("model")
        same: dict[str | None, bool] = {}

        def answered_here(m: Any) -> bool:
            name = m.model or recorded
            if name not in same:
                same[name] = same_model(name, spec, config)
            return same[name] and is_answered(m)

        own_record = policy == "recorded" and same_model(recorded, spec, config)
        spec = bound_by_usage(spec, messages, answered_here)
        counted = count_session(messages, spec, store=store)
        raw = counted.computed.tokens if counted.kind == CALIBRATED else None
        inp = build_input(messages, spec, counted.per_message, counted.fixed, raw=raw,
                          same_model_of=is_answered if own_record else answered_here)
    return Prepared(session, spec, policy, p, messages, counted, inp)


@dataclass
class Timeline:
    """Each message's state at every step, from a policy run, without an n × m matrix.

    ``joins[i]`` is the first step (1-based) whose history holds message i (0: never);
    ``changes[i]`` the (step, state) transitions after that. ``states(i)`` expands one message
    to an int8 array over steps, which is what fact tracking needs for a few messages.
    """

    steps: np.ndarray  # message seq of each step
    joins: np.ndarray
    changes: dict[int, list[tuple[int, int]]]
    results: list[StepResult]

    @classmethod
    def from_results(cls, inp: ReplayInput, results: list[StepResult]) -> "Timeline":
        from .policies import STATE_NAMES as names

        code = {v: k for k, v in names.items()}
        steps = inp.steps[: len(results)]
        # message i joins at the first step whose seq is greater than i
        joins = np.searchsorted(steps, np.arange(inp.n), side="right") + 1
        joins[joins > len(steps)] = 0
        changes: dict[int, list[tuple[int, int]]] = {}
        for r in results:
            for state, seqs in r.new.items():
                for sq in seqs:
                    changes.setdefault(sq, []).append((r.step, code[state]))
        return cls(steps, joins, changes, results)

    def states(self, i: int) -> np.ndarray:
        """Message i's state at steps 1..m (NOT_YET before it joins)."""
        from .policies import KEPT, NOT_YET

        out = np.full(len(self.steps), NOT_YET, dtype=np.int8)
        j = int(self.joins[i])
        if j == 0:
            return out
        out[j - 1:] = KEPT
        for step, state in self.changes.get(i, []):
            out[step - 1:] = state
        return out


def replay_session(
    store: Store,
    session_id: str,
    model: str | ModelSpec | None = None,
    *,
    config: Config | None = None,
    policy: str | None = None,
    params: dict[str, Any] | None = None,
    alert: float = 0.9,
    use_cache: bool = True,
) -> Replay:
    """Replay one session under one model (default: the session's recorded model)."""
    session, spec, policy, p = _resolve(store, session_id, model, config, policy, params)
    key = content_hash({"v": REPLAY_VERSION, "ctxf": __version__, "cache": CACHE_SCHEMA,
                        "session": session["content_hash"], "spec": spec.to_dict(), "policy": policy,
                        "params": p, "alert": alert})
    if use_cache:
        cached = store.replay_lookup(key)
        if cached is not None:
            return _from_cache(cached, spec)
    with gc_paused():
        rep = _replay(session_id, _prepare(store, session_id, session, spec, policy, p, config=config), p, alert)
    if use_cache:
        store.replay_save(key, session_id, spec.name, policy, rep.to_dict())
    return rep


def _replay(session_id: str, prep: Prepared, params: dict[str, Any], alert: float) -> Replay:
    """Run a prepared replay into its per-step records, summary and fidelity.

    A function of its own so that everything but the result is freed on return, before the
    collector resumes (see ``gc_paused``): it then has only the result left to look at.
    """
    results, _ = prep.run()
    counted, inp, spec = prep.counted, prep.inp, prep.spec
    steps = step_dicts(results, inp, spec, alert, counted.kind, counted)
    fidelity = counted.fidelity(inp)
    errors = {f["step"]: f for f in (fidelity or {}).get("steps", [])}
    for st in steps:  # recorded vs computed, on the step itself
        f = errors.get(st["step"])
        if f is None:  # no recorded call at this step
            st["computed_prompt_tokens"] = None
            st["prompt_error"] = None
            st["prompt_check"] = None
        elif f.get("calibrated") is not None:  # predicted by a calibration that did not see this call
            st["computed_prompt_tokens"] = f["calibrated"]
            st["prompt_error"] = f.get("calibrated_error")
            st["prompt_check"] = "held_out"
        elif f.get("fitted"):
            # The calibration was fitted on this call: there is no independent figure to set
            # beside the recorded one, and the tokenizer's count of what the log holds is no
            # measurement of the prompt (a compaction call's log holds 2% of what it sent).
            st["computed_prompt_tokens"] = None
            st["prompt_error"] = None
            st["prompt_check"] = "fitted"
        else:
            st["computed_prompt_tokens"] = f.get("computed")
            st["prompt_error"] = f.get("error")
            st["prompt_check"] = "computed"
    flags = list(counted.flags)
    over = [st for st, ok in zip(steps, inp.answered) if ok and st["window_tokens"] > spec.budget
            and not st["overflow"]]
    if over:  # no overflow (the calls were answered), but the figures disagree: say where
        flags.append(f"{len(over)} answered call(s) over this replay's budget of {spec.budget:,} (first: step "
                     f"{over[0]['step']}, {over[0]['window_tokens']:,}): the log shows them accepted, so the "
                     f"estimate is off or they ran under another model's window; none is an overflow")
    return Replay(session_id=session_id, model=spec, policy=prep.policy, params=params, steps=steps,
                  summary=summarize(steps, alert), token_kind=counted.kind, flags=flags,
                  fidelity=fidelity)


# What each part of a window is, in the order a window lists them (``step_dicts``' "parts").
PART_KINDS = ("messages", "cleared_placeholders", "compaction_summary", "tool_definitions", "framing",
              "not_in_log", "calibration_scale")
# The event that moves a message into each lost state.
_LEFT_BY = {"evicted": "eviction", "cleared": "clearing", "summarized": "compaction"}


def _step_parts(r: StepResult, j: int, counted: Any) -> dict[str, int]:
    """Step j+1's window tokens split into its parts; they add up to ``window_tokens`` exactly.

    Messages and placeholders are the tokenizer's figures (the engine sums them beside its
    own, possibly calibrated, total); the fixed part splits into tool definitions, framing and
    the calibration's offset; what is left is the calibration's scale (0 when no ratio is
    applied).
    """
    tools, framing, hidden = counted.fixed_parts(j)
    parts = {"messages": r.kept_tokens, "cleared_placeholders": r.cleared_tokens, "compaction_summary": r.extra,
             "tool_definitions": tools, "framing": framing, "not_in_log": hidden}
    parts["calibration_scale"] = r.window_tokens - sum(parts.values())
    return parts


def _offset_words(cal: Any) -> str:
    from ..tokens.calibration import CAL_OFFSET

    if cal.n == 1:
        return cal.rests_on
    if cal.method == CAL_OFFSET:
        return "offset " + cal.rests_on
    return f"offset + ×{cal.ratio:.3g} " + cal.rests_on


def window_parts(parts: dict[str, int], j: int, counted: Any, policy: str, counts: dict[str, int],
                 message_figure: str) -> list[dict[str, Any]]:
    """A step's parts as labelled rows: kind, label, tokens and the kind of figure each is."""
    step = counted.steps[j] if counted is not None and counted.steps else None
    cal = counted.calibration_at(j) if counted is not None else None
    fixed_kind = step.fixed_kind if step is not None else message_figure
    n_kept = counts.get("kept", 0) + counts.get("outside_local", 0)
    labels = {
        "messages": f"{n_kept} message(s) in the window",
        "cleared_placeholders": f"{counts.get('cleared', 0)} cleared tool result(s): the placeholder the model sees",
        "compaction_summary": f"compaction summary (simulated by {policy})",
        "tool_definitions": f"tool definitions ({step.n_tools if step else 0} tools, in the log)",
        "framing": "framing / reply priming",
    }
    figures = {"messages": message_figure, "cleared_placeholders": message_figure,
               "compaction_summary": "estimated", "tool_definitions": fixed_kind, "framing": fixed_kind,
               "not_in_log": "calibrated", "calibration_scale": "calibrated"}
    rows = []
    for kind in PART_KINDS:
        tokens = parts[kind]
        if not tokens and kind != "messages":
            continue
        if kind == "not_in_log":
            if cal is None:
                label = "not in the log"
            elif tokens >= 0:
                label = (f"not in the log (harness system prompt / tools), ≈{tokens:,} by calibration "
                         f"({_offset_words(cal)})")
            else:
                label = (f"calibration offset: the log's recorded prompt is {-tokens:,} below the "
                         f"tokenizer's count ({_offset_words(cal)})")
        elif kind == "calibration_scale":
            label = (f"calibration scale ×{cal.ratio:.3g} ({cal.rests_on})" if cal is not None and cal.ratio != 1
                     else "calibration scale (the ratio the fit implies at this call)" if cal is not None
                     else "not accounted for")
        else:
            label = labels[kind]
        rows.append({"kind": kind, "label": label, "tokens": int(tokens), "figure": figures[kind]})
    return rows


def window_at(store: Store, session_id: str, step: int, model: str | ModelSpec | None = None, *,
              config: Config | None = None, policy: str | None = None,
              params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The exact window of one step: each history message with its state, tokens and text,
    and every part of the window (messages, tool definitions, framing, what calibration adds)
    as a row; ``window_parts`` add up to the step's ``window_tokens``.

    A message's ``tokens`` is the tokenizer's figure (per-message framing included), never a
    calibrated one; ``window_tokens`` is what it takes in this window (a cleared one its
    placeholder, a lost one 0). ``step`` is the model call an assistant message makes,
    ``joined_step`` the first step whose window holds the message; a lost message says at which
    step it left (``left_step``) and by which event (``left_by``).
    """
    from ..errors import UsageError
    from ..tokens.labels import ESTIMATED, EXACT

    prep = prepare(store, session_id, model, config=config, policy=policy, params=params)
    inp, counted = prep.inp, prep.counted
    if not 1 <= step <= len(inp.steps):
        raise UsageError(f"step {step} is out of range: this session has {len(inp.steps)} step(s)",
                         hint="steps are model calls, numbered from 1")
    results, states = prep.run(upto=step)
    r = results[-1]
    left: dict[int, tuple[int, str]] = {}  # seq -> (step, state) of its last change
    for res in results:
        for state, seqs in res.new.items():
            for sq in seqs:
                left[sq] = (res.step, state)
    raw = counted.computed.tokens
    estimated = counted.computed.estimated
    joins = np.searchsorted(inp.steps[:step], np.arange(r.seq), side="right") + 1
    step_of = {int(q): k for k, q in enumerate(inp.steps[:step].tolist(), start=1)}  # the call a message makes
    rows = []
    estimated_in_window = False
    for sm in prep.messages[: r.seq]:
        m = sm.message
        st = int(states[sm.seq])
        name = STATE_NAMES[st]
        tokens = int(raw[sm.seq])
        if name in ("kept", "outside_local"):
            cost = tokens
        elif name == "cleared":
            cost = tokens if m.kind == "cleared_tool_result" else min(tokens, inp.placeholder_tokens)
        else:
            cost = 0
        if cost and estimated[sm.seq]:
            estimated_in_window = True
        row = {"seq": sm.seq, "role": m.role, "kind": m.kind, "name": m.name, "state": name,
               "tokens": tokens, "window_tokens": cost, "in_window": st in IN_WINDOW,
               "step": step_of.get(sm.seq), "joined_step": int(joins[sm.seq]), "left_step": None, "left_by": None,
               "text": m.text, "tool_calls": [c.to_dict() for c in m.tool_calls]}
        if name in LOST_STATES and sm.seq in left:
            at, _ = left[sm.seq]
            row["left_step"] = at
            event = next((e for e in results[at - 1].events if e["type"] == _LEFT_BY[name]), None)
            if event is not None:
                row["left_by"] = {"type": event["type"], "policy": event.get("policy"),
                                  "recorded": bool(event.get("recorded"))}
        rows.append(row)
    st_dict = step_dicts(results[-1:], inp, prep.spec, 0.9, counted.kind, counted)[-1]
    figure = ESTIMATED if estimated_in_window else EXACT
    parts = window_parts(st_dict["parts"], step - 1, counted, prep.policy, r.counts, figure)
    notes = [f for f in counted.flags if "nothing calibrates this replay" in f]
    return {"version": REPLAY_VERSION, "session": session_id, "model": prep.spec.name, "policy": prep.policy,
            "assumed": prep.spec.assumed_dict(), "model_notes": spec_notes(prep.spec),
            "step": st_dict, "window_parts": parts, "notes": notes, "messages": rows}


def step_dicts(results: list[StepResult], inp: ReplayInput, spec: ModelSpec, alert: float,
               kind: str, counted: Any = None) -> list[dict[str, Any]]:
    """Per-step JSON records: counts of each state, and the seqs that changed state at this step.

    ``evicted`` / ``cleared`` / ``summarized`` list the seqs that entered that state at this
    step (so the output stays linear in the session's length); the set at step k is their
    union over steps 1..k, and ``--at k`` prints it message by message. Given ``counted`` (the
    session's ``SessionCounts``), ``parts`` splits ``window_tokens`` into what it is made of
    (``PART_KINDS``; they add up to it exactly).
    """
    out = []
    limit, reserved, recorded_prompt = spec.context_limit, spec.reserved_output, inp.recorded_prompt
    for r in results:
        new = r.new
        util = round(r.window_tokens / limit, 4)
        d = {
            "step": r.step,
            "message_seq": r.seq,
            "window_tokens": r.window_tokens,
            "window_tokens_kind": kind,
            "history_tokens": r.history_tokens,
            "limit": limit,
            "reserved_output": reserved,
            "utilization": util,
            "alert": util >= alert,
            "counts": r.counts,
            "evicted": new.get("evicted", []),
            "cleared": new.get("cleared", []),
            "summarized": new.get("summarized", []),
            "outside_local": new.get("outside_local", []),
            "restored": new.get("kept", []),
            # most steps change nothing
            "newly_lost": sorted([s for k in LOST_STATES for s in new.get(k, ())]) if new else [],
            "events": r.events,
            "overflow": r.overflow,
            "recorded_prompt_tokens": recorded_prompt[r.step - 1] if recorded_prompt else None,
        }
        if counted is not None:
            d["parts"] = _step_parts(r, r.step - 1, counted)
        out.append(d)
    return out


def summarize(steps: list[dict[str, Any]], alert: float) -> dict[str, Any]:
    first_loss = peak = None
    peak_util = 0
    compactions, overflow, above, would_fail = [], [], [], []
    lost: set[int] = set()
    for s in steps:  # one pass: a replay has thousands of steps
        if s["newly_lost"]:
            if first_loss is None:
                first_loss = s["step"]
            lost.update(s["newly_lost"])
        util = s["utilization"] or 0
        if peak is None or util > peak_util:  # the first step at the peak
            peak, peak_util = s, util
        if s["events"]:
            compaction = fails = False
            for e in s["events"]:
                compaction = compaction or e["type"] == "compaction"
                fails = fails or bool(e.get("would_fail"))
            if compaction:
                compactions.append(s["step"])
            if fails:
                would_fail.append(s["step"])
        if s["overflow"] > 0:
            overflow.append(s["step"])
        if s["alert"]:
            above.append(s["step"])
    return {
        "steps": len(steps),
        "first_loss_step": first_loss,
        "peak_utilization": peak["utilization"] if peak else None,
        "peak_step": peak["step"] if peak else None,
        "peak_window_tokens": peak["window_tokens"] if peak else None,
        "alert_threshold": alert,
        "steps_above_alert": above,
        "compactions": len(compactions),
        "compaction_steps": compactions,
        "overflow_steps": overflow,
        "would_fail_steps": would_fail,
        "lost_messages": len(lost),
    }


def _from_cache(data: dict[str, Any], spec: ModelSpec) -> Replay:
    if data.get("bound"):  # the figures the session's answered calls bounded (bound_by_usage)
        spec = replace(spec, context_limit=data["limit"], reserved_output=data["reserved_output"], bound=data["bound"])
    return Replay(session_id=data.get("session_id", ""), model=spec, policy=data["policy"],
                  params=data["params"], steps=data["steps"], summary=data["summary"],
                  token_kind=data["token_kind"], flags=data.get("flags", []), fidelity=data.get("fidelity"))


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))
