"""The checks that set the log's own figures beside the recorded replay of the session.

- ``prompt_vs_window``: a recorded prompt size against the window ctxf rebuilt for that call;
- ``recorded_shrink``: a recorded prompt that falls while the log records no edit of the history
  (an unrecorded truncation: the agent or provider cut the history and wrote nothing down);
- ``calibration``: the fit that maps the tokenizer's counts onto the recorded ones, judged
  independently of the fit's own score (a ratio that is no tokenizer's error);
- ``compactions``: the compaction records the log holds against those the replay counts;
- ``summary_counts``: the replay summary's counts against the events and losses it lists;
- ``final_window``: the window a log records at the end of the session (Letta's in-context list,
  ``metadata["final_window"]``) against the replay's window at the end.
"""

from __future__ import annotations

from typing import Any

from ...records import (
    COMPACTION_EDIT_TYPES,
    KIND_COMPACTION_BOUNDARY,
    KIND_COMPACTION_SUMMARY,
    KIND_HISTORY_EDIT,
    KIND_MESSAGE,
    read_history_edit,
)
from .base import Inconsistency, NotApplicable

PROMPT_TOLERANCE = 0.25  # |window − recorded| / recorded beyond this is a disagreement (the 25%)
# A recorded prompt that falls by this share and this many tokens between two calls of one model is a
# shrink. Smaller falls happen without any edit of the history (a provider dropping earlier turns'
# thinking blocks, a cache figure rounding).
SHRINK_SHARE = 0.05
SHRINK_TOKENS = 1000
# A calibration ratio outside this range is no tokenizer's error: the fit explains the recorded
# figures by something else (a prompt the log does not hold, calls of another context).
RATIO_RANGE = (0.5, 2.0)
EDIT_EVENTS = ("compaction", "history_edit", "clearing")


def _steps(inp: Any) -> list[dict[str, Any]]:
    return inp.replay.steps


NO_USAGE = "the log records no usage"
NO_FINAL_WINDOW = "the log records no final window"


def _recorded_prompts(inp: Any) -> list[dict[str, Any]]:
    """The steps whose call the log records a prompt size for; a check that compares against them
    cannot judge a session that records none (Copilot CLI's legacy layout, Cline's task files
    without api_req_started, SWE-agent's totals-only trajectories): it is
    skipped with the reason, not run and found agreeing."""
    steps = [st for st in getattr(inp.replay, "steps", None) or () if st.get("recorded_prompt_tokens")]
    if not steps:
        raise NotApplicable(NO_USAGE)
    return steps


def prompt_vs_window(inp: Any) -> list[Inconsistency]:
    """Every call whose recorded prompt and rebuilt window differ by more than 25%."""
    out = []
    rejected = [c for c in ((inp.replay.fidelity or {}).get("calibration") or {}).values()
                if c.get("plausible") is False]
    lacks = LOG_LACKS.get(inp.session.get("format") or "")
    for st in _recorded_prompts(inp):
        rec = st["recorded_prompt_tokens"]
        err = st.get("recorded_prompt_tokens_error") or 0  # a rounded figure: the range rec ± err
        win = st["window_tokens"]
        # to the nearer end of the recorded range (the figure itself when recorded exactly)
        near = min(max(win, rec - err), rec + err)
        rel = (win - near) / near if near > 0 else 0.0
        if abs(rel) > PROMPT_TOLERANCE:
            said = f"{rec:,}-token prompt" if not err else f"prompt of {rec:,} ± {err:,} tokens (printed rounded)"
            out.append(Inconsistency(
                "prompt_vs_window",
                f"step {st['step']}: the rebuilt window is {win:,} tokens, the log records a {said} ({rel:+.0%})",
                step=st["step"], seq=st["message_seq"],
                figures={"recorded": rec, "window": win, "error": round(rel, 4), "check": st.get("prompt_check"),
                         **({"recorded_error": err} if err else {})},
                accounted=_accounted(st, rejected) or (lacks if lacks and win < near else None)))
    return out


# Logs that hold only part of what each call was sent, by format: a window below the recorded
# prompt is what the log lacks, not a misreading (the replay's calibration estimates it).
LOG_LACKS = {"aider_chat": "Aider's chat history holds neither the system prompt, the repo map nor the files Aider "
                           "adds to the chat: the window rebuilt from it is below what the call was sent"}


def _accounted(st: dict[str, Any], rejected: list[dict[str, Any]]) -> str | None:
    """How the replay already says this step's window is uncertain, when it does."""
    for e in st.get("events") or ():
        if e.get("type") == "unrecorded_truncation":
            return f"unrecorded truncation reported at step {st['step']}"
    if rejected and st.get("prompt_check") == "computed":
        if (st.get("window_tokens") or 0) < (st.get("recorded_prompt_tokens") or 0):
            return ("the replay's flags say no plausible calibration fits: the window is what the log holds, and the "
                    "log holds less than the calls were sent")
        return ("the replay's flags say no plausible calibration fits: the window is what the log holds, and the "
                "recorded figure is below it, so it does not count all of that text")
    return None


