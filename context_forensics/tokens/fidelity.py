"""Computed vs recorded prompt tokens for every model call of a session.

``steps.step_tokens`` rebuilds what each call (step) was sent and counts it beside the log's
recorded ``prompt_tokens``.

Sessions whose counts are not verifiably exact get a per-session calibration
(:func:`~context_forensics.tokens.calibration.fit_calibration`); each step then also carries a calibrated
figure, and at recorded steps that figure comes from a fit that did not see the step
(leave-one-out), so the error reported for it is honest.

``count_session`` is what the replay counts a session with: per-message tokens, per-step fixed
tokens (calibrated when the session is, the hidden offset going into the fixed part), the
label, aggregated flags and the per-step fidelity. ``bench/fidelity.py`` summarises the
fidelity over the corpus.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np

from ..config.models import ModelSpec, resolve_model, session_spec
from ..config.settings import Config
from ..records import Message
from .calibration import IDENTITY, Calibration, fit_calibration
from .counter import MessageCounts, TokenCounter
from .history import context_starts
from .labels import CALIBRATED, ESTIMATED, EXACT, UNVERIFIED
from .originals import session_originals
from .overhead import Captured, captured_tokens, captured_words
from .steps import StepTokens, is_step, rewritten_tokens, step_tokens

if TYPE_CHECKING:  # pragma: no cover
    from ..store.db import Store

# When a verified-exact counter is this close to the recorded usage, keep "exact" and do not
# calibrate: |error| <= max(EXACT_TOLERANCE_TOKENS, EXACT_TOLERANCE_REL * recorded).
EXACT_TOLERANCE_TOKENS = 2
EXACT_TOLERANCE_REL = 0.01
# A model or compaction epoch inside a session gets its own calibration once it has this many
# recorded calls.
MIN_GROUP_POINTS = 5


def summarize(errors: Iterable[int | float | None], recorded: Iterable[int | None]) -> dict[str, Any]:
    """calls, median and p95 absolute error (tokens), median and p95 absolute % error."""
    pairs = [(float(e), float(r)) for e, r in zip(errors, recorded) if e is not None and r]
    if not pairs:
        return {"calls": 0}
    e = np.abs(np.array([p[0] for p in pairs]))
    r = np.array([p[1] for p in pairs])
    pct = 100 * e / r
    return {
        "calls": len(pairs),
        "median_abs": float(np.median(e)),
        "p95_abs": float(np.percentile(e, 95)),
        "max_abs": float(e.max()),
        "median_pct": float(np.median(pct)),
        "p95_pct": float(np.percentile(pct, 95)),
        "within_2": int((e <= 2).sum()),
        "within_1pct": int((pct <= 1).sum()),
    }


# --------------------------------------------------------------------------------------------


def _close_enough(err: float, recorded: float, rounding: int = 0) -> bool:
    """Within tolerance of the recorded figure; of its range when the log prints it rounded."""
    return abs(err) <= max(EXACT_TOLERANCE_TOKENS, EXACT_TOLERANCE_REL * recorded) + rounding


def _group_keys(s: StepTokens) -> tuple[tuple, ...]:
    """Calibration groups of a step, most specific first: (model, compaction epoch), model, session.

    After a compaction a harness may re-attach files or reminders the log does not show, so
    the hidden offset can change; a model switch mid-session changes the tokenizer ratio.
    """
    return (("epoch", s.model, s.start), ("model", s.model), ("session",))


def calibrate_steps(steps: list[StepTokens]) -> tuple[list[StepTokens], dict[str, Calibration], str]:
    """Calibrate a session's computed figures against its recorded ones.

    Exact steps whose recorded calls all agree within tolerance stay exact and uncalibrated.
    Otherwise each step takes the most specific calibration group that has enough recorded
    calls (see ``_group_keys``). At a recorded step the calibrated figure is the group's
    held-out prediction; elsewhere the group's full fit. A call whose history is not what it was
    sent (``StepTokens.fit`` False) is fitted on by no group and gets the full fit. Returns the
    steps, the calibrations by group name, and the session's label.
    """
    rec = [s for s in steps if s.recorded is not None and s.fit]
    all_exact = all(s.kind == EXACT for s in steps)
    if all_exact and all(_close_enough(s.error, s.recorded, s.recorded_error) for s in rec):  # type: ignore[arg-type]
        return steps, {}, EXACT
    if not rec:
        return steps, {}, EXACT if all_exact else ESTIMATED
    members: dict[tuple, list[StepTokens]] = {}
    for s in rec:
        for key in _group_keys(s):
            members.setdefault(key, []).append(s)
    cals: dict[tuple, Calibration] = {}
    rejected: dict[str, Calibration] = {}
    for key, pts in members.items():
        if key == ("session",) or len(pts) >= MIN_GROUP_POINTS:
            cal = fit_calibration([p.computed for p in pts], [p.recorded for p in pts if p.recorded is not None])
            if cal.plausible:
                cals[key] = cal
            else:  # reported, never applied: the group falls back to a wider one, or to the tokenizer
                rejected[_group_name(key)] = cal
    if not cals:
        return steps, rejected, EXACT if all_exact else ESTIMATED
    held: dict[tuple, dict[int, float]] = {
        key: {p.seq: float(h) for p, h in zip(members[key], cal.holdout)} for key, cal in cals.items()
    }
    used: dict[tuple, Calibration] = {}
    out = []
    for s in steps:
        found = [k for k in _group_keys(s) if k in cals]
        if not found:  # no plausible calibration for this step: the tokenizer's figure
            out.append(s)
            continue
        key = found[0]
        used[key] = cals[key]
        if s.recorded is not None and s.fit:
            p = held[key].get(s.seq, float("nan"))
            # no honest figure for a call the fit could not hold out
            value = round(p) if np.isfinite(p) else None
        else:
            value = int(cals[key].apply([s.computed])[0])
        out.append(_with(s, calibrated=value, group=_group_name(key)))
    names = {_group_name(k): c for k, c in used.items()}
    names.update({k: c for k, c in rejected.items() if k not in names})
    return out, names, CALIBRATED


def _group_name(key: tuple) -> str:
    if key[0] == "epoch":
        return f"{key[1]}@{key[2]}"
    if key[0] == "model":
        return str(key[1])
    return "session"


def _with(s: StepTokens, **changes: Any) -> StepTokens:
    return replace(s, **changes)


def session_model(session: dict[str, Any], messages: Sequence[Message]) -> str | None:
    """The session's recorded model (else its calls' most common one); None if the log names none."""
    if session.get("model"):
        return str(session["model"])
    models = [m.model for m in messages if is_step(m) and m.model]
    return max(set(models), key=models.count) if models else None


def session_fidelity(store: Store, session_id: str, *, config: Config | None = None,
                     spec: ModelSpec | None = None) -> SessionCounts:
    """Steps of one stored session with computed, recorded and calibrated prompt tokens,
    counted for the session's own model (or ``spec``)."""
    row = store.session(session_id)
    stored = store.messages(session_id)
    spec = spec or session_spec(session_model(row, [s.message for s in stored]), config)
    tools = (row.get("metadata") or {}).get("tools")
    out = count_session(stored, spec, store=store, session_tools=tools,
                        session_tokens=session_originals(row.get("metadata")))
    out.session_id = session_id
    return out


