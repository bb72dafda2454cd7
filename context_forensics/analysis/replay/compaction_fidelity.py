"""Compaction fidelity: do the ``auto_compaction`` presets fire where the agents fired?

Every compaction or truncation a log recorded (``recorded_compactions``) is set beside the one
the matching preset simulates on the same session (``compaction_fidelity``): the session's own
model, its counted tokens, its recorded usage where the preset's trigger reads it.

- Recorded: Claude Code ``compact_boundary`` (``compactMetadata.trigger`` auto / manual,
  ``preTokens``), Codex ``compacted``, Pi compaction entries (``tokensBefore``), Cline deleted
  ranges, Roo condensing and truncation, Gemini CLI compressions. The recorded step is the first
  model call after the marker (the first whose window the compaction shaped).
- Simulated: the preset runs from the window the log recorded after the previous recorded
  compaction of the same session (the messages that compaction removed count nothing), so each
  compaction is judged on its own trigger, not on how the simulated summaries before it differed
  from the real ones. The simulated step is that run's first compaction.

``step_error`` = simulated − recorded step; ``tokens_error`` = simulated − recorded tokens before
(the recorded figure: ``preTokens``, ``tokensBefore``; where the log records none, as for Cline,
the quantity the agent compared, from the previous call's recorded usage, marked ``usage``).
Manual compactions (``/compact``) are listed but are no test of a trigger: ``automatic`` says
which rows the statistics cover, and ``why`` why a row is left out. Cline truncates only on its
own; Claude Code records auto or manual; Pi records neither, but its ``tokensBefore`` is the very
figure its trigger compares, so one at or under its threshold was no automatic compaction (and
one above it is counted, ``inferred auto``); a Codex, Roo or Gemini CLI compaction whose log does
not say is listed and left out.

Aider's per-call rebuilds (its chat files and repo map re-rendered each call) and Gemini CLI
rewinds (a user's /rewind) are history edits, not compactions: they are not listed.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

import numpy as np

from ...records import (
    COMPACTION_EDIT_TYPES,
    KIND_COMPACTION_BOUNDARY,
    KIND_COMPACTION_SUMMARY,
    KIND_HISTORY_EDIT,
    KIND_MESSAGE,
)
from ...store.db import Store
from .policies import IN_WINDOW, ReplayInput, get_policy
from .policies._compaction_presets import get_preset, pick_preset, session_agent

COMPACTION_EDITS = COMPACTION_EDIT_TYPES


@dataclass(frozen=True)
class RecordedCompaction:
    session_id: str
    format: str
    agent: str
    version: str | None  # the agent's version as recorded (or inferred, see ``version_note``)
    seq: int  # the marker's seq
    step: int  # the first model call after it (1-based)
    kind: str  # compaction | truncation | condense | compression
    trigger: str  # auto | manual | not recorded
    tokens_before: int | None  # as the log recorded it
    tokens_source: str  # which field: preTokens | tokensBefore | usage | -
    date: str | None


@dataclass(frozen=True)
class CompactionCheck:
    recorded: RecordedCompaction
    preset: str
    preset_why: str
    automatic: bool  # counted in the statistics
    why: str  # why not, when not
    simulated_step: int | None
    simulated_tokens_before: int | None
    simulated_basis: str | None  # recorded usage | window: what the preset's trigger read

    @property
    def step_error(self) -> int | None:
        return None if self.simulated_step is None else self.simulated_step - self.recorded.step

    @property
    def tokens_error(self) -> int | None:
        r, s = self.recorded.tokens_before, self.simulated_tokens_before
        return None if r is None or s is None else s - r

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self.recorded), "preset": self.preset, "preset_why": self.preset_why,
                "automatic": self.automatic, "why": self.why, "simulated_step": self.simulated_step,
                "simulated_tokens_before": self.simulated_tokens_before, "simulated_basis": self.simulated_basis,
                "step_error": self.step_error, "tokens_error": self.tokens_error}


def _step_of(steps: list[int], seq: int) -> int:
    """The 1-based step of the first model call after message ``seq``."""
    return int(np.searchsorted(np.asarray(steps, dtype=np.int64), seq, side="right")) + 1


def recorded_compactions(store: Store, session_id: str) -> list[RecordedCompaction]:
    """The compactions and truncations one session recorded, in order."""
    from ...records import read_history_edit

    ses = store.session(session_id)
    agent, version, _ = session_agent(ses)
    msgs = [sm.message for sm in store.messages(session_id)]
    steps = [i for i, m in enumerate(msgs) if m.role == "assistant" and m.kind == KIND_MESSAGE]
    out: list[RecordedCompaction] = []
    open_marker = False  # a boundary or edit with no model call since: a summary after it is its own
    for i, m in enumerate(msgs):
        meta = m.meta if isinstance(m.meta, dict) else {}
        found = None
        if m.kind == KIND_COMPACTION_BOUNDARY:
            cm = meta.get("compactMetadata") or {}
            trig = cm.get("trigger") or meta.get("trigger")
            pre = cm.get("preTokens", meta.get("preTokens"))
            found = ("compaction", trig if trig in ("auto", "manual") else "not recorded",
                     pre if type(pre) is int else None, "preTokens" if type(pre) is int else "-")
        elif m.kind == KIND_COMPACTION_SUMMARY and not open_marker:
            found = ("compaction", "not recorded", None, "-")
        elif m.kind == KIND_HISTORY_EDIT:
            edit = read_history_edit(meta, i)
            if edit is not None and edit.type in COMPACTION_EDITS:
                tb = edit.figures.get("tokens_before")
                auto = "auto" if edit.source.startswith("cline:") else "not recorded"
                found = (edit.type, auto, tb if type(tb) is int else None,
                         "tokensBefore" if type(tb) is int else "-")
        if m.kind in (KIND_COMPACTION_BOUNDARY, KIND_HISTORY_EDIT):
            open_marker = True
        elif m.role == "assistant" and m.kind != KIND_COMPACTION_SUMMARY:  # a model call, not the summary's own turn
            open_marker = False
        if found is None:
            continue
        kind, trigger, before, field_ = found
        date = meta.get("timestamp") or m.timestamp or _near_timestamp(msgs, i) or ses.get("started_at")
        out.append(RecordedCompaction(session_id, ses["format"], agent or ses["format"], version, i,
                                      _step_of(steps, i), kind, trigger, before, field_, date))
    return out


def _near_timestamp(msgs: list[Any], i: int) -> str | None:
    for j in range(i - 1, -1, -1):
        if msgs[j].timestamp:
            return msgs[j].timestamp
    return None


def _from(inp: ReplayInput, gone: set[int], first_step: int) -> ReplayInput:
    """``inp`` from step ``first_step`` (1-based) on, the messages in ``gone`` worth nothing."""
    tokens = inp.tokens.copy()
    if gone:
        tokens[list(gone)] = 0
    k = first_step - 1
    sl = lambda t: t[k:] if t else t  # noqa: E731
    return replace(inp, tokens=tokens, steps=inp.steps[k:], fixed=None if inp.fixed is None else inp.fixed[k:],
                   recorded_prompt=sl(inp.recorded_prompt), answered=sl(inp.answered),
                   recorded_output=sl(inp.recorded_output),
                   raw_tokens=None if inp.raw_tokens is None else np.where(tokens == 0, 0, inp.raw_tokens))


def _recorded_gone(inp: ReplayInput, upto: int) -> set[int]:
    """The messages out of the window the log recorded at step ``upto``."""
    results, states = get_policy("recorded").run(inp, {}, upto=upto)
    end = int(inp.steps[upto - 1])
    return {i for i in range(end) if int(states[i]) not in IN_WINDOW}


def _usage_before(inp: ReplayInput, step: int) -> int | None:
    """The previous call's recorded prompt + output: what Cline compares (tokensIn + tokensOut +
    cacheWrites + cacheReads of the previous request)."""
    j = step - 2
    prompt = inp.recorded_prompt[j] if 0 <= j < len(inp.recorded_prompt) else None
    if not prompt:
        return None
    out = inp.recorded_output[j] if j < len(inp.recorded_output) else None
    return int(prompt) + int(out or 0)


def check_session(store: Store, session_id: str,
                  preset_for: Callable[[RecordedCompaction], tuple[str, str]] | None = None,
                  config: Any = None) -> list[CompactionCheck]:
    """Each recorded compaction of one session beside its preset's simulation."""
    from .engine import prepare

    found = recorded_compactions(store, session_id)
    if not found:
        return []
    preset_for = preset_for or (lambda rc: pick_preset(rc.agent, rc.version, rc.date))
    prep = prepare(store, session_id, None, config=config, policy="recorded")
    ses = store.session(session_id)
    inp = prep.inp
    pol = get_policy("auto_compaction")
    out = []
    prev_step = None
    for rc in found:
        name, why_preset = preset_for(rc)
        if rc.tokens_before is None and rc.agent == "cline":
            rc = replace(rc, tokens_before=_usage_before(inp, rc.step), tokens_source="usage")
        automatic, why = _automatic(rc, inp)
        start = 1 if prev_step is None else prev_step
        sub = inp if prev_step is None else _from(inp, _recorded_gone(inp, prev_step), prev_step)
        params: dict[str, Any] = {"preset": name}
        if get_preset(name).agent == "cline" and ses.get("format") == "cline":
            params.update(cline_task=ses.get("source"), first_step=start)  # its file-read optimisation
        results, _ = pol.run(sub, params)
        sim_step = sim_tokens = basis = None
        for r in results:
            if r.step == 1 and prev_step is not None:
                continue  # the recorded compaction the run starts after
            ev = next((e for e in r.events if e["type"] == "compaction"), None)
            if ev is not None:
                sim_step = r.step + start - 1
                sim_tokens = int(ev.get("trigger_tokens", ev["tokens_before"]))
                basis = ev.get("trigger_basis", "window")
                break
        out.append(CompactionCheck(rc, name, why_preset, automatic, why, sim_step, sim_tokens, basis))
        prev_step = rc.step
    return out