def recorded_shrink(inp: Any) -> list[Inconsistency]:
    """Every fall of the recorded prompt between two calls of one model with no recorded edit between."""
    _recorded_prompts(inp)
    out = []
    models = inp.step_models()
    last: dict[str | None, tuple[int, int]] = {}  # model -> (index in steps, recorded)
    steps = _steps(inp)
    for k, st in enumerate(steps):
        rec = st.get("recorded_prompt_tokens")
        if not rec:
            continue
        model = models[k]
        prev = last.get(model)
        last[model] = (k, rec)
        if prev is None:
            continue
        j, before = prev
        # a rounded figure is a range: the fall is at least the gap between the ranges
        fall = before - rec - (steps[j].get("recorded_prompt_tokens_error")
                               or 0) - (st.get("recorded_prompt_tokens_error") or 0)
        if fall < SHRINK_TOKENS or fall < SHRINK_SHARE * before:
            continue
        between = [e for s in steps[j + 1:k + 1] for e in s.get("events") or ()]
        if any(e.get("type") in EDIT_EVENTS for e in between):
            continue  # the log records what removed it
        inferred = [e for e in between if e.get("type") == "unrecorded_truncation"]
        out.append(Inconsistency(
            "recorded_shrink",
            f"step {st['step']}: the recorded prompt fell from {before:,} to {rec:,} tokens (−{fall:,}) since step "
            f"{steps[j]['step']}, and the log records no edit of the history",
            step=st["step"], seq=st["message_seq"],
            figures={"from_step": steps[j]["step"], "recorded_before": before, "recorded_after": rec, "fall": fall},
            accounted=_shrink_accounted(inferred, st["step"])))
    return out


def _shrink_accounted(inferred: list[dict], step: int) -> str | None:
    """How the replay reports a fall the log did not record: a truncation, or the agent's rewrite
    of earlier messages in place that took nothing out (Cline's duplicate file reads)."""
    from ..replay.policies import rewrites_only

    if not inferred:
        return None
    if all(rewrites_only(e) for e in inferred):
        return f"reported as the agent's rewrite of duplicate file reads (not recorded) at step {step}"
    return f"reported as an unrecorded truncation at step {step}"


def calibration(inp: Any) -> list[Inconsistency]:
    """Every calibration whose ratio is not a tokenizer's error: not positive, or far from 1.

    A tokenizer that is not the model's own miscounts by a few percent to a few tens of percent; a
    ratio outside ``RATIO_RANGE`` says the recorded figures hold something the log does not (a
    prompt it does not keep, calls of another context), which no scale of the log's text explains.
    """
    cals = (inp.replay.fidelity or {}).get("calibration") or {}
    if not cals:
        _recorded_prompts(inp)  # a fit needs recorded prompt sizes: none, nothing to judge
    fits: dict[tuple, list[str]] = {}  # one fit, fitted for several groups (a model's epoch, the model, the session)
    for name, c in cals.items():
        ratio, offset = c.get("ratio"), c.get("offset")
        if not isinstance(ratio, (int, float)) or not isinstance(offset, (int, float)):
            continue
        if RATIO_RANGE[0] <= ratio <= RATIO_RANGE[1]:
            continue
        fits.setdefault((offset, ratio, c.get("method"), c.get("n"), c.get("plausible") is not False), []).append(name)
    out = []
    for (offset, ratio, method, n, used), names in fits.items():
        out.append(Inconsistency(
            "calibration",
            f"calibration {', '.join(names)}: recorded ≈ {offset:,.0f} + {ratio:g} × computed ({method}, {n} calls); "
            f"a ratio outside {RATIO_RANGE[0]:g}–{RATIO_RANGE[1]:g} is no tokenizer's error",
            figures={"groups": names, "offset": offset, "ratio": ratio, "method": method, "n": n},
            accounted=None if used else "the replay does not use it (marked implausible)"))
    return out


def recorded_compactions(messages: list[Any]) -> list[int]:
    """The seqs of the log's compaction records: a boundary, a summary no boundary or edit of its own
    came before (since the last model call), a recorded history edit of a compacting type."""
    out = []
    open_marker = False
    for i, sm in enumerate(messages):
        m = sm.message
        if m.kind == KIND_COMPACTION_BOUNDARY:
            out.append(i)
            open_marker = True
        elif m.kind == KIND_HISTORY_EDIT:
            edit = read_history_edit(m.meta, i)
            if edit is not None and is_compaction_edit(edit.type, edit.action):
                out.append(i)
            open_marker = True
        elif m.kind == KIND_COMPACTION_SUMMARY:
            if not open_marker:
                out.append(i)
        if m.role == "assistant" and m.kind == KIND_MESSAGE:
            open_marker = False
    return out