# --------------------------------------------------------------------------------------------
# what a replay needs


@dataclass
class SessionCounts:
    """Per-message and per-step tokens of a session for a replay, with their label.

    When the session is calibrated, ``per_message`` is scaled by its calibration group's ratio
    (only a ratio fitted on ``MIN_RATIO_POINTS`` calls or more is not 1) and ``fixed`` carries
    the group's offset (a harness's hidden system prompt and tools cannot be evicted), set so
    that a step's full context adds up to its calibrated prediction. ``computed`` keeps the
    tokenizer's counts: those are the per-message figures a window shows, and what calibration
    adds is shown on rows of its own (``hidden``: the offset, "not in the log"; the rest of the
    difference is the ratio's scale).
    """

    per_message: np.ndarray  # int64[n]
    fixed: np.ndarray  # int64[m]
    kind: str  # exact | calibrated | estimated
    flags: list[str]
    steps: list[StepTokens]
    calibrations: dict[str, Calibration]  # by group name (see _group_keys)
    computed: MessageCounts
    spec: ModelSpec
    session_id: str | None = None
    hidden: np.ndarray | None = None  # int64[m]: of ``fixed``, the calibration's offset (or the carried overhead)
    foreign_recorded: int = 0  # recorded prompt sizes counted by another tokenizer family (a what-if)
    # what a what-if carries of the part of each call the log does not hold (``carry_overhead``), or
    # what a capture of the agent measured of it (``overhead.Captured``, "capture" names it):
    # tokens, kind "estimated", what it rests on; None when it carries none
    overhead: dict[str, Any] | None = None
    captured: int = 0  # of each step's ``fixed`` (and of ``hidden``): the tokens a capture added

    def recorded_steps(self) -> list[StepTokens]:
        return [s for s in self.steps if s.recorded is not None]

    def calibration_at(self, j: int) -> Calibration | None:
        """The calibration applied at step j+1 (None when the session is not calibrated)."""
        if self.kind != CALIBRATED or not self.steps:
            return None
        return self.calibrations.get(self.steps[j].group or "")

    def fixed_parts(self, j: int) -> tuple[int, int, int]:
        """Step j+1's fixed tokens as (tool definitions, framing / reply priming, not in the log);
        what ``fixed[j]`` holds beyond them is the calibration's scale of the fixed part."""
        s = self.steps[j]
        hidden = int(self.hidden[j]) if self.hidden is not None else 0
        return s.tools, s.fixed - s.tools - self.captured, hidden

    def summary(self) -> dict[str, Any]:
        """Errors of the computed figures and, when calibrated, of the held-out calibrated ones."""
        rec = self.recorded_steps()
        out: dict[str, Any] = {"session": self.session_id, "model": self.spec.name,
                               "tokenizer": self.spec.tokenizer, "kind": self.kind,
                               "computed": summarize([s.error for s in rec], [s.recorded for s in rec])}
        cal = [s for s in rec if s.calibrated is not None]
        if cal:
            out["calibrated"] = summarize([s.calibrated_error for s in cal], [s.recorded for s in cal])
            out["calibration"] = {k: v.to_dict() for k, v in self.calibrations.items()}
        return out

    def fidelity(self, inp: Any = None) -> dict[str, Any] | None:
        """Recorded vs computed at every recorded call, and the summary the replay shows.

        ``measure`` says what the summary's error is: ``computed`` (the tokenizer's figure, no
        calibration), ``held_out`` (each call predicted by a calibration that did not see it)
        or ``fitted`` (every recorded call was one the calibration was fitted on, so there is
        no error to report: the errors are None, and ``fitted_calls`` counts those calls).
        """
        listed = [s for s in self.steps if s.recorded is not None]
        if not listed:
            return None
        # a call after an unrecorded truncation no policy names was not sent the history it is
        # counted on: its figures are listed, marked, and measure nothing
        rec = [s for s in listed if s.fit]
        raw = summarize([s.error for s in rec], [s.recorded for s in rec])
        out: dict[str, Any] = {"version": 1, "kind": self.kind, "computed": raw}
        shown, measure, fitted = raw, "computed", 0
        if self.kind == CALIBRATED:
            held = [s for s in rec if s.calibrated is not None]
            fitted = sum(1 for s in rec if s.calibrated is None and s.group is not None)
            cal = summarize([s.calibrated_error for s in held], [s.recorded for s in held])
            out["calibrated"] = cal
            out["calibration"] = {k: c.to_dict() for k, c in self.calibrations.items()}
            shown, measure = (cal, "held_out") if cal["calls"] else (cal, "fitted")
        if self.calibrations and "calibration" not in out:  # every fit rejected: listed, with why
            out["calibration"] = {k: c.to_dict() for k, c in self.calibrations.items()}
        out.update(measure=measure, calls=shown["calls"], fitted_calls=fitted,
                   median_abs_error=shown.get("median_abs"), p95_abs_error=shown.get("p95_abs"),
                   median_pct_error=shown.get("median_pct"))
        rounded = [s for s in listed if s.recorded_error]
        if rounded:  # the log prints its figures rounded: each is a range, the errors above are to its middle
            shares = sorted(100 * s.context / s.recorded for s in rounded if s.recorded)
            out["recorded_rounding"] = {
                "calls": len(rounded), "max_error": max(s.recorded_error for s in rounded),
                "median_error": float(np.median([s.recorded_error for s in rounded])),
                # of each rounded call's recorded prompt, the share the log's messages hold (the rest:
                # what the agent sent and the log does not show), measured against the printed figure
                "log_holds_pct": {"median": float(np.median(shares)), "min": shares[0], "max": shares[-1]} if shares
                else None,
                "note": "the log prints each call's prompt size rounded: each recorded figure is a range "
                        "(± max_error at most), and the errors above are to its middle"}
        keep = ("step", "seq", "recorded", "recorded_error", "computed", "error", "error_pct", "calibrated",
                "calibrated_error")
        out["unfit_calls"] = len(listed) - len(rec)
        out["steps"] = []
        for s in listed:
            d = {k: v for k, v in s.to_dict().items() if k in keep}
            if not s.fit:
                d["unfit"] = True
            elif self.kind == CALIBRATED and s.calibrated is None and s.group is not None:
                d["fitted"] = True  # the calibration was fitted on this call: no held-out figure
            out["steps"].append(d)
        return out