def _automatic(rc: RecordedCompaction, inp: ReplayInput) -> tuple[bool, str]:
    """Whether a recorded compaction tests an automatic trigger, and why not when not."""
    if rc.trigger == "manual":
        return False, "manual (/compact)"
    if rc.trigger == "auto":
        return True, ""
    if rc.agent == "pi" and rc.tokens_before is not None:
        # Pi records no trigger, but its tokensBefore IS the quantity its auto trigger compares:
        # at or under the threshold of its defaults the trigger cannot have fired.
        name, _ = pick_preset(rc.agent, rc.version, rc.date)
        pr = get_preset(name)
        thr = pr.threshold(inp.limit, inp.budget)
        if rc.tokens_before <= thr:
            return False, (f"Pi records no trigger; tokensBefore {rc.tokens_before:,} ≤ its auto threshold "
                           f"{thr:,} (window − reserveTokens): a /compact, or non-default settings")
        return True, f"Pi records no trigger; tokensBefore {rc.tokens_before:,} > its auto threshold {thr:,}"
    return False, "trigger not recorded"


def compaction_fidelity(store: Store, session_ids: list[str] | None = None,
                        preset_for: Callable[[RecordedCompaction], tuple[str, str]] | None = None,
                        config: Any = None) -> list[CompactionCheck]:
    """Every recorded compaction of the store (or of ``session_ids``) beside its preset's simulation."""
    ids = session_ids if session_ids is not None else [s["id"] for s in store.sessions()]
    out: list[CompactionCheck] = []
    for sid in ids:
        out.extend(check_session(store, sid, preset_for, config))
    return out


def fidelity_summary(checks: list[CompactionCheck]) -> dict[str, Any]:
    """Statistics over the automatic compactions: median step error, the worst, how many within 2."""
    auto = [c for c in checks if c.automatic]
    errs = [c.step_error for c in auto if c.step_error is not None]
    missed = sum(c.step_error is None for c in auto)
    tok = [c.tokens_error for c in auto if c.tokens_error is not None]
    return {"recorded": len(checks), "automatic": len(auto), "never_fired": missed,
            "median_step_error": statistics.median(errs) if errs else None,
            "max_abs_step_error": max((abs(e) for e in errs), default=None),
            "within_2": sum(abs(e) <= 2 for e in errs),
            "median_tokens_error": statistics.median(tok) if tok else None}