def is_compaction_edit(type_: str, action: str) -> bool:
    """A recorded history edit that counts as a compaction: the agent's context manager cut or
    condensed the history (``records.COMPACTION_EDIT_TYPES``; a user's rewind is not one)."""
    return (type_ or "").lower() in COMPACTION_EDIT_TYPES


def compactions(inp: Any) -> list[Inconsistency]:
    """The compaction records the log holds against the compactions the replay counts."""
    records = recorded_compactions(inp.messages)
    counted = inp.replay.summary.get("compactions", 0)
    if len(records) == counted:
        return []
    steps = _steps(inp)
    last_seq = steps[-1]["message_seq"] if steps else -1
    after = [s for s in records if s > last_seq]
    return [Inconsistency(
        "compactions",
        f"the log records {len(records)} compaction(s) (seq {', '.join(map(str, records[:8]))}"
        f"{'…' if len(records) > 8 else ''}), the replay counts {counted}"
        + (f"; {len(after)} come after the last call" if after else ""),
        seq=records[0] if records else None,
        figures={"recorded": len(records), "counted": counted, "record_seqs": records, "after_last_call": after})]


def summary_counts(inp: Any) -> list[Inconsistency]:
    """The replay summary's counts against the events and losses its steps list."""
    steps = _steps(inp)
    summ = inp.replay.summary
    listed_compactions = sum(1 for s in steps for e in s.get("events") or () if _counts_as_compaction(e))
    listed_fail = [s["step"] for s in steps if any(e.get("would_fail") for e in s.get("events") or ())]
    listed_overflow = [s["step"] for s in steps if (s.get("overflow") or 0) > 0]
    lost = {q for s in steps for q in s.get("newly_lost") or ()}
    first = next((s["step"] for s in steps if s.get("newly_lost")), None)
    # a compaction recorded after the last call is counted, and listed in the summary itself
    pairs = (("compactions", summ.get("compactions"), listed_compactions + _after_count(summ)),
             ("would_fail_steps", summ.get("would_fail_steps"), listed_fail),
             ("overflow_steps", summ.get("overflow_steps"), listed_overflow),
             ("lost_messages", summ.get("lost_messages"), len(lost)),
             ("first_loss_step", summ.get("first_loss_step"), first))
    out = []
    for key, said, listed in pairs:
        if said != listed:
            out.append(Inconsistency(
                "summary_counts", f"the summary's {key} is {_short(said)}, the steps list {_short(listed)}",
                figures={"key": key, "summary": said, "listed": listed}))
    return out


def final_window(inp: Any) -> list[Inconsistency]:
    """The messages the log says were in the window at the end against those the replay holds
    there (markers aside: they are no text the model read)."""
    md = inp.session.get("metadata") or {}
    recorded = md.get("final_window")
    if not isinstance(recorded, list):
        raise NotApplicable(NO_FINAL_WINDOW)
    runs = inp.replay.end_window
    if runs is None:
        raise NotApplicable("the replay holds no window at the end (the session has no model call)")
    markers = {i for i, sm in enumerate(inp.messages)
               if sm.message.kind in (KIND_HISTORY_EDIT, KIND_COMPACTION_BOUNDARY)}
    replayed = {i for a, b in runs for i in range(a, b)} - markers
    logged = {i for i in recorded if type(i) is int} - markers
    if replayed == logged:
        return []
    missing, extra = sorted(logged - replayed), sorted(replayed - logged)
    source = md.get("final_window_source") or "the log"
    return [Inconsistency(
        "final_window",
        f"{source} puts {len(logged)} message(s) in the window at the end, the replay {len(replayed)}: "
        f"{len(missing)} it lacks (seq {', '.join(map(str, missing[:8])) or '-'}), {len(extra)} more "
        f"(seq {', '.join(map(str, extra[:8])) or '-'})",
        seq=(missing or extra)[0], figures={"recorded": len(logged), "replayed": len(replayed),
                                            "missing": missing, "extra": extra, "source": source})]


def _after_count(summ: dict[str, Any]) -> int:
    v = summ.get("compactions_after_last_call")
    return v if isinstance(v, int) else 0


def _counts_as_compaction(e: dict[str, Any]) -> bool:
    from ..replay.policies import is_compaction

    return is_compaction(e)


def _short(v: Any) -> str:
    if isinstance(v, list):
        return f"{len(v)} step(s)" + (f" ({', '.join(map(str, v[:5]))}{'…' if len(v) > 5 else ''})" if v else "")
    return str(v)
