"""Computed prompt tokens of every model call: what each call was sent, counted.

For each step (assistant message) ``step_tokens`` rebuilds what the call was sent - every
message before it, restarted after the latest compaction (keeping the session's system
messages), without what recorded history edits took out, or exactly the messages an Inspect
solver sent when they differ from the history - and counts it with
:class:`~context_forensics.tokens.counter.TokenCounter` plus the call's fixed tokens, beside the
log's recorded ``prompt_tokens`` (``StepTokens``). ``fidelity`` calibrates and summarises them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..records import KIND_MESSAGE, Message
from .counter import CallOverhead, MessageCounts, TokenCounter
from .history import context_starts, edited_out
from .labels import CALIBRATED, ESTIMATED, EXACT
from .originals import call_originals


@dataclass(frozen=True)
class StepTokens:
    """One model call: computed prompt tokens beside the recorded ones."""

    step: int  # 1-based
    seq: int  # seq of the assistant message that made the call
    model: str | None
    context: int  # tokens of the messages sent
    fixed: int  # reply priming, tool schemas, tool choice
    kind: str  # of ``computed``: exact | estimated
    recorded: int | None = None
    calibrated: int | None = None  # held-out prediction at recorded steps, fitted value elsewhere
    flags: tuple[str, ...] = ()
    start: int = 0  # first message of the context (after a compaction)
    sent: tuple[int, ...] | None = None  # the messages sent, when not the history (Inspect)
    group: str | None = None  # the calibration group applied, when calibrated
    tools: int = 0  # of ``fixed``: the tool definitions (schemas, their framing, tool choice)
    n_tools: int = 0  # tool definitions the call sent
    fixed_kind: str = EXACT  # of ``fixed``: exact | estimated
    # (seq, fraction of its tokens left) of the messages sent rewritten in place by the agent (an
    # unrecorded rewrite the replay infers: Cline's duplicate file reads); ``context`` counts them so
    rewritten: tuple[tuple[int, float], ...] = ()
    # False: the history is not what this call was sent (after a truncation the log did not record
    # and no agent policy names): its recorded figure is kept but no calibration is fitted on it
    fit: bool = True
    # the recorded figure is printed rounded (Aider's "Tokens: 2.4k sent"): the true prompt lies
    # within ± this of ``recorded`` (``Usage.prompt_tokens_error``); 0: recorded exactly
    recorded_error: int = 0

    @property
    def computed(self) -> int:
        return self.context + self.fixed

    @property
    def best(self) -> tuple[int, str]:
        """The figure to show, and its label: recorded, else calibrated, else computed."""
        if self.recorded is not None:
            return self.recorded, "recorded"
        if self.calibrated is not None:
            return self.calibrated, CALIBRATED
        return self.computed, self.kind

    @property
    def error(self) -> int | None:
        """computed − recorded (None without a recorded figure)."""
        return None if self.recorded is None else self.computed - self.recorded

    @property
    def calibrated_error(self) -> int | None:
        if self.recorded is None or self.calibrated is None:
            return None
        return self.calibrated - self.recorded

    def to_dict(self) -> dict[str, Any]:
        value, label = self.best
        d: dict[str, Any] = {
            "step": self.step, "seq": self.seq, "model": self.model, "computed": self.computed,
            "computed_kind": self.kind, "context": self.context, "fixed": self.fixed,
            "recorded": self.recorded, "calibrated": self.calibrated,
            "tokens": value, "kind": label,
        }
        if self.recorded is not None:
            if self.recorded_error:
                d["recorded_error"] = self.recorded_error
            error = self.computed - self.recorded  # self.error, known not None here
            d["error"] = error
            d["error_pct"] = round(100 * error / self.recorded, 3) if self.recorded else None
            if self.calibrated is not None:
                d["calibrated_error"] = self.calibrated_error
        if self.flags:
            d["flags"] = list(self.flags)
        return d


_STEP_FIELDS = tuple(f.name for f in fields(StepTokens))


def _new_step(*values: Any) -> StepTokens:
    """``StepTokens(*values)``, every field given in order, without the frozen dataclass's
    ``object.__setattr__`` per field: ``step_tokens`` makes one per model call, and that was
    half its time."""
    assert len(values) == len(_STEP_FIELDS)
    s = object.__new__(StepTokens)
    s.__dict__.update(zip(_STEP_FIELDS, values))
    return s



# --------------------------------------------------------------------------------------------


def is_step(m: Message) -> bool:
    return m.role == "assistant" and m.kind == KIND_MESSAGE


def _request(m: Message) -> dict[str, Any]:
    r = m.meta.get("request") if isinstance(m.meta, dict) else None
    return r if isinstance(r, dict) else {}


def rewritten_tokens(tokens: int, fraction: float) -> int:
    """A message's tokens after an in-place rewrite left ``fraction`` of it (the replay's engine,
    ``window_at`` and the view round it alike)."""
    return int(round(tokens * fraction))


def step_tokens(messages: Sequence[Message], counter: TokenCounter, *,
                hashes: Sequence[str] | None = None, session_tools: Any = None,
                counts: MessageCounts | None = None,
                session_originals: dict[str, int] | None = None,
                drops: Mapping[int, Sequence[int]] | None = None,
                rewrites: Mapping[int, Mapping[int, float]] | None = None,
                unfit: Any = ()) -> tuple[list[StepTokens], MessageCounts]:
    """Computed prompt tokens of every step, O(messages + steps) via prefix sums.
    ``session_originals``: see ``originals.session_originals``. Edits the log did not record
    but the replay infers (``analysis.replay.unrecorded``), by 0-based step index: ``drops`` the
    messages that left before that call, ``rewrites`` the messages rewritten in place (seq ->
    fraction of their tokens left), both for that call and every later one; ``unfit`` the step
    indices whose history is not what they were sent (``StepTokens.fit`` False)."""
    hashes = list(hashes) if hashes is not None else [m.hash for m in messages]
    counts = counts or counter.count_messages(messages, hashes)
    tok = counts.tokens
    n = len(messages)
    is_sys = np.fromiter((m.role in ("system", "developer") for m in messages), dtype=bool, count=n)
    flagged = np.zeros(n, dtype=bool)
    for i, _ in counts.flags:
        flagged[i] = True

    def cum(a: np.ndarray) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(a, dtype=np.int64)])

    prefix, sys_prefix, sys_count = cum(tok), cum(np.where(is_sys, tok, 0)), cum(is_sys)
    est_prefix, est_sys_prefix = cum(counts.estimated), cum(counts.estimated & is_sys)
    flag_prefix, flag_sys_prefix = cum(flagged), cum(flagged & is_sys)
    by_hash: dict[str, int] | None = None  # built when a call sent something else than the history
    at = [i for i, m in enumerate(messages) if is_step(m)]
    # Every step's figures for its history, at once (one numpy pass instead of a dozen scalar
    # operations per step); the loop below only overrides them where a call sent other messages.
    idx = np.array(at, dtype=np.int64)
    first = context_starts(messages)[idx]
    h_start = first.tolist()
    # system messages from before a compaction stay in the prompt
    h_context = (prefix[idx] - prefix[first] + sys_prefix[first]).tolist()
    h_system = (sys_count[idx] > 0).tolist()
    h_estimated = (est_prefix[idx] - est_prefix[first] + est_sys_prefix[first] > 0).tolist()
    h_flagged = (flag_prefix[idx] - flag_prefix[first] + flag_sys_prefix[first]).tolist()
    plain: dict[bool, CallOverhead] = {}  # calls without a recorded request, by has_system
    gone = edited_out(messages, at)
    inferred_out = np.zeros(n, dtype=bool)  # what inferred edits took out so far
    left: dict[int, float] = {}  # seq -> fraction left, of the messages rewritten so far
    out: list[StepTokens] = []
    for k, i in enumerate(at):
        m = messages[i]
        req = _request(m)
        for j in (drops or {}).get(k, ()):
            inferred_out[j] = True
        left.update((rewrites or {}).get(k, {}))
        sent: list[int] | None = None
        if req.get("input_differs") and isinstance(req.get("input_hashes"), list):
            if by_hash is None:
                by_hash = {h: j for j, h in enumerate(hashes)}
            idx_sent = [by_hash.get(h) for h in req["input_hashes"]]
            if all(j is not None for j in idx_sent):
                sent = [int(j) for j in idx_sent]  # type: ignore[arg-type]
        edited = gone is not None and len(gone[k])
        if sent is None and (edited or inferred_out[:i].any() or left):  # edits took messages out
            keep = np.ones(i, dtype=bool)
            if edited:
                keep[gone[k]] = False  # type: ignore[index]
            keep &= ~inferred_out[:i]
            keep[:h_start[k]] &= is_sys[:h_start[k]]  # before a compaction only system messages stay
            sent = np.flatnonzero(keep).tolist()
        shrunk: tuple[tuple[int, float], ...] = ()
        if sent is not None:  # an Inspect solver sent something else than the history
            context = int(tok[sent].sum())
            if left:
                shrunk = tuple((j, left[j]) for j in sent if j in left)
                context -= sum(int(tok[j]) - rewritten_tokens(int(tok[j]), f) for j, f in shrunk)
            has_system = bool(is_sys[sent].any())
            estimated = bool(counts.estimated[sent].any())
            n_flagged = int(flagged[sent].sum())
            start = min(sent, default=i)
        else:
            start, context, has_system = h_start[k], h_context[k], h_system[k]
            estimated, n_flagged = h_estimated[k], h_flagged[k]
        if req:
            over = counter.call_overhead(req, tools=session_tools, has_system=has_system,
                                         originals=call_originals(m, session_originals))
        else:  # the same for every such call: count it once
            once = plain.get(has_system)
            if once is None:
                once = plain[has_system] = counter.call_overhead(
                    req, tools=session_tools, has_system=has_system,
                    originals={"session": session_originals} if session_originals else None)
            over = once
        flags = list(over.flags)
        if n_flagged:
            flags.append(f"{n_flagged} message(s) in the context hold estimated parts")
        kind = ESTIMATED if (estimated or over.kind == ESTIMATED) else EXACT
        u = m.usage
        # step, seq, model, context, fixed, kind, recorded, calibrated, flags, start, sent, group,
        # tools, n_tools, fixed_kind, rewritten, fit, recorded_error
        out.append(_new_step(
            len(out) + 1, i, m.model, context, over.tokens, kind,
            u.prompt_tokens if u is not None and u.prompt_tokens else None, None,
            tuple(flags), start, tuple(sent) if sent is not None else None, None,
            over.tools, over.n_tools, over.kind, shrunk, k not in unfit,
            (u.prompt_tokens_error or 0) if u is not None and u.prompt_tokens else 0,
        ))
    return out, counts
