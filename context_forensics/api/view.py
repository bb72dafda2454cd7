"""``ctxf view``: what a session's model saw at every step, as the data the page is built from.

The page (``render/view.py``) needs every message once and, for each model it replays, each
message's state over the steps as intervals: a message joins the window at the first step
after it (``joins``, implied by the steps' seqs) and changes state only where the policy moved
it (``changes``: ``seq -> [[step, state], ...]``). That is O(messages + state changes) per
model, never a copy of the window per step, so a 5,000-step session stays a few MB. The page
rebuilds any step's window from them exactly as ``ctxf replay --at`` prints it (the tests
compare the two for every step).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checks import on_disk
from .workspace import ConfigLike, Models, Workspace, model_list, session_json, using

VIEW_VERSION = 1
# what the page shows of each step (a row of ``steps``), in this order
STEP_FIELDS = ("window_tokens", "history_tokens", "utilization", "overflow", "recorded_prompt_tokens",
               "computed_prompt_tokens", "prompt_error", "prompt_check", "alert")


@dataclass
class ViewResult:
    """The data of one ``ctxf view`` page: one run (a session) or two (``ctxf view A B``, with
    the divergence). ``to_dict()`` is what the page embeds, and what ``--json`` prints."""

    runs: list[dict[str, Any]]
    divergence: dict[str, Any] | None
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        from ..analysis.replay import STATE_NAMES
        from ..version import __version__

        return {"version": VIEW_VERSION, "ctxf": __version__, "kind": "diverge" if self.divergence else "session",
                "states": {str(k): v for k, v in STATE_NAMES.items()}, "step_fields": list(STEP_FIELDS),
                "runs": self.runs, "divergence": self.divergence, "notes": self.notes}


def view(session: str | Path, other: str | Path | None = None, *, model: Models = None,
         facts: str | Iterable[str] | None = None, goal: str | None = None, drift: bool = False,
         policy: str | None = None, params: Mapping[str, Any] | None = None, fmt: str | None = None,
         store: Workspace | None = None, db: str | Path | None = None, config: ConfigLike = None,
         progress: Any = None) -> ViewResult:
    """The data of ``ctxf view SESSION`` (or ``ctxf view A B``: both runs and where B parted from A).

    Each run is replayed under its recorded model (the ``recorded`` policy: the log's own
    compactions, clearings and edits) and under each ``model`` (that model's policy, or
    ``policy``). ``facts`` (default: the config's ``facts:``) are tracked in each model's
    window; the drift curve is computed when ``goal`` is given or ``drift`` is true (both load
    the embedding model, offline). A divergence view compares the runs' recorded windows.
    """
    from . import calls

    names = model_list(model)
    wanted = None if facts is None else [facts] if isinstance(facts, str) else list(facts)
    notes: list[str] = []
    with using(store, db, config, names, create=on_disk(session, other)) as ws:
        refs = [session] if other is None else [session, other]
        sids = [ws.resolve(str(r), fmt) for r in refs]
        fact_list = wanted if wanted is not None else list(ws.cfg.facts or [])
        curve = drift or goal is not None
        if other is not None and (wanted or curve):
            notes.append("facts and the drift curve are drawn in the view of one session: "
                         "`ctxf view SESSION --fact TEXT --drift`")
        if other is not None:
            fact_list, curve = [], False
        elif not curve:
            notes.append("no drift curve: add --drift (the default goal) or --goal TEXT")
        runs = [_run(ws, sid, names, fact_list, goal, curve, policy, dict(params or {}), progress) for sid in sids]
        divergence = None
        if other is not None:
            divergence = calls.diverge(sids[0], sids[1], store=ws, progress=progress).to_dict()
    return ViewResult(runs, divergence, notes)


def _run(ws: Workspace, sid: str, names: list[str], facts: list[str], goal: str | None, drift: bool,
         policy: str | None, params: dict[str, Any], progress: Any) -> dict[str, Any]:
    from . import calls

    row = ws.store.session(sid)
    each: list[tuple[str | None, str | None]] = [(None, "recorded")] + [(m, policy) for m in names]
    models, preps, reps = [], [], []
    for m, pol in each:
        p = {} if m is None else params  # --param is for the --model replays' policy, not the log's record
        data, prep, rep = _model(ws, sid, m, pol, p)
        preps.append(prep)
        reps.append(rep)
        if facts:
            fr = calls.facts(sid, facts, model=m, policy=pol, params=p, store=ws, progress=progress)
            data["facts"] = [_fact_runs(f) for f in fr.to_dict()["facts"]]
        models.append(data)
    first = preps[0]  # the recorded replay's: messages and steps are the same under every model
    run: dict[str, Any] = {"session": session_json(row), "messages": _messages(first),
                           "steps": [int(s) for s in first.inp.steps.tolist()], "models": models,
                           "facts": list(facts), "drift": None, "check": _check(ws, sid, reps[0])}
    if drift:
        d = calls.drift(sid, goal=goal, store=ws, progress=progress).to_dict()
        run["drift"] = {"goal": d.get("goal"), "state": d.get("state"), "summary": d.get("summary"),
                        "mapping": d.get("mapping"),
                        "steps": [[s["step"], s.get("score"), s.get("verdict"), s.get("explanation")]
                                  for s in d.get("steps") or []]}
    return run


def _check(ws: Workspace, sid: str, recorded: Any) -> dict[str, Any]:
    """What ``ctxf check`` finds on the session (no embedding model), for the page's header."""
    from ..analysis.check import quick_checks

    d = quick_checks(ws.store, sid, config=ws.cfg, replay=recorded).to_dict()
    d.pop("session", None)
    return d


def _model(ws: Workspace, sid: str, model: str | None, policy: str | None,
           params: dict[str, Any]) -> tuple[dict[str, Any], Any, Any]:
    """One model's replay of a session: its figures per step, each message's state changes,
    the window parts per step and each message's tokens; the prepared replay, and the replay."""
    from ..analysis.replay import Timeline, prepare, replay_prepared, window_parts
    from ..tokens.labels import EXACT
    from ..tokens.steps import rewritten_tokens

    alert = ws.cfg.analysis_thresholds.min_context_utilization_alert
    prep = prepare(ws.store, sid, model, config=ws.cfg, policy=policy, params=params)
    rep, results = replay_prepared(sid, prep, alert)
    d = rep.to_dict()
    counted, inp = prep.counted, prep.inp
    # the (step, state) changes of each message, in the engine's order (as facts read them)
    timeline = Timeline.from_results(inp, results)
    changes = {str(seq): [[step, state] for step, state in ch] for seq, ch in timeline.changes.items()}
    steps, parts, events = [], [], {}
    for j, st in enumerate(d["steps"]):
        steps.append([st.get(f) for f in STEP_FIELDS])
        rows = window_parts(st["parts"], j, counted, prep.policy, st["counts"], EXACT)
        parts.append([[p["kind"], p["label"], p["tokens"], p["figure"]] for p in rows])
        if st["events"]:
            events[str(st["step"])] = st["events"]
    fid = d.get("fidelity")
    data = {
        "model": d["model"], "policy": d["policy"], "tokenizer": d["tokenizer"], "token_kind": d["token_kind"],
        "limit": d["limit"], "reserved_output": d["reserved_output"], "budget": d["budget"],
        "assumed": d["assumed"], "bound": d["bound"], "model_notes": d["model_notes"], "flags": d["flags"],
        "summary": d["summary"], "fidelity": None if fid is None else {k: v for k, v in fid.items() if k != "steps"},
        "placeholder_tokens": int(inp.placeholder_tokens), "steps": steps, "parts": parts, "events": events,
        "after_last_call": d.get("after_last_call") or [], "overhead": d.get("overhead"),
        "changes": changes, "facts": None,
    }
    # each message's tokens under this model's tokenizer (framing included, never calibrated),
    # and which of them are estimates (no exact tokenizer for some of the text)
    data["tokens"] = [int(t) for t in counted.computed.tokens.tolist()]
    # a message the agent rewrote in place (an inferred rewrite: Cline's duplicate file reads)
    # costs what is left of it once cleared, not the placeholder
    data["rewritten"] = {str(seq): rewritten_tokens(data["tokens"][seq], f) for seq, f in inp.rewritten.items()}
    data["estimated"] = [int(i) for i in counted.computed.estimated.nonzero()[0].tolist()]
    return data, prep, rep


def _messages(prep: Any) -> list[list[Any]]:
    """Every message once, the same under every model: what the page shows of it."""
    out = []
    for sm in prep.messages:
        m = sm.message
        calls = [[c.id, c.name, c.arguments] for c in m.tool_calls]
        usage = None if m.usage is None else [m.usage.prompt_tokens, m.usage.completion_tokens]
        out.append([sm.seq, m.role, m.kind, m.name, m.text, calls, m.tool_call_id, int(prep.inp.group[sm.seq]),
                    m.model, usage])
    return out


def _fact_runs(f: Mapping[str, Any]) -> dict[str, Any]:
    """A fact's per-step states as runs ``[first step, last step, state, source seq]``."""
    runs: list[list[Any]] = []
    for t in f.get("timeline") or []:
        key = (t["state"], t.get("source_seq"))
        if runs and runs[-1][2] == key[0] and runs[-1][3] == key[1] and runs[-1][1] == t["step"] - 1:
            runs[-1][1] = t["step"]
        else:
            runs.append([t["step"], t["step"], key[0], key[1]])
    return {"fact": f["fact"], "first_appeared": f.get("first_appeared"), "disappeared_at": f.get("disappeared_at"),
            "cause": f.get("cause"), "final_state": f.get("final_state"),
            "sources": [s.get("seq") for s in f.get("sources") or []], "runs": runs}
