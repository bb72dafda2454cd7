"""The replay engine: run a session's policy over its counted messages into per-step records.

Builds a ``ReplayInput`` (token counts and structure, counted once per unique text) from the
stored messages (``prepare``), runs the model's policy over it, and adds what the log itself
recorded: recorded prompt tokens per call (fidelity: recorded vs computed) and recorded
compactions (``replay_session``, ``step_dicts``, ``summarize``). Results are cached in the
store, keyed by the session's content, the model spec and the policy parameters, so a repeated
replay is a lookup. Which spec and policy a replay runs under is ``spec.py``'s; what a window
is made of, ``parts.py``'s.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ...config.models import ModelSpec, same_model, session_spec, spec_notes
from ...config.settings import Config
from ...hashing import content_hash
from ...records import KIND_COMPACTION_BOUNDARY, KIND_HISTORY_EDIT, KIND_MESSAGE, HistoryEdit, read_history_edit
from ...store.db import Store, StoredMessage
from ...version import __version__
from .captures import find_capture
from .parts import step_parts, window_lacks
from .policies import ReplayInput, StepResult, get_policy, is_compaction
from .spec import bound_by_usage, is_answered, resolve_replay
from .unrecorded import Unrecorded, infer

if TYPE_CHECKING:  # pragma: no cover
    from ...tokens.overhead import Captured

REPLAY_VERSION = 1
# Bump when what a stored replay holds changes, so older snapshots stop matching (2: window
# parts per step, ratios only from 3 calls; 3: recorded history edits, no affine calibration
# with a negative intercept; 4: implausible calibrations rejected, unrecorded truncations, compactions
# after the last call, a what-if's estimated overhead; 5: a result without a call id, or written as
# text, joins its call's group, ``tool_output.pair_tools``; 6: the fidelity lists rejected calibrations too;
# 7: a recorded compaction event carries the log's own tokens before, ``recorded_tokens_before``;
# 8: a marker is never lost; 9: what the harness never sends again is left out, ``left_out`` events;
# 10: ``window_lacks``, ``unrecorded_call`` events; 11: ``other_models``; 12: ``end_window``; 13: an ATIF
# handoff counted once; 14: a step's
# ``recorded_prompt_tokens_error``, the fidelity's ``recorded_rounding``).
CACHE_SCHEMA = 14
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
    """One session replayed under one model and policy: a record per step, their summary and the
    fidelity of the token figures; ``to_dict()`` is what ``ctxf replay --json`` prints."""

    session_id: str
    model: ModelSpec
    policy: str
    params: dict[str, Any]
    steps: list[dict[str, Any]]
    summary: dict[str, Any]
    token_kind: str  # exact | estimated | calibrated: how window tokens were computed
    flags: list[str] = field(default_factory=list)
    fidelity: dict[str, Any] | None = None
    # events of the log's records after its last call (a compaction after the final answer)
    after_last_call: list[dict[str, Any]] = field(default_factory=list)
    # a what-if's estimate of the part of each call the log does not hold (``fidelity.carry_overhead``)
    overhead: dict[str, Any] | None = None
    # what every window lacks that the model was sent and nothing stands in for (``parts.window_lacks``)
    lacks: list[dict[str, Any]] = field(default_factory=list)
    # the calls the log records under another model than this replay's (``other_models``)
    others: list[dict[str, Any]] = field(default_factory=list)
    # the window at the end of the session (after the records after the last call), as seq runs
    end_window: list[list[int]] | None = None

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
            "after_last_call": self.after_last_call,
            "overhead": self.overhead,
            "summary": self.summary,
            "fidelity": self.fidelity,
            "flags": self.flags,
            "window_lacks": self.lacks,
            "other_models": self.others,
            "end_window": self.end_window,
        }


# ---------------------------------------------------------------- structure


def build_input(messages: Sequence[StoredMessage], spec: ModelSpec, per_message: np.ndarray,
                fixed: np.ndarray, placeholder_tokens: int = 8, raw: np.ndarray | None = None,
                same_model_of: Any = None, unrecorded: Unrecorded | None = None,
                fmt: str | None = None) -> ReplayInput:
    """The policy's view of a session, in one pass over the messages.

    ``raw``: the tokenizer's figures when ``per_message`` is calibrated (see ReplayInput).
    ``same_model_of(m)``: whether assistant message m is an answered call of ``spec``'s model
    (``ReplayInput.answered``); None: no call is. ``unrecorded``: the edits the log did not record
    (``unrecorded.infer``).

    Groups: an assistant message with tool calls and the results answering them share the
    assistant message's seq as group id, the results paired as every analysis pairs them
    (``tool_output.pair_tools`` of the session's format ``fmt``: by call id, else the latest
    call's, a result written as user text too); tool names come from the call a result answers.
    """
    from ...tool_output import pair_tools

    pairs = pair_tools(messages, fmt)
    n = len(messages)
    group = np.arange(n, dtype=np.int64)
    roles: list[str] = []
    kinds: list[str] = []
    names: list[str | None] = []
    steps: list[int] = []
    recorded: list[int | None] = []
    outputs: list[int | None] = []
    chars = np.zeros(n, dtype=np.int64)
    answered: list[bool] = []
    edits: dict[int, HistoryEdit] = {}
    recorded_before: dict[int, int] = {}
    for i, sm in enumerate(messages):
        m = sm.message
        roles.append(m.role)
        kinds.append(m.kind)
        if m.kind == KIND_HISTORY_EDIT and (edit := read_history_edit(m.meta, i)) is not None:
            edits[i] = edit
        elif m.kind == KIND_COMPACTION_BOUNDARY and (before := _recorded_before(m.meta)) is not None:
            recorded_before[i] = before
        name = None
        answers = pairs.answers[i]
        if answers is not None:  # a result: it stays and leaves with its call
            group[i] = pairs.calls[answers].pos
        if m.role == "tool":
            name = m.name or (pairs.calls[answers].tool if answers is not None else None)
        names.append(name)
        chars[i] = len(m.text or "")
        for call in m.tool_calls:
            chars[i] += len(call.arguments)
        if m.role == "assistant" and m.kind == KIND_MESSAGE:
            steps.append(i)
            recorded.append(m.usage.prompt_tokens if m.usage else None)
            outputs.append(m.usage.completion_tokens if m.usage else None)
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
        edits=edits,
        recorded_output=tuple(outputs),
        chars=chars,
        inferred=dict(unrecorded.steps) if unrecorded is not None else {},
        rewritten=unrecorded.rewritten() if unrecorded is not None else {},
        recorded_before=recorded_before,
        left_out=dict(unrecorded.left_out) if unrecorded is not None else {},
    )


def _recorded_before(meta: Any) -> int | None:
    """The tokens before a compaction boundary as the log records them, or None."""
    if not isinstance(meta, dict):
        return None
    cm = c if isinstance(c := meta.get("compactMetadata"), dict) else {}
    for v in (cm.get("preTokens"), meta.get("preTokens"), meta.get("tokens_before")):
        if type(v) is int:
            return v
    return None


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
    config: Config | None = None

    def run(self, upto: int | None = None) -> tuple[list[StepResult], np.ndarray]:
        return get_policy(self.policy).run(self.inp, self.params, upto=upto)


def prepare(store: Store, session_id: str, model: str | ModelSpec | None = None, *,
            config: Config | None = None, policy: str | None = None,
            params: dict[str, Any] | None = None, overhead_from: str | None = None) -> Prepared:
    """Resolve the model and policy, count the session's tokens, build the policy input.
    ``overhead_from``: the capture whose system prompt and tools to add (``captures.find_capture``;
    default: one of the same agent version, if the store holds one; ``none``: none)."""
    session, spec, policy, p = resolve_replay(store, session_id, model, config, policy, params)
    return _prepare(store, session_id, session, spec, policy, p, config=config,
                    captured=find_capture(store, session, overhead_from))


def _prepare(store: Store, session_id: str, session: dict, spec: ModelSpec, policy: str,
             p: dict[str, Any], *, config: Config | None = None, captured: Captured | None = None) -> Prepared:
    from ...tokens.fidelity import carry_overhead, count_session
    from ...tokens.labels import CALIBRATED  # tokenizers load lazily

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
        # what the log did not record, under the session's own window (the agent's trigger is a share of it)
        unrec = infer(session, [sm.message for sm in messages], session_spec(recorded, config).context_limit)
        counted = count_session(messages, spec, store=store, drops=unrec.drops(), rewrites=unrec.rewrites(),
                                unfit=unrec.unfit, captured=captured)
        if counted.foreign_recorded:  # a what-if nothing calibrates: carry what the log does not hold
            own = count_session(messages, session_spec(recorded, config), store=store, drops=unrec.drops(),
                                rewrites=unrec.rewrites(), unfit=unrec.unfit)
            counted = carry_overhead(counted, own)
        raw = counted.computed.tokens if counted.kind == CALIBRATED else None
        inp = build_input(messages, spec, counted.per_message, counted.fixed, raw=raw,
                          same_model_of=is_answered if own_record else answered_here, unrecorded=unrec,
                          fmt=session.get("format"))
    return Prepared(session, spec, policy, p, messages, counted, inp, config)


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
    overhead_from: str | None = None,
) -> Replay:
    """Replay one session under one model (default: the session's recorded model); ``overhead_from``
    as ``prepare``'s."""
    session, spec, policy, p = resolve_replay(store, session_id, model, config, policy, params)
    captured = find_capture(store, session, overhead_from)
    # The session's id is part of the key: its content hash covers what the model read, not the
    # usage, models and records the replay also reads, so two sessions of the same text (one log
    # under two harnesses) would otherwise share a replay, recorded figures and session id included.
    key = content_hash({"v": REPLAY_VERSION, "ctxf": __version__, "cache": CACHE_SCHEMA, "id": session_id,
                        "session": session["content_hash"], "spec": spec.to_dict(), "policy": policy,
                        "params": p, "alert": alert, "capture": captured.source if captured is not None else None})
    if use_cache:
        cached = store.replay_lookup(key)
        if cached is not None:
            return _from_cache(cached, spec)
    with gc_paused():
        rep = _replay(session_id, _prepare(store, session_id, session, spec, policy, p, config=config,
                                           captured=captured), p, alert)
    if use_cache:
        store.replay_save(key, session_id, spec.name, policy, rep.to_dict())
    return rep


def replay_prepared(session_id: str, prep: Prepared, alert: float = 0.9,
                    results: list[StepResult] | None = None) -> tuple[Replay, list[StepResult]]:
    """Run a prepared replay (no cache): the ``Replay`` and the policy's per-step results, for
    a caller that needs both (``ctxf view`` turns the results into each message's intervals).
    ``results``: the policy's results of this very ``prep``, when the caller ran it already."""
    with gc_paused():
        if results is None:
            results, _ = prep.run()
        return _replay(session_id, prep, prep.params, alert, results), results


def _replay(session_id: str, prep: Prepared, params: dict[str, Any], alert: float,
            results: list[StepResult] | None = None) -> Replay:
    """Run a prepared replay into its per-step records, summary and fidelity.

    A function of its own so that everything but the result is freed on return, before the
    collector resumes (see ``gc_paused``): it then has only the result left to look at.
    """
    if results is None:
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
    for st in steps:  # a recorded prompt size the log prints rounded: a range, ± this
        u = prep.messages[st["message_seq"]].message.usage
        st["recorded_prompt_tokens_error"] = (u.prompt_tokens_error or 0) if u is not None and u.prompt_tokens else None
    for st in steps:  # a call the log implies but does not record, whose reply this step's answer holds
        meta = prep.messages[st["message_seq"]].message.meta
        for u in (meta.get("unrecorded_calls") or ()) if isinstance(meta, dict) else ():
            st["events"] = [*st["events"], {"type": "unrecorded_call", "recorded": False, **u,
                                            "note": "a model call after this one's turn with no record of its own: "
                                                    "its reply is counted in this step's answer, its prompt and usage "
                                                    "are not in the log"}]
    flags = list(counted.flags)
    over = [st for st, ok in zip(steps, inp.answered) if ok and st["window_tokens"] > spec.budget
            and not st["overflow"]]
    if over:  # no overflow (the calls were answered), but the figures disagree: say where
        flags.append(f"{len(over)} answered call(s) over this replay's budget of {spec.budget:,} (first: step "
                     f"{over[0]['step']}, {over[0]['window_tokens']:,}): the log shows them accepted, so the "
                     f"estimate is off or they ran under another model's window; none is an overflow")
    after = list(results[-1].after_last_call) if results else []
    summary = summarize(steps, alert, after)
    # in every window of a what-if: the part of each call the log does not hold, an estimate
    summary["overhead_tokens"] = counted.overhead["tokens"] if counted.overhead else None
    return Replay(session_id=session_id, model=spec, policy=prep.policy, params=params, steps=steps,
                  summary=summary, token_kind=counted.kind, flags=flags,
                  fidelity=fidelity, after_last_call=after, overhead=counted.overhead,
                  lacks=window_lacks(prep.session, prep.messages, counted),
                  others=other_models(prep.messages, steps, spec, prep.config),
                  end_window=_runs(results[-1].end_window) if results else None)


def _runs(seqs: Sequence[int] | None) -> list[list[int]] | None:
    """Seqs as half-open ``[start, end)`` runs (``records.position_runs``), or None."""
    from ...records import position_runs

    return None if seqs is None else [list(r) for r in position_runs(seqs)]


def other_models(messages: Sequence[StoredMessage], steps: list[dict[str, Any]], spec: ModelSpec,
                 config: Config | None = None) -> list[dict[str, Any]]:
    """The calls the log records under another model than ``spec`` (an Aider ``/model`` switch, a
    weak model's call): per model, its steps and its own window and tokenizer. The replay counts
    every step with ``spec``'s tokenizer and budget; these say which steps that is not what ran."""
    by: dict[str, list[int]] = {}
    for st in steps:
        name = messages[st["message_seq"]].message.model
        if name and not same_model(name, spec, config):
            by.setdefault(name, []).append(st["step"])
    out = []
    for name, at in by.items():
        own = session_spec(name, config)
        out.append({"model": name, "steps": at, "limit": own.context_limit, "tokenizer": own.tokenizer,
                    "assumed": own.is_assumed})
    return out


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
            d["parts"] = step_parts(r, r.step - 1, counted)
        out.append(d)
    return out


def summarize(steps: list[dict[str, Any]], alert: float,
              after_last_call: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """A replay's figures over its steps. ``compactions`` counts every compaction event
    (``policies.is_compaction``: recorded of any record type, simulated, or an unrecorded truncation
    the replay applied), those after the last call (``after_last_call``) included;
    ``compaction_steps`` lists the steps that hold one, ``compactions_after_last_call`` counts
    the rest. ``unrecorded_truncations`` counts the steps whose recorded prompt fell with no edit
    of the history recorded."""
    first_loss = peak = None
    peak_util = 0
    compaction_steps, overflow, above, would_fail, unrecorded = [], [], [], [], []
    n_compactions = 0
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
            here = fails = inferred = False
            for e in s["events"]:
                if is_compaction(e):
                    n_compactions += 1
                    here = True
                fails = fails or bool(e.get("would_fail"))
                inferred = inferred or e["type"] == "unrecorded_truncation"
            if here:
                compaction_steps.append(s["step"])
            if fails:
                would_fail.append(s["step"])
            if inferred:
                unrecorded.append(s["step"])
        if s["overflow"] > 0:
            overflow.append(s["step"])
        if s["alert"]:
            above.append(s["step"])
    after = sum(1 for e in after_last_call if is_compaction(e))
    return {
        "steps": len(steps),
        "first_loss_step": first_loss,
        "peak_utilization": peak["utilization"] if peak else None,
        "peak_step": peak["step"] if peak else None,
        "peak_window_tokens": peak["window_tokens"] if peak else None,
        "alert_threshold": alert,
        "steps_above_alert": above,
        "compactions": n_compactions + after,
        "compaction_steps": compaction_steps,
        "compactions_after_last_call": after,
        "unrecorded_truncations": len(unrecorded),
        "unrecorded_truncation_steps": unrecorded,
        "overflow_steps": overflow,
        "would_fail_steps": would_fail,
        "lost_messages": len(lost),
    }


def _from_cache(data: dict[str, Any], spec: ModelSpec) -> Replay:
    if data.get("bound"):  # the figures the session's answered calls bounded (bound_by_usage)
        spec = replace(spec, context_limit=data["limit"], reserved_output=data["reserved_output"], bound=data["bound"])
    return Replay(session_id=data.get("session_id", ""), model=spec, policy=data["policy"],
                  params=data["params"], steps=data["steps"], summary=data["summary"],
                  token_kind=data["token_kind"], flags=data.get("flags", []), fidelity=data.get("fidelity"),
                  after_last_call=data.get("after_last_call", []), overhead=data.get("overhead"),
                  lacks=data.get("window_lacks", []), others=data.get("other_models", []),
                  end_window=data.get("end_window"))
