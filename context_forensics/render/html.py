"""`ctxf report --html`: one session's forensics as a single self-contained HTML file.

No scripts, no CDN, no network: charts are inline SVG, styles are inline. Every piece of log
text goes through ``_e``: made inert (control characters as escapes, as on the terminal), then
``html.escape``, so no tag, attribute or entity from a log survives.
"""

from __future__ import annotations

import html
from datetime import datetime, timezone
from typing import Any

from ..inert import inert
from ..version import __version__
from ..config.settings import Config
from ..store.db import Store

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#1d2330;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #dde;padding-bottom:.2rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0}th,td{border-bottom:1px solid #eef;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f4f6fb}td.num{text-align:right;font-variant-numeric:tabular-nums}
.meta td:first-child{font-weight:600;width:10rem}.muted{color:#667}.kept{}.evicted{color:#b3261e}.cleared{color:#9a6700}
.summarized{color:#6f42c1}.outside_local{color:#0969da}.pill{display:inline-block;padding:0 .45rem;border-radius:.6rem;font-size:.8rem;background:#eef}
.bad{background:#fde2e1}.good{background:#dff5e3}pre{white-space:pre-wrap;margin:0;font:12px/1.35 ui-monospace,Menlo,monospace}
svg{max-width:100%;height:auto}
"""


def _e(text: Any) -> str:
    return html.escape(inert(text))


def _table(head: list[str], rows: list[list[str]], numeric: set[int] = frozenset()) -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td class='num'>{c}</td>" if i in numeric else f"<td>{c}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def session_report(store: Store, sid: str, config: Config, *, models: list[str] | None = None) -> str:
    """The HTML text of the report for one session."""
    from .plots import svg_text, utilization_plot
    from ..tokens.fidelity import fidelity_text
    from ..analysis.replay import replay_session, window_at

    session = store.session(sid)
    alert = config.analysis_thresholds.min_context_utilization_alert
    replays = [replay_session(store, sid, None, config=config, policy="recorded", alert=alert).to_dict()]
    for m in models or []:
        replays.append(replay_session(store, sid, m, config=config, alert=alert).to_dict())
    parts = [f"<h1>ctxf report: {_e(session.get('title') or sid)}</h1>",
             f"<p class='muted'>generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} by ctxf {__version__}</p>"]
    meta = [["id", _e(sid)], ["format", _e(session["format"])], ["model", _e(session.get("model"))],
            ["task", _e(session.get("task"))], ["outcome", _e(session.get("outcome"))],
            ["source", _e(session["source"])],
            ["messages", f"{session['message_count']} ({session['step_count']} model call"
                         f"{'' if session['step_count'] == 1 else 's'})"]]
    parts.append("<table class='meta'>" + "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in meta) + "</table>")

    parts.append("<h2>Context window utilization</h2>")
    if any(r["steps"] for r in replays):
        parts.append(svg_text(utilization_plot(None, replays, title="window / context limit per step")))
    rows = []
    for r in replays:
        s = r["summary"]
        fid = r.get("fidelity") or {}
        rows.append([_e(r["model"]), _e(r["policy"]), f"{r['limit']:,}", str(s["steps"]),
                     _e(s["first_loss_step"] or "none"),
                     f"{s['peak_utilization']:.0%} (step {s['peak_step']})" if s["peak_utilization"] is not None else "",
                     str(s["compactions"]), str(len(s["would_fail_steps"])),
                     _e(fidelity_text(fid)),
                     _e(r["token_kind"])])
    parts.append(_table(["model", "policy", "limit", "steps", "first loss", "peak", "compactions", "would fail",
                         "recorded vs computed", "tokens"], rows, {2, 3, 6, 7}))
    for r in replays:  # where each replay's limits come from: assumed, borrowed, bounded by a call
        for note in r.get("model_notes") or ():
            parts.append(f"<p class='muted'>{_e(r['model'])}: {_e(note)}</p>")

    parts.append("<h2>Eviction and compaction events</h2>")
    ev_rows = []
    for r in replays:
        for st in r["steps"]:
            for e in st["events"]:
                what = e["type"] + (" (recorded)" if e.get("recorded") else " (simulated)" if e["type"] == "compaction" else "")
                detail = e.get("message") or ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("type", "message"))
                ev_rows.append([_e(r["model"]), str(st["step"]), str(st["message_seq"]), _e(what), _e(detail),
                                _e(", ".join(map(str, st["newly_lost"][:12])) + (" …" if len(st["newly_lost"]) > 12 else ""))])
    parts.append(_table(["model", "step", "seq", "event", "detail", "lost at this step"], ev_rows, {1, 2})
                 if ev_rows else "<p class='muted'>No eviction, clearing, compaction or overflow.</p>")

    parts.extend(_analyses(store, sid, config))

    # The fullest window of any replay shown: the one most worth reading message by message.
    candidates = [(st, r) for r in replays for st in r["steps"]]
    if candidates:
        worst, rep = max(candidates, key=lambda c: c[0]["utilization"])
        model = None if rep is replays[0] else rep["model"]
        win = window_at(store, sid, worst["step"], model, config=config, policy=rep["policy"])
        parts.append(f"<h2>The window at the fullest step (step {worst['step']}, {worst['utilization']:.0%} "
                     f"under {_e(rep['model'])}, {_e(rep['policy'])})</h2>")
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
        parts.append(_table(["seq", "role", "state", "tokens", "text"], rows, {0, 3}))
    body = "\n".join(parts)
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width,initial-scale=1'>"
            f"<title>ctxf report {_e(sid)}</title><style>{CSS}</style></head><body>\n{body}\n</body></html>\n")


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


def _analyses(store: Store, sid: str, config: Config) -> list[str]:
    """Fact timelines (when the config lists facts) and the drift curve."""
    return [*_facts_section(store, sid, config), *_drift_section(store, sid, config)]


def _drift_section(store: Store, sid: str, config: Config) -> list[str]:
    from ..analysis.drift import drift_session
    from .plots_drift import drift_plot

    rep = drift_session(store, sid, None, config=config, policy="recorded").to_dict()
    out = ["<h2>Drift from the goal</h2>"]
    summary = rep["summary"]
    if rep.get("state") == "no_goal":
        return out + [f"<p class='muted'>Not judged: {_e(rep['goal']['explanation'])}.</p>"]
    if not summary["judged_steps"]:
        return out + ["<p class='muted'>No assistant output long enough to judge.</p>"]
    out.append(f"<p>Final verdict <span class='pill'>{_e(summary['final_verdict'])}</span> "
               f"({_e(summary['final_score'])}); worst {_e(summary['worst_verdict'])} ({_e(summary['worst_score'])}) "
               f"at step {_e(summary['worst_step'])}. Goal: <em>{_e(rep['goal']['text'][:300])}</em></p>")
    out.append(_svg_file(drift_plot, rep, "goal drift (verdict bands shaded)"))
    rows = []
    last = None
    for st in rep["steps"]:
        if st["verdict"] != last or st["events"]:
            rows.append([str(st["step"]), _e(st["score"]), _e(st["verdict"]), f"<pre>{_e(st['explanation'])}</pre>"])
            last = st["verdict"]
    out.append(_table(["step", "score", "verdict", "why"], rows, {0, 1}))
    return out


def _facts_section(store: Store, sid: str, config: Config) -> list[str]:
    if not config.facts:
        return ["<h2>Facts</h2>", "<p class='muted'>No facts configured (a <code>facts:</code> list in the "
                "config makes this section track them).</p>"]
    from ..embed.embedders import get_embedder
    from ..analysis.facts import track_facts
    from .plots_facts import facts_plot
    from ..analysis.replay import prepare

    prep = prepare(store, sid, None, config=config, policy="recorded")
    report = track_facts(prep, list(config.facts), get_embedder(config.embedding.model), store,
                         threshold=config.analysis_thresholds.fact_presence_cosine,
                         cache_enabled=config.embedding.cache_enabled, ttl_hours=config.embedding.cache_ttl_hours)
    data = report.to_dict()
    out = ["<h2>Facts</h2>"]
    if data["steps"]:
        out.append(_svg_file(facts_plot, data, "facts in the window"))
    rows = []
    for f in data["facts"]:
        cause = f.get("cause") or {}
        rows.append([_e(f["fact"]), _e(f["first_appeared"]), _e(f["last_present"]), _e(f["disappeared_at"]),
                     _e(cause.get("type") or ""), _e(f["final_state"])])
    out.append(_table(["fact", "first appeared", "last present", "left at", "cause", "final state"], rows, {1, 2, 3}))
    return out
