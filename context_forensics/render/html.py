"""`ctxf report --html`: one session's forensics as a single self-contained, printable HTML file.

No scripts, no CDN, no network: charts are inline SVG, styles are inline. Every piece of log
text goes through ``_e``: made inert (control characters as escapes, as on the terminal), then
``html.escape``, so no tag, attribute or entity from a log survives; an emoji is shown by its
name (``render/glyphs.py``), since the page is often read where no emoji font exists.

The page reads top down: the verdict (the figures a reader needs first, each saying where it
comes from), the utilization chart and its table, the events (alike steps folded into ranges,
in words), the facts, the drift, and the fullest window message by message. Every figure comes
from the API calls the commands print with ``--json`` (replay, facts, drift, window).
"""

from __future__ import annotations

import html
from datetime import datetime, timezone
from typing import TYPE_CHECKING, AbstractSet, Any

from ..inert import inert
from ..version import __version__
from .events import event_detail, event_label, event_runs
from .family import html_rows as family_rows
from .glyphs import split_emoji

if TYPE_CHECKING:  # pragma: no cover
    from ..api.workspace import Workspace

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#1d2330;
  padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem}
h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #dde;padding-bottom:.2rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0}
th,td{border-bottom:1px solid #eef;padding:.25rem .5rem;text-align:left;vertical-align:top;overflow-wrap:break-word}
th{background:#f4f6fb}td.num{text-align:right;font-variant-numeric:tabular-nums}
.meta td:first-child{font-weight:600;width:10rem}.muted{color:#667}.kept{}.evicted{color:#b3261e}.cleared{color:#9a6700}
.summarized{color:#6f42c1}.outside_local{color:#0969da}
.pill{display:inline-block;padding:0 .45rem;border-radius:.6rem;font-size:.8rem;background:#eef}
.bad{background:#fde2e1}.good{background:#dff5e3}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:0;font:12px/1.35 ui-monospace,Menlo,monospace}
.verdict{border:1px solid #dde;border-radius:.4rem;padding:.2rem 1rem .6rem;background:#fafbfe}
.verdict td.from,.from{color:#667;font-size:.85rem}.est{color:#9a6700;font-size:.8rem;white-space:nowrap}
.emoji{font-size:.85em;color:#556;background:#f1f1f6;border-radius:.25rem;padding:0 .15rem}
svg{max-width:100%;height:auto}
@media print{body{margin:0;max-width:none}h2{break-after:avoid}tr{break-inside:avoid}}
"""


def _e(text: Any) -> str:
    """Log text as HTML: inert, escaped, each emoji as its name (the emoji itself in the title)."""
    out = []
    for piece, name in split_emoji(inert(text)):
        if name is None:
            out.append(html.escape(piece))
        else:
            code = " ".join(f"U+{ord(c):04X}" for c in piece)
            out.append(f"<span class='emoji' title='emoji {html.escape(code)}'>{html.escape(name)}</span>")
    return "".join(out)


def _table(head: list[str], rows: list[list[str]], numeric: AbstractSet[int] = frozenset(), cls: str = "") -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td class='num'>{c}</td>" if i in numeric else f"<td>{c}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows)
    return f"<table{f' class={cls!r}' if cls else ''}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _steps(steps: list[int], limit: int = 8) -> str:
    shown = ", ".join(map(str, steps[:limit]))
    return shown + (f" … (+{len(steps) - limit})" if len(steps) > limit else "")


def _seqs(seqs: list[int], limit: int = 12) -> str:
    if not seqs:
        return ""
    shown = ", ".join(map(str, seqs[:limit])) + (f" … (+{len(seqs) - limit})" if len(seqs) > limit else "")
    return f"{len(seqs)}: {shown}"


def session_report(ws: Workspace, sid: str, *, models: list[str] | None = None, facts: list[str] | None = None,
                   goal: str | None = None) -> str:
    """The HTML text of the report for one session: the recorded replay and one per ``models``;
    facts (``facts``, else the config's) and drift (``goal``, else the config's or the opening)
    follow the first of ``models`` (its window) when one is given, else the recorded window."""
    from .. import api

    models = list(models or [])
    rec = api.replay(sid, store=ws)
    session = rec.session
    replays = [rec.replay.to_dict()] + ([r.to_dict() for r in api.replay(sid, model=models, store=ws).replays]
                                        if models else [])
    lead = models[0] if models else None
    facts_data, facts_why = _facts(ws, sid, facts, lead)
    drift_data = api.drift(sid, goal=goal, model=lead, store=ws).to_dict()

    parts = [f"<h1>ctxf report: {_e(session.get('title') or sid)}</h1>",
             f"<p class='muted'>generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} by ctxf {__version__}</p>"]
    meta = [["id", _e(sid)], ["format", _e(session["format"])], ["model", _e(session.get("model"))],
            ["task", _e(session.get("task"))], ["outcome", _e(session.get("outcome"))],
            ["source", _e(session["source"])],
            ["messages", f"{session['message_count']} ({session['step_count']} model call"
                         f"{'' if session['step_count'] == 1 else 's'})"]]
    meta += family_rows(session, _e)  # the session that started this one, the sub-agents it started
    parts.append("<table class='meta'>" + "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in meta) + "</table>")
    parts.extend(_verdict(replays, facts_data, drift_data))
    parts.extend(_utilization(replays))
    parts.extend(_events(replays))
    parts.extend(_facts_section(facts_data, facts_why))
    parts.extend(_drift_section(drift_data))
    parts.extend(_fullest_window(ws, sid, replays))
    body = "\n".join(parts)
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width,initial-scale=1'>"
            f"<title>ctxf report {_e(sid)}</title><style>{CSS}</style></head><body>\n{body}\n</body></html>\n")


def _facts(ws: Workspace, sid: str, facts: list[str] | None, model: str | None) -> tuple[dict | None, str]:
    """The facts report (None when there is nothing to track, with why)."""
    from .. import api

    if not facts and not ws.cfg.facts:
        return None, ("No facts given: <code>--fact TEXT</code> (repeatable) or a <code>facts:</code> list in the "
                      "config makes this section track them.")
    return api.facts(sid, facts or None, model=model, store=ws).to_dict(), ""


# ---------------------------------------------------------------- the verdict


def _replay_name(r: dict[str, Any]) -> str:
    return f"{r['model']} ({r['policy']})"


def _estimate(r: dict[str, Any]) -> str:
    """The label a token-based figure of this replay carries: how its tokens were counted, and
    whether the limits are assumed (no table entry placed the model)."""
    labels = []
    if r["token_kind"] != "exact":
        labels.append(r["token_kind"])
    if r.get("assumed"):
        labels.append("limits assumed")
    return f" <span class='est'>({_e(', '.join(labels))})</span>" if labels else ""


def _source(r: dict[str, Any]) -> str:
    entry = r.get("entry") or {}
    limits = ("assumed limits: " + _e((r["assumed"] or {}).get("reason") or "") if r.get("assumed")
              else f"limits from {_e(entry.get('origin') or 'the model table')}")
    over = r.get("overhead")
    carried = (f"; each window carries ≈{over['tokens']:,} tokens not in the log (system prompt, tools), "
               f"<span class='est'>estimated</span>: {_e(over['rests_on'])}" if over else "")
    return (f"replay under {_e(r['model'])}, {_e(r['policy'])} policy; limit {r['limit']:,}, budget {r['budget']:,}; "
            f"tokens {_e(r['token_kind'])} ({_e(r['tokenizer'])}); {limits}{carried}")


def _loss_label(r: dict[str, Any], est: str) -> str:
    """A first loss the log recorded (a compaction, a clearing or an edit it wrote down) is no
    estimate, whatever the window's token figures are; a loss a policy decided is one."""
    step = r["summary"]["first_loss_step"]
    events = r["steps"][step - 1]["events"] if 0 < step <= len(r["steps"]) else []
    removing = [e for e in events if e["type"] in ("compaction", "clearing", "history_edit", "eviction")]
    if removing and all(e.get("recorded") for e in removing):
        return " <span class='est'>(recorded)</span>"
    return est


def _compactions_words(r: dict[str, Any]) -> str:
    """How many compactions, of which kind, at which steps, and after the last call."""
    from ..analysis.replay import is_compaction

    s = r["summary"]
    unrecorded = s.get("unrecorded_truncation_steps") or []
    fell = (f"; the recorded prompt fell with no edit recorded at step(s) {_steps(unrecorded)} (a truncation "
            "or rewrite the log did not record: the events say which)" if unrecorded else "")
    if not s["compactions"]:
        return "none" + fell
    found = [e for st in r["steps"] for e in st["events"] if is_compaction(e)] + \
        [e for e in r.get("after_last_call") or () if is_compaction(e)]
    kinds = {"recorded" if e.get("recorded") else "inferred" if e["type"] == "unrecorded_truncation"
             else "simulated" for e in found}
    how = " and ".join(sorted(kinds))
    where = [f"at step(s) {_steps(s['compaction_steps'])}"] if s["compaction_steps"] else []
    after = s.get("compactions_after_last_call") or 0
    if after:
        where.append(f"{after} after the last call")
    return f"{s['compactions']} ({how}) " + ", ".join(where) + fell


def _verdict(replays: list[dict], facts: dict | None, drift: dict) -> list[str]:
    rows = []
    for r in replays:
        s, est = r["summary"], _estimate(r)
        first = (f"step {s['first_loss_step']}{_loss_label(r, est)}" if s["first_loss_step"]
                 else "none: no message left the window")
        over = (f"{len(s['overflow_steps'])} step(s), from step {s['overflow_steps'][0]}{est}" if s["overflow_steps"]
                else "none")
        comp = _compactions_words(r)
        fail = (f"{len(s['would_fail_steps'])} step(s), from step {s['would_fail_steps'][0]}{est}"
                if s["would_fail_steps"] else "none")
        rows.append([_e(_replay_name(r)), first, over, comp, fail, f"<span class='from'>{_source(r)}</span>"])
    out = ["<div class='verdict'><h2>Verdict</h2>",
           _table(["replay", "first loss", "overflows", "compactions", "would fail", "from"], rows)]
    out.append(f"<p><b>Facts:</b> {_facts_verdict(facts)}</p>")
    out.append(f"<p><b>Drift:</b> {_drift_verdict(drift)}</p>")
    out.append("<p class='from'>first loss: the first step whose window lacks a message of the log; overflows: steps "
               "whose window exceeds the budget (limit − reserved output); would fail: steps the provider would "
               "reject. Figures marked estimated rest on a tokenizer's count, not on usage the log recorded.</p></div>")
    return out


def _facts_where(f: dict) -> str:
    return (f"fact tracking under {_e(f['model'])} ({_e(f['policy'])}); embedding {_e(f['embedding']['model'])}, "
            f"presence cosine ≥ {f['threshold']}")


def _facts_verdict(facts: dict | None) -> str:
    if facts is None:
        return "<span class='muted'>none tracked (give <code>--fact TEXT</code>)</span>"
    left = [f for f in facts["facts"] if f["departures"]]
    gone = [f for f in facts["facts"] if f["final_state"] == "gone"]
    text = f"{len(left)} of {len(facts['facts'])} fact(s) left the window"
    if left:
        first = min(left, key=lambda f: f["departures"][0]["step"])
        text += f", the first at step {first['departures'][0]['step']} (“{_e(first['fact'][:80])}”)"
    text += f"; {len(gone)} gone at the last step"
    return text + f" <span class='from'>— {_facts_where(facts)}</span>"


def _drift_where(d: dict) -> str:
    under = f"under {_e(d['model'])} ({_e(d['policy'])})" if d.get("model") else "over the recorded window"
    goal = d["goal"]
    src = {"option": "--goal", "config": "drift.goal in the config"}.get(goal.get("source"))
    if src is None:
        seqs = goal.get("seqs") or []
        src = "the session's opening" + (f" (message{'s' if len(seqs) > 1 else ''} {', '.join(map(str, seqs))})"
                                          if seqs else "")
    return f"drift curve {under}; goal: {_e(src)}; embedding {_e(d.get('embedding_model'))}"


def _drift_verdict(d: dict) -> str:
    s = d["summary"]
    if d.get("state") == "no_goal":
        return f"not judged: {_e(d['goal']['explanation'])}"
    if not s["judged_steps"]:
        return "not judged: no assistant output long enough to judge"
    text = (f"<span class='pill'>{_e(s['final_verdict'])}</span> at the last step (score {s['final_score']}/100); "
            f"worst {_e(s['worst_verdict'])} ({s['worst_score']}) at step {s['worst_step']}")
    if s.get("goal_left_window_step"):
        text += f"; the goal left the window at step {s['goal_left_window_step']}"
    return text + f" <span class='from'>— {_drift_where(d)}</span>"


# ---------------------------------------------------------------- utilization and events


def _utilization(replays: list[dict]) -> list[str]:
    from ..tokens.fidelity import fidelity_text
    from .plots import svg_text, utilization_plot

    out = ["<h2>Context window utilization</h2>"]
    n = max(len(r["steps"]) for r in replays)
    if n == 1:  # one point is no curve: say it
        out.append("<p>One model call: " + "; ".join(
            f"under {_e(_replay_name(r))} its window held {r['steps'][0]['window_tokens']:,} tokens, "
            f"{r['steps'][0]['utilization']:.0%} of the {r['limit']:,}-token limit{_estimate(r)}"
            for r in replays) + ".</p>")
    elif n:
        out.append(svg_text(utilization_plot(None, replays, title="window / context limit per step")))
    rows = []
    for r in replays:
        s = r["summary"]
        rows.append([_e(r["model"]), _e(r["policy"]), f"{r['limit']:,}", str(s["steps"]),
                     _e(s["first_loss_step"] or "none"),
                     f"{s['peak_utilization']:.0%} (step {s['peak_step']})" if s["peak_utilization"] is not None
                     else "",
                     str(s["compactions"]), str(len(s["would_fail_steps"])),
                     _e(fidelity_text(r.get("fidelity") or {})), _e(r["token_kind"])])
    out.append(_table(["model", "policy", "limit", "steps", "first loss", "peak", "compactions", "would fail",
                       "recorded vs computed", "tokens"], rows, {2, 3, 6, 7}))
    for r in replays:  # where each replay's limits come from: assumed, borrowed, bounded by a call
        for note in r.get("model_notes") or ():
            out.append(f"<p class='muted'>{_e(r['model'])}: {_e(note)}</p>")
        if r.get("overhead"):  # what a what-if carries that the log does not hold
            out.append(f"<p class='muted'>{_e(r['model'])}: every window counts ≈{r['overhead']['tokens']:,} tokens "
                       f"not in the log (system prompt, tools), estimated: {_e(r['overhead']['rests_on'])}</p>")
    return out


def _events(replays: list[dict]) -> list[str]:
    rows = []
    for r in replays:
        for run in event_runs(r["steps"]):
            words = run.words()
            what = "<br>".join(_e(label) for label, _ in words)
            detail = "<br>".join(_e(d) for _, d in words)
            rows.append([_e(r["model"]), _e(run.step_text()), _e(run.seq_text()), what, detail,
                         _e(_seqs(run.lost()))])
        for e in r.get("after_last_call") or ():  # the log's records after its last call: no window shows them
            rows.append([_e(r["model"]), "after the last call", _e(e.get("at", "")), _e(event_label(e)),
                         _e(event_detail(e)), ""])
    out = ["<h2>Eviction and compaction events</h2>"]
    if not rows:
        return out + ["<p class='muted'>No eviction, clearing, compaction or overflow.</p>"]
    out.append("<p class='muted'>Steps in a row with alike events are one row; its figures are the range they "
               "took (counts and lost messages add up over the row).</p>")
    return out + [_table(["model", "steps", "seq", "event", "what happened", "lost at these steps (seqs)"], rows)]


# ---------------------------------------------------------------- facts and drift


def _svg_file(plot: Any, data: dict[str, Any], title: str) -> str:
    """Run a plot function that writes a file, and return its SVG as inline text."""
    import re
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        path = plot(Path(d) / "plot.svg", data, title=title)
        text = Path(path).read_text(encoding="utf-8")
    text = text[text.index("<svg"):]
    return re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)


def _cause_words(cause: dict | None) -> str:
    if not cause:
        return ""
    if cause.get("event"):
        return event_detail(cause["event"])
    return cause["type"] + (" (recorded)" if cause.get("recorded") else "")


def _facts_section(data: dict | None, why: str) -> list[str]:
    from .plots_facts import facts_plot

    if data is None:
        return ["<h2>Facts</h2>", f"<p class='muted'>{why}</p>"]
    out = [f"<h2>Facts: when each left the window (under {_e(data['model'])}, {_e(data['policy'])})</h2>",
           f"<p class='from'>{_facts_where(data)}</p>"]
    if data["steps"]:
        out.append(_svg_file(facts_plot, data, "facts in the window"))
    rows = []
    for f in data["facts"]:
        left = ", ".join(str(d["step"]) for d in f["departures"]) or "never"
        rows.append([_e(f["fact"]), _e(f["first_appeared"] or "never"), _e(f["last_present"] or ""), _e(left),
                     _e(_cause_words(f.get("cause"))), _e(f["final_state"].replace("_", " "))])
    out.append(_table(["fact", "first in window", "last present", "left at step", "how it left", "at the last step"],
                      rows, {1, 2}))
    return out


def _drift_section(rep: dict) -> list[str]:
    from .plots_drift import drift_plot

    out = ["<h2>Drift from the goal</h2>", f"<p>{_drift_verdict(rep)}</p>"]
    if rep.get("state") == "no_goal" or not rep["summary"]["judged_steps"]:
        return out
    out.append(f"<p>Goal: <em>{_e(rep['goal']['text'][:300])}</em></p>")
    if len(rep["steps"]) > 1:
        out.append(_svg_file(drift_plot, rep, "goal drift (verdict bands shaded)"))
    rows = []
    last = None
    for st in rep["steps"]:
        if st["verdict"] != last or st["events"]:
            rows.append([str(st["step"]), _e(st["score"]), _e(st["verdict"]), f"<pre>{_e(st['explanation'])}</pre>"])
            last = st["verdict"]
    out.append(_table(["step", "score", "verdict", "why"], rows, {0, 1}))
    return out


# ---------------------------------------------------------------- the fullest window


def _fullest_window(ws: Workspace, sid: str, replays: list[dict]) -> list[str]:
    """The fullest window of any replay shown: the one most worth reading message by message."""
    from .. import api

    candidates = [(st, r) for r in replays for st in r["steps"]]
    if not candidates:
        return []
    worst, rep = max(candidates, key=lambda c: c[0]["utilization"])
    model = None if rep is replays[0] else rep["model"]
    win = api.window(sid, worst["step"], model=model, policy=rep["policy"], store=ws).window
    out = [f"<h2>The window at the fullest step (step {worst['step']}, {worst['utilization']:.0%} "
           f"under {_e(rep['model'])}, {_e(rep['policy'])})</h2>"]
    rows = []
    for m in win["messages"]:
        text = m["text"] or ""
        if m["tool_calls"]:
            text += "\n→ " + "; ".join(f"{c['name']}({c['arguments']})" for c in m["tool_calls"])
        if len(text) > 600:
            text = text[:600] + " …"
        rows.append([str(m["seq"]), _e(m["role"] + (f":{m['name']}" if m.get("name") else "")),
                     f"<span class='{_e(m['state'])}'>{_e(m['state'])}</span>", f"{m['tokens']:,}",
                     f"<pre>{_e(text)}</pre>"])
    return out + [_table(["seq", "role", "state", "tokens", "text"], rows, {0, 3})]
