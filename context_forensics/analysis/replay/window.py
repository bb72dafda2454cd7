"""``window_at``: the exact window of one step, message by message and part by part."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...config.models import ModelSpec, spec_notes
from ...config.settings import Config
from ...store.db import Store
from .engine import LOST_STATES, REPLAY_VERSION, prepare, step_dicts
from .parts import window_parts
from .policies import IN_WINDOW, STATE_NAMES

# The event that moves a message into each lost state.
_LEFT_BY = {"evicted": ("eviction", "history_edit", "unrecorded_truncation", "left_out"),
            "cleared": ("clearing", "unrecorded_truncation"),
            "summarized": ("compaction", "history_edit")}


def window_at(store: Store, session_id: str, step: int, model: str | ModelSpec | None = None, *,
              config: Config | None = None, policy: str | None = None,
              params: dict[str, Any] | None = None, overhead_from: str | None = None) -> dict[str, Any]:
    """The exact window of one step: each history message with its state, tokens and text,
    and every part of the window (messages, tool definitions, framing, what calibration adds)
    as a row; ``window_parts`` add up to the step's ``window_tokens``.

    A message's ``tokens`` is the tokenizer's figure (per-message framing included), never a
    calibrated one; ``window_tokens`` is what it takes in this window (a cleared one its
    placeholder, a lost one 0). ``step`` is the model call an assistant message makes,
    ``joined_step`` the first step whose window holds the message; a lost message says at which
    step it left (``left_step``) and by which event (``left_by``).
    """
    from ...errors import UsageError
    from ...tokens.labels import ESTIMATED, EXACT
    from ...tokens.steps import rewritten_tokens

    prep = prepare(store, session_id, model, config=config, policy=policy, params=params, overhead_from=overhead_from)
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
            cost = (tokens if m.kind == "cleared_tool_result" else
                    rewritten_tokens(tokens, inp.rewritten[sm.seq]) if sm.seq in inp.rewritten else
                    min(tokens, inp.placeholder_tokens))
        else:
            cost = 0
        if cost and estimated[sm.seq]:
            estimated_in_window = True
        row = {"seq": sm.seq, "role": m.role, "kind": m.kind, "name": m.name, "state": name,
               "tokens": tokens, "window_tokens": cost, "in_window": st in IN_WINDOW,
               "step": step_of.get(sm.seq), "joined_step": int(joins[sm.seq]), "left_step": None, "left_by": None,
               "text": m.text, "tool_calls": [c.to_dict() for c in m.tool_calls],
               "rewritten": sm.seq in inp.rewritten}  # cleared by the agent's own rewrite: what is left counts
        if name in LOST_STATES and sm.seq in left:
            at, _ = left[sm.seq]
            row["left_step"] = at
            event = next((e for e in results[at - 1].events if e["type"] in _LEFT_BY[name]), None)
            if event is not None:
                row["left_by"] = {"type": event["type"], "policy": event.get("policy"),
                                  "recorded": bool(event.get("recorded")),
                                  **({"edit": event.get("edit"), "rests_on": event["rests_on"]}
                                     if event.get("rests_on") else {})}
        rows.append(row)
    st_dict = step_dicts(results[-1:], inp, prep.spec, 0.9, counted.kind, counted)[-1]
    figure = ESTIMATED if estimated_in_window else EXACT
    parts = window_parts(st_dict["parts"], step - 1, counted, prep.policy, r.counts, figure)
    notes = [f for f in counted.flags if "nothing calibrates this replay" in f]
    return {"version": REPLAY_VERSION, "session": session_id, "model": prep.spec.name, "policy": prep.policy,
            "assumed": prep.spec.assumed_dict(), "model_notes": spec_notes(prep.spec),
            "step": st_dict, "window_parts": parts, "notes": notes, "messages": rows}