def fidelity_text(fid: dict[str, Any] | None) -> str:
    """A replay's fidelity in a few words: the median error and what it was measured on.

    A call the calibration was fitted on measures nothing (its window is the recorded figure by
    construction), so a session whose every recorded call was fitted says so instead of an error.
    """
    if not fid:
        return ""
    fitted = fid.get("fitted_calls") or 0
    if not fid.get("calls"):
        return f"fitted on its {fitted} call{'s' if fitted != 1 else ''}: no held-out error" if fitted else ""
    text = (f"{fid.get('median_abs_error') or 0:,.0f} tok ({fid.get('median_pct_error') or 0:.1f}%) "
            f"over {fid['calls']} call{'s' if fid['calls'] != 1 else ''}")
    if fid.get("measure") == "held_out":
        text += " held out" + (f" (+{fitted} fitted)" if fitted else "")
    rounding = fid.get("recorded_rounding")
    if rounding:  # the recorded figures are ranges: the error is to their middle
        text += f"; recorded ±{rounding['max_error']:,} (rounded)"
    return text


def _settle_vendor(steps: list[StepTokens], counts: MessageCounts,
                   tokenizer: str) -> tuple[list[StepTokens], MessageCounts, str | None]:
    """A vendor vocabulary not yet confirmed (``Tokenizer.unverified``) is exact in a session
    whose every recorded call it matches within tolerance (and whose figures nothing else made
    estimates); anywhere else all its figures are estimates, and the note says what they rest on."""
    rec = [s for s in steps if s.recorded is not None]
    close = all(_close_enough(s.error, s.recorded) for s in rec)  # type: ignore[arg-type]
    if rec and close and all(s.kind == EXACT for s in steps):
        return steps, counts, None
    from .tokenizers import tokenizer_status

    basis = tokenizer_status(tokenizer)["why"].split("; not verified")[0]
    why = ("the session records no usage to check it against" if not rec else "its recorded usage differs"
           if not close else "its recorded usage matches, but parts of the count are estimated")
    steps = [_with(s, kind=ESTIMATED, fixed_kind=ESTIMATED) for s in steps]
    counts = replace(counts, estimated=np.ones(len(counts), dtype=bool))
    return steps, counts, f"{basis}; {UNVERIFIED} ({why})"


