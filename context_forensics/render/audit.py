"""Rich rendering of an audit: one row per session, one column per rule, totals."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .common import fit_columns, hidden_columns_note, min_width, preview, safe

_STYLE = {"pass": ("✓", "green"), "fail": ("✗", "red"), "skipped": ("–", "dim"), "error": ("!", "yellow")}


def _cell(res: dict[str, Any] | None) -> Text:
    if res is None:
        return Text("")
    mark, style = _STYLE[res["status"]]
    fig = res.get("figure")
    if isinstance(fig, float):
        fig = f"{fig:.0%}" if res["rule"] in ("max_utilization", "max_tool_output_share") else f"{fig:g}"
    text = Text(mark, style=style)
    if fig not in (None, ""):
        text.append_text(safe(f" {fig}"))
    if res["status"] == "fail" and res.get("step"):
        text.append(f" @{res['step']}", style="dim")
    if res.get("assumed"):  # computed on assumed limits: not judged
        text.append("~", style="yellow")
    return text


# Column labels short enough for eight rules on an 80-column terminal; the legend names them.
_LABEL = {"max_utilization": "util", "no_overflow": "overflow", "facts_must_persist": "facts",
          "max_drift": "drift", "max_compactions": "compact", "max_tool_output_share": "tool\nshare",
          "no_orphan_tool_results": "orphans", "divergence": "diverge", "context_caused_failure": "context"}


def _table(report: dict[str, Any], rules: list[dict[str, Any]], title: str, *, with_title: bool = True) -> Table:
    table = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left", collapse_padding=True, pad_edge=False,
                  show_edge=False)
    table.add_column("session", no_wrap=True)
    if with_title:
        table.add_column("title", overflow="ellipsis", no_wrap=True, max_width=28)
    for r in rules:
        table.add_column(_LABEL.get(r["name"], r["name"].replace("_", "\n")) + (" ⚑" if r["fail"] else ""),
                         overflow="fold")
    for s in report["sessions"]:
        by_rule = {res["rule"]: res for res in s["results"]}
        title_cell = [preview(s.get("title"), 28)] if with_title else []
        table.add_row(safe(s["id"]), *title_cell, *(_cell(by_rule.get(r["name"])) for r in rules))
    return table


def audit_view(console: Console, report: dict[str, Any]) -> None:
    rules = report["rules"]
    # One table if it fits (the title column goes first); else the rules split over several
    # tables, each as many rule columns as fit beside the session id.
    groups: list[list[dict[str, Any]]] = []
    start = 0
    while start < len(rules) or not groups:
        end = len(rules)
        while end > start + 1 and min_width(console,
                                            _table(report, rules[start:end], "", with_title=False)) > console.width:
            end -= 1
        groups.append(rules[start:end])
        start = end
    for i, group in enumerate(groups):
        title = "ctxf audit" + (f" ({i + 1}/{len(groups)})" if len(groups) > 1 else "")
        table = _table(report, group, title)
        dropped = fit_columns(console, table, ("title",))
        console.print(table)
        if i == 0:
            hidden_columns_note(console, dropped)
    legend = " · ".join(f"{_LABEL.get(r['name'], r['name']).replace(chr(10), ' ')} = {r['name']}" for r in rules
                        if _LABEL.get(r["name"], r["name"]) != r["name"])
    if legend:
        console.print(Text(legend, style="dim"))
    for d in report.get("divergences") or []:
        div = d.get("divergence")
        line = safe(f"divergence {d['task']}: ", style="bold")
        if d.get("error"):
            line.append_text(safe(d["error"]))
        elif div is None:
            line.append("the runs never diverge")
        else:
            line.append_text(safe(f"{div['cause']} at step {div['a_step']} (success {d['a']}) / "
                                  f"step {div['b_step']} (failure {d['b']})"))
        console.print(line)
    t = report["totals"]
    # an input no rule saw (a rule's own error is its session's line below)
    unreadable = [row for row in report.get("errors") or [] if row.get("kind", "unreadable") == "unreadable"]
    console.print(
        f"{t['sessions']} session(s) · {t['pass']} passed · {t['fail']} failed ({t['failing']} failing the build) · "
        f"{t['skipped']} skipped · {t['error']} error(s)"
        + (f" · {len(unreadable)} unreadable input(s)" if unreadable else "") + "   ⚑ = fails the build",
        highlight=False)
    for s in report["sessions"]:
        for res in s["results"]:
            if res["status"] in ("fail", "error") or res.get("figure") == "no_goal":  # no_goal: the reason
                console.print(safe(f"  {s['id']} {res['rule']}: ", style="dim") + safe(res["message"]))
    assumed = [s for s in report["sessions"] if s.get("assumed")]
    if assumed:  # which sessions' limit rules were not judged, and why
        console.print(Text(f"~ = on assumed limits, not judged: {len(assumed)} session(s) name no model the table "
                           "knows; set the rule's model: or map the model in model_mappings", style="yellow"))
        by_reason: dict[tuple[str, int], list[str]] = {}
        for s in assumed:
            by_reason.setdefault((s["assumed"]["reason"], s["assumed"]["limit"]), []).append(s["id"])
        for (reason, limit), ids in by_reason.items():
            shown = ", ".join(ids[:4]) + (f" and {len(ids) - 4} more" if len(ids) > 4 else "")
            console.print(Text("  ") + safe(f"model unknown, assumed {limit:,}-token window ({reason}): "
                                            f"{len(ids)} session(s): {shown}"))
    for row in unreadable:  # no rule saw these: the audit is incomplete (exit 1)
        console.print(Text("  unreadable ", style="yellow") + safe(row["error"]), soft_wrap=True)
    not_read = report.get("not_read") or []
    if not_read:  # seen, parsed, not read by any importer: listed in --json, skipped in JUnit
        console.print(Text(f"{len(not_read)} log-like file(s) of a layout no importer reads were left alone "
                           "(--json lists them; `ctxf formats` lists what ctxf reads)", style="dim"))


def unreadable_problems(console: Console, rows: list[dict[str, Any]]) -> None:
    """Inputs the audit could not read, as ``ctxf ingest`` prints its errors (stderr)."""
    for row in rows:
        console.print(Text("error: ", style="bold red") + safe(row["error"]))
        if row.get("hint"):
            console.print(Text("  hint: ", style="dim") + safe(row["hint"]))


SLOW_SESSION_S = 1.0  # a session's audit this long: the timing line names the slowest


def run_notes(console: Console, report: dict[str, Any]) -> None:
    """Where a distributed audit ran and what it cost (stderr): on worker processes or Ray, or
    when a worker died and a task ran again, or when Ctrl-C stopped it; the per-session timing
    when a session took a second or more. A serial run of quick sessions prints nothing here."""
    ex = report.get("executor") or {}
    run = report.get("run") or {}
    name = ex.get("name")
    if report.get("interrupted"):
        console.print(Text("interrupted: ", style="bold yellow") + Text(
            f"the report holds the {report['totals']['sessions']:,} session(s) audited before Ctrl-C (exit 130)"))
    tm = report.get("timing") or {}
    if tm.get("max_seconds", 0) >= SLOW_SESSION_S:  # where an audit's time went, when a session took long
        console.print(Text(f"audit seconds per session (rules only, measured): median {tm['median_seconds']:,.2f}, "
                           f"p95 {tm['p95_seconds']:,.2f}, slowest {tm['max_seconds']:,.1f} ({tm['slowest']})",
                           style="dim"))
    if name in (None, "serial") and not ex.get("retries"):
        return
    where = f"{name}, {ex.get('workers')} worker(s)" + (f" at {ex['address']}" if ex.get("address") else "")
    bits = [f"audited on {where}"]
    n, wall = report["totals"]["sessions"], run.get("wall_seconds")
    if wall:
        bits.append(f"{n:,} session(s) in {wall:,.1f} s ({n / wall:,.1f} sessions/s)")
    if run.get("driver_per_session_seconds") is not None:
        bits.append(f"driver {1000 * run['driver_per_session_seconds']:.2f} ms/session")
    retries = ex.get("retries") or 0
    if retries:
        bits.append(f"{retries} task run(s) repeated after a worker died")
    console.print(Text("; ".join(bits), style="dim"))
