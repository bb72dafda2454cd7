"""Truncations a log did not record: the recorded prompt fell while the history only grew.

A call's recorded prompt is the provider's count of what it was sent. When it falls below the
previous recorded call's by ``SHRINK_FRACTION`` and ``SHRINK_TOKENS`` at least, under the same
model, and the log records no edit of the history between the two calls (no compaction boundary
or summary, no history edit, no cleared tool result), something left the window that the log
does not show: an unrecorded truncation (the ``recorded`` replay gives that step an
``unrecorded_truncation`` event). ``infer`` finds them, and what the agent's own policy took out:

- Cline (``policies._cline_context``: its ContextManager rebuilt from its source, on the task
  folder the session was ingested from, else on the stored messages): at a call whose recorded
  prompt fell, or that a recorded deleted range names, Cline rewrote older duplicate file reads
  to a notice and, where the log records no range, truncated by its own range. The ``recorded``
  replay applies both (Cline records no rewrite at all: it keeps them in context_history.json),
  and the counts the calibration is fitted on follow them.
- another agent with a preset (``_compaction_presets``): its rule names the messages it would
  have removed (the ``recorded`` replay works them out on its window); not applied, since the
  log holds no summary to put in their place.
- otherwise nothing is named. Either way, the calls from an unapplied one to the next recorded
  edit are left out of the calibration fit (``unfit``): the history is not what they were sent.

Apart from any fall, ``left_out`` names what a harness never sends again, whatever the policy:
Pi's replies it recorded as cut off (``stopReason`` ``aborted`` / ``error``), which pi-ai's
``transformMessages`` (pi-mono packages/ai/src/providers/transform-messages.ts) skips in every
later request. Every replay leaves them out from the next call on (a ``left_out`` event), and the
counts the calibration is fitted on follow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...records import (
    KIND_CLEARED_TOOL_RESULT,
    KIND_COMPACTION_BOUNDARY,
    KIND_COMPACTION_SUMMARY,
    KIND_HISTORY_EDIT,
    KIND_MESSAGE,
    Message,
    read_history_edit,
)

# A fall smaller than this is no truncation: a provider's count varies a little from call to call
# (the corpus' largest fall with nothing removed: 2.0%, 823 tokens; its one rewrite: 23%).
SHRINK_FRACTION = 0.05
SHRINK_TOKENS = 1_000
EDIT_KINDS = (KIND_COMPACTION_BOUNDARY, KIND_COMPACTION_SUMMARY, KIND_HISTORY_EDIT, KIND_CLEARED_TOOL_RESULT)
CLINE_RANGE = "cline:conversationHistoryDeletedRange"


@dataclass(frozen=True)
class Inferred:
    """What the log did not record before one call (``step``, 1-based)."""

    step: int
    policy: str | None  # the agent's policy that names what left (a preset name), or None
    applied: bool  # the replay applies ``drop`` and ``rewrite`` (the agent's policy is modelled exactly)
    # (previous recorded step, its recorded prompt, this call's) when the recorded prompt fell
    # with no recorded edit; None at a call whose edit is recorded (only rewrites are inferred)
    shrink: tuple[int, int, int] | None = None
    drop: tuple[int, ...] = ()  # seqs the agent's policy took out
    rewrite: tuple[tuple[int, float], ...] = ()  # (seq, fraction of its tokens left) rewritten in place
    basis: str = ""  # what the policy was run on
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Unrecorded:
    """Every inferred edit of one session, by step, and the calls no calibration may fit on."""

    steps: dict[int, Inferred] = field(default_factory=dict)
    unfit: frozenset[int] = frozenset()  # 0-based step indices
    # 1-based step -> (seqs the harness leaves out from that call on, why): ``left_out``
    left_out: dict[int, tuple[tuple[int, ...], str]] = field(default_factory=dict)

    def drops(self) -> dict[int, list[int]]:
        out = {k - 1: list(e.drop) for k, e in self.steps.items() if e.applied and e.drop}
        for k, (seqs, _) in self.left_out.items():
            out[k - 1] = sorted(set(out.get(k - 1, ())) | set(seqs))
        return out

    def rewrites(self) -> dict[int, dict[int, float]]:
        return {k - 1: dict(e.rewrite) for k, e in self.steps.items() if e.applied and e.rewrite}

    def rewritten(self) -> dict[int, float]:
        return {seq: f for e in self.steps.values() if e.applied for seq, f in e.rewrite}


def is_call(m: Message) -> bool:
    return m.role == "assistant" and m.kind == KIND_MESSAGE


def shrinks(messages: Sequence[Message]) -> dict[int, tuple[int, int, int]]:
    """Steps (1-based) whose recorded prompt fell with no edit recorded since the previous recorded
    call of the same model: step -> (that call's step, its recorded prompt, this call's)."""
    out: dict[int, tuple[int, int, int]] = {}
    prev: tuple[int, int, str | None] | None = None  # (step, recorded prompt, model)
    edited = False
    k = 0
    for m in messages:
        if m.kind in EDIT_KINDS:
            edited = True
        if not is_call(m):
            continue
        k += 1
        r = m.usage.prompt_tokens if m.usage is not None else None
        if not r:
            continue
        if prev is not None and not edited and (m.model == prev[2] or None in (m.model, prev[2])):
            fell = prev[1] - r
            if fell >= SHRINK_TOKENS and fell >= SHRINK_FRACTION * prev[1]:
                out[k] = (prev[0], prev[1], int(r))
        prev, edited = (k, int(r), m.model), False
    return out


def infer(session: dict[str, Any], messages: Sequence[Message], limit: int) -> Unrecorded:
    """The edits ``messages`` (one session) did not record, under a window of ``limit`` tokens
    (the session's own model: Cline's trigger is a share of it)."""
    from .policies._compaction_presets import pick_preset, session_agent

    fell = shrinks(messages)
    agent, version, date = session_agent(session)
    steps: dict[int, Inferred] = {}
    if session.get("format") == "cline" and agent == "cline":
        steps = _cline(session, messages, fell, limit)
    name = pick_preset(agent, version, date)[0]
    policy = None if name == "generic" else name
    for k, shrink in fell.items():
        if k not in steps:
            steps[k] = Inferred(k, policy, False, shrink)
    return Unrecorded(dict(sorted(steps.items())), _unfit(messages, [k for k, e in steps.items()
                                                                     if e.shrink and not e.applied]),
                      left_out(session, messages))


# pi-mono packages/ai/src/providers/transform-messages.ts: "Skip errored/aborted assistant messages
# entirely" in every request it builds (the call that produced one was made; its window is as recorded)
PI_CUT_OFF = ("Pi's reply cut off (stopReason aborted / error): pi-ai's transformMessages leaves it out of every "
              "later request")


def left_out(session: dict[str, Any], messages: Sequence[Message]) -> dict[int, tuple[tuple[int, ...], str]]:
    """1-based step -> (the seqs the harness leaves out of that call and every later one, why): a
    Pi reply recorded as cut off, from the call after the one that produced it."""
    from ...tool_output import CUT_OFF_STOPS

    if session.get("format") != "pi":
        return {}
    out: dict[int, list[int]] = {}
    k = 0
    for i, m in enumerate(messages):
        if not is_call(m):
            continue
        k += 1
        if isinstance(m.meta, dict) and m.meta.get("stop_reason") in CUT_OFF_STOPS:
            out.setdefault(k + 1, []).append(i)
    return {step: (tuple(seqs), PI_CUT_OFF) for step, seqs in out.items() if step <= k}


def _unfit(messages: Sequence[Message], at: list[int]) -> frozenset[int]:
    """0-based indices of the steps from each of ``at`` (1-based) up to the next recorded edit."""
    edited: list[bool] = []  # per step: an edit recorded since the previous call
    since = False
    for m in messages:
        if m.kind in EDIT_KINDS:
            since = True
        if is_call(m):
            edited.append(since)
            since = False
    out: set[int] = set()
    for k in at:
        j = k - 1
        while j < len(edited) and (j == k - 1 or not edited[j]):
            out.add(j)
            j += 1
    return frozenset(out)


def _cline(session: dict[str, Any], messages: Sequence[Message], fell: dict[int, tuple[int, int, int]],
           limit: int) -> dict[int, Inferred]:
    """Cline's ContextManager at each call the log shows it acted before: a recorded deleted range,
    or a recorded prompt that fell (its trigger compares the previous call's usage with
    ``maxAllowedSize``; a fall proves it fired, whatever the window the model table gives)."""
    from .policies._cline_context import ClineContext, api_history_from_store, load_task
    from .policies._compaction_presets import cline_max_allowed

    calls = [i for i, m in enumerate(messages) if is_call(m)]
    seqs_of: dict[int, list[int]] = {}  # API-history index -> the session's messages from it
    request: dict[int, int] = {}  # step -> Cline's request number (its user message is index 2r - 2)
    for i, m in enumerate(messages):
        h = m.meta.get("history_index") if isinstance(m.meta, dict) else None
        if type(h) is int and m.kind == KIND_MESSAGE:
            seqs_of.setdefault(h, []).append(i)
    for k, i in enumerate(calls, start=1):
        h = messages[i].meta.get("history_index") if isinstance(messages[i].meta, dict) else None
        request[k] = (h + 1) // 2 if type(h) is int else k
    recorded: dict[int, tuple[int, int]] = {}  # step -> the deleted range recorded before it
    for i, m in enumerate(messages):
        if m.kind != KIND_HISTORY_EDIT:
            continue
        e = read_history_edit(m.meta, i)
        rng = e.figures.get("deleted_range") if e is not None and e.source == CLINE_RANGE else None
        if isinstance(rng, list) and len(rng) == 2:
            k = sum(1 for c in calls if c < i) + 1
            recorded[k] = (int(rng[0]), int(rng[1]))
    if not fell and not recorded:
        return {}
    task = load_task(session.get("source"))
    if task is not None:
        api, basis = task[0], "Cline's ContextManager on the task folder"
    else:
        api = api_history_from_store([messages[i] for i in range(len(messages))])
        basis = "Cline's ContextManager on the stored messages (the task folder is gone: image data not counted)"
    cc = ClineContext(api)
    table = cline_max_allowed(limit)
    out: dict[int, Inferred] = {}
    for k in sorted(set(fell) | set(recorded)):
        r = request.get(k, k)
        prev = calls[k - 2] if k >= 2 else None
        u = messages[prev].usage if prev is not None else None
        usage = (u.prompt_tokens or 0) + (u.completion_tokens or 0) if u is not None else 0
        if r < 2 or 2 * r - 1 > len(api) or not usage:
            continue
        before = cc.deleted
        d = cc.before_request(r, usage, min(table, usage))
        if d is None:
            continue
        saved = cc.saved_by_message(cc.last_rewritten)
        rewrite = tuple(sorted(_left(messages, seqs_of, i, c) for i, c in saved.items() if seqs_of.get(i)))
        drop: tuple[int, ...] = ()
        if k in recorded:
            cc.deleted = recorded[k]  # the log's range rules; Cline's own is in ``figures``
        elif d.deleted_range is not None:
            old = set(range(before[0], before[1] + 1)) if before else set()
            gone = [i for i in range(d.deleted_range[0], d.deleted_range[1] + 1) if i not in old]
            drop = tuple(sorted(s for i in gone for s in seqs_of.get(i, ())))
        figures = {"request": r, "usage": usage, "max_allowed": table, "rewritten": d.rewritten,
                   "saved_chars": d.saved, "counted_chars": d.counted, "truncate": d.truncate,
                   "deleted_range": list(d.deleted_range) if d.deleted_range else None}
        if k in recorded:
            figures["recorded_range"] = list(recorded[k])
        out[k] = Inferred(k, "cline", True, fell.get(k), drop, rewrite, basis, figures)
    return out


def _left(messages: Sequence[Message], seqs_of: dict[int, list[int]], index: int, saved: int) -> tuple[int, float]:
    """(seq, fraction left) of the session message holding API-history message ``index``'s
    rewritten block (its longest text) once ``saved`` characters left it."""
    seq = max(seqs_of[index], key=lambda s: len(messages[s].text or ""))
    n = len(messages[seq].text or "")
    return seq, (max(0.0, 1.0 - saved / n) if n else 1.0)