def _comparable(model: str | None, spec: ModelSpec) -> bool:
    """Whether a call's recorded usage was counted by the tokenizer family ``spec`` uses."""
    if not model:
        return True
    other = resolve_model(model, recorded=True)
    if other.is_assumed:  # a name the table does not know: give it the benefit
        return True
    return other.tokenizer == spec.tokenizer and other.chat_format == spec.chat_format


def _scales(cal: Calibration | None, s: StepTokens) -> TypeGuard[Calibration]:
    """Whether a calibration scales (a ratio other than 1) rather than only adding an offset."""
    return cal is not None and cal.ratio != 1.0


def _calibrated_arrays(steps: list[StepTokens], cals: dict[str, Calibration], tokens: np.ndarray,
                       is_sys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-message tokens, per-step fixed tokens and, of the fixed ones, the offset ("not in
    the log"), such that a step's full context adds up to its calibrated prediction.

    Only a fit with a ratio (fitted on 3 calls or more) scales the messages; an offset-only fit
    leaves them at the tokenizer's figure and adds its offset, whatever its sign, to ``fixed``.
    """
    n = len(tokens)
    ratio = np.ones(n)
    done = 0
    for s in steps:  # a message takes the ratio of the first call that reads it
        cal = cals.get(s.group or "")
        r = 1.0
        if _scales(cal, s):
            # A negative offset (a stand-in tokenizer that overcounts long contexts) is no
            # hidden prompt: use the ratio the fit implies at this call instead.
            r = cal.ratio if cal.offset >= 0 or s.computed <= 0 else float(cal.apply([s.computed])[0]) / s.computed
        ratio[done : s.seq] = r
        done = max(done, s.seq)
    if steps and done < n:
        ratio[done:] = ratio[done - 1] if done else 1.0
    per_message = np.rint(tokens * ratio).astype(np.int64)
    prefix = np.concatenate([[0], np.cumsum(per_message)])
    sys_prefix = np.concatenate([[0], np.cumsum(np.where(is_sys, per_message, 0))])
    fixed = np.zeros(len(steps), dtype=np.int64)
    hidden = np.zeros(len(steps), dtype=np.int64)
    for j, s in enumerate(steps):
        cal = cals.get(s.group or "")
        if cal is None:
            fixed[j] = s.fixed
            continue
        if s.sent is not None:
            ctx = int(per_message[list(s.sent)].sum())
            ctx -= sum(int(per_message[j]) - rewritten_tokens(int(per_message[j]), f) for j, f in s.rewritten)
        else:
            ctx = int(prefix[s.seq] - prefix[s.start] + sys_prefix[s.start])
        fixed[j] = int(cal.apply([s.computed])[0]) - ctx
        if not _scales(cal, s):  # the messages are the tokenizer's: the offset is what fixed adds
            hidden[j] = fixed[j] - s.fixed
        elif cal.offset >= 0:
            hidden[j] = int(np.rint(cal.offset))
    return per_message, fixed, hidden


def count_session(messages: Sequence[Any], spec: ModelSpec, *, store: Store | None = None,
                  session_tools: Any = None, calibrate: bool = True,
                  session_tokens: dict[str, int] | None = None, drops: Mapping[int, Sequence[int]] | None = None,
                  rewrites: Mapping[int, Mapping[int, float]] | None = None, unfit: Any = (),
                  captured: Captured | None = None) -> SessionCounts:
    """Count a session for a replay under ``spec``: messages (``Message`` or stored), steps,
    and - when the log recorded usage of the same tokenizer family - calibration.

    ``captured``: an agent's system prompt and tool definitions as a capture of its requests
    holds them (``tokens/overhead.py``); the parts the log lacks are added to every call before
    calibration, which then fits what they leave unexplained.

    The session's tool schemas (session metadata, for logs whose calls do not list them) are
    read from the store when ``session_tools`` is not given. ``drops``, ``rewrites``, ``unfit``:
    the edits the log did not record (``steps.step_tokens``).
    """
    msgs = [getattr(m, "message", m) for m in messages]
    hashes = [m.hash if isinstance(m, Message) else getattr(m, "hash", None) or m.message.hash
              for m in messages]
    if session_tools is None and store is not None and messages and hasattr(messages[0], "session_id"):
        from ..errors import NotFoundError

        try:
            metadata = store.session(messages[0].session_id).get("metadata") or {}
        except NotFoundError:
            metadata = {}
        session_tools, session_tokens = metadata.get("tools"), session_originals(metadata)
    counter = TokenCounter(spec, store=store)
    steps, counts = step_tokens(msgs, counter, hashes=hashes, session_tools=session_tools,
                                session_originals=session_tokens, drops=drops, rewrites=rewrites, unfit=unfit)
    got = None
    if captured is not None and steps:
        got = captured_tokens(counter, captured, msgs, any(s.n_tools for s in steps))
        if got.total:  # measured on the capture, an estimate here: every call's figure is one
            steps = [_with(s, fixed=s.fixed + got.total, kind=ESTIMATED, fixed_kind=ESTIMATED) for s in steps]
        else:
            got = None
    comparable: dict[str | None, bool] = {}  # by model name: a session has one or a few
    for s in steps:
        if s.model not in comparable:
            comparable[s.model] = _comparable(s.model, spec)
    other = sum(1 for s in steps if s.recorded is not None and not comparable[s.model])
    steps = [s if comparable[s.model] else _with(s, recorded=None) for s in steps]
    vendor_note = None
    if counter.tokenizer.unverified:
        steps, counts, vendor_note = _settle_vendor(steps, counts, spec.tokenizer)
    if calibrate:
        steps, cals, kind = calibrate_steps(steps)
    else:
        cals, kind = {}, EXACT if all(s.kind == EXACT for s in steps) else ESTIMATED
    if kind == EXACT and bool(counts.estimated.any()):
        kind = ESTIMATED  # messages after the last recorded call can still hold estimates
    is_sys = np.fromiter((m.role in ("system", "developer") for m in msgs), dtype=bool, count=len(msgs))
    hidden = None
    if kind == CALIBRATED:
        per_message, fixed, hidden = _calibrated_arrays(steps, cals, counts.tokens, is_sys)
    else:
        per_message = counts.tokens.copy()
        fixed = np.array([s.fixed for s in steps], dtype=np.int64)
    seen: dict[str, int] = {}
    for _, f in counts.flags:
        seen[f] = seen.get(f, 0) + 1
    for s in steps:
        for f in s.flags:
            if "message(s) in the context" not in f:
                seen[f] = seen.get(f, 0) + 1
    flags = [f if c == 1 else f"{f} (x{c})" for f, c in seen.items()]
    unfitted = sum(1 for s in steps if s.recorded is not None and not s.fit)
    if unfitted:
        flags.append(f"{unfitted} recorded call(s) after a truncation the log did not record are left out of "
                     "the calibration and its error: the history is not what they were sent")
    rejected = [(name, cal) for name, cal in cals.items() if not cal.plausible]
    if rejected:
        names = ", ".join(name for name, _ in rejected)
        flags.append(f"calibration not used ({names}): {rejected[0][1].why}; "
                     "those calls show the tokenizer's figures of what the log holds")
    if vendor_note:
        flags.insert(0, vendor_note)
    overhead = None
    if got is not None:
        hidden = (hidden if hidden is not None else np.zeros(len(steps), dtype=np.int64)) + got.total
        assert captured is not None
        overhead = {"tokens": got.total, "kind": ESTIMATED, "rests_on": captured_words(captured, got, spec.tokenizer),
                    "capture": dict(captured.source), "parts": list(got.parts), "system_tokens": got.system,
                    "tools_tokens": got.tools, "n_tools": got.n_tools}
    if other and kind != CALIBRATED:
        # Nothing calibrates this count: say what it cannot see rather than let it pass for the
        # whole prompt (a Claude Code log replayed under gpt-4o lacks the harness's ~27k tokens).
        flags.append(f"{other} recorded prompt size(s) were counted by another tokenizer than {spec.tokenizer}: "
                     f"{NOTHING_CALIBRATES}, so what the harness sent beyond the log "
                     + ("is taken from the capture (see the overhead)" if got is not None
                        else "(system prompt, tools) is not counted"))
    return SessionCounts(per_message, fixed, kind, flags, steps, cals, counts, spec, hidden=hidden,
                         foreign_recorded=other if kind != CALIBRATED and got is None else 0, overhead=overhead,
                         captured=got.total if got is not None else 0)


NOTHING_CALIBRATES = "nothing calibrates this replay"


def carry_overhead(counted: SessionCounts, own: SessionCounts) -> SessionCounts:
    """``counted`` (a what-if under another tokenizer family, which nothing calibrates) with the part
    of each call the log does not hold - the harness's system prompt and tools - carried as an
    estimate: what the session's own calibration puts outside the log at its first calibrated call
    (``own``: the session counted under its recorded model), converted by the ratio of the two
    tokenizers' counts of this session's messages. Added to every call's fixed tokens (no policy
    evicts it) and shown as the "not in the log" part, labelled estimated. Unchanged, with a
    word in its flags, when the own calibration puts nothing outside the log."""
    j = next((k for k in range(len(own.steps)) if own.calibration_at(k) is not None), None)
    hidden = int(own.hidden[j]) if j is not None and own.hidden is not None else 0
    if hidden <= 0:
        why = ("the session's recorded calls calibrate to no part outside the log" if j is not None
               else "the session's own recorded calls calibrate nothing")
        flags = [f + f" ({why})" if NOTHING_CALIBRATES in f else f for f in counted.flags]
        return replace(counted, flags=flags)
    assert j is not None
    cal = own.calibration_at(j)
    assert cal is not None
    ratio = float(counted.computed.tokens.sum()) / max(1.0, float(own.computed.tokens.sum()))
    tokens = int(round(hidden * ratio))
    rests_on = (f"≈{hidden:,} {own.spec.tokenizer} tokens outside the log at step {j + 1} by the calibration of "
                f"{own.steps[j].model or own.spec.name}'s recorded calls ({cal.rests_on}), ×{ratio:.3f} to "
                f"{counted.spec.tokenizer} (the two tokenizers' counts of this session's messages)")
    words = (f"what the harness sent beyond the log (system prompt, tools) is carried as an estimate: "
             f"≈{tokens:,} tokens per call, {rests_on}")
    flags = [f.split(": nothing calibrates")[0] + f": {NOTHING_CALIBRATES}; {words}" if NOTHING_CALIBRATES in f else f
             for f in counted.flags]
    m = len(counted.steps)
    return replace(counted, fixed=counted.fixed + tokens, hidden=np.full(m, tokens, dtype=np.int64), flags=flags,
                   overhead={"tokens": tokens, "kind": ESTIMATED, "rests_on": rests_on, "source_model": own.spec.name,
                             "source_tokens": hidden, "source_step": j + 1, "tokenizer_ratio": round(ratio, 4),
                             "calibration": cal.to_dict()})


__all__ = [
    "IDENTITY",
    "fidelity_text",
    "SessionCounts",
    "StepTokens",
    "calibrate_steps",
    "carry_overhead",
    "context_starts",
    "count_session",
    "session_fidelity",
    "step_tokens",
    "summarize",
]
