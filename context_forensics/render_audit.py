"""Rich rendering of an audit: one row per session, one column per rule, totals."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .render import preview, safe

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
        text.append(f" {fig}")
    if res["status"] == "fail" and res.get("step"):
        text.append(f" @{res['step']}", style="dim")
    return text


def audit_view(console: Console, report: dict[str, Any]) -> None:
    rules = report["rules"]
    table = Table(box=box.SIMPLE_HEAD, title="ctxf audit", title_justify="left")
    table.add_column("session", no_wrap=True, min_width=12)
    table.add_column("title", overflow="ellipsis", no_wrap=True, max_width=24)
    for r in rules:  # headers wrap at the underscores; cells are short
        table.add_column(r["name"].replace("_", " ") + (" ⚑" if r["fail"] else ""), justify="left",
                         overflow="fold", min_width=9)
    for s in report["sessions"]:
        by_rule = {res["rule"]: res for res in s["results"]}
        table.add_row(s["id"], preview(s.get("title"), 28), *(_cell(by_rule.get(r["name"])) for r in rules))
    console.print(table)
    for d in report.get("divergences") or []:
        div = d.get("divergence")
        line = Text(f"divergence {d['task']}: ", style="bold")
        if d.get("error"):
            line.append_text(safe(d["error"]))
        elif div is None:
            line.append("the runs never diverge")
        else:
            line.append_text(safe(f"{div['cause']} at step {div['a_step']} (success {d['a']}) / "
                                  f"step {div['b_step']} (failure {d['b']})"))
        console.print(line)
    t = report["totals"]
    console.print(
        f"{t['sessions']} session(s) · {t['pass']} passed · {t['fail']} failed ({t['failing']} failing the build) · "
        f"{t['skipped']} skipped · {t['error']} error(s)   ⚑ = fails the build", highlight=False)
    for s in report["sessions"]:
        for res in s["results"]:
            if res["status"] in ("fail", "error"):
                console.print(Text(f"  {s['id']} {res['rule']}: ", style="dim") + safe(res["message"]))


@contextmanager
def progress_bar(console: Console, label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr (only on a terminal); yields the ``progress(done, total)`` callback."""
    if not console.is_terminal:
        yield lambda done, total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=console, transient=True)
    task = bar.add_task(label, total=None)
    with bar:
        yield lambda done, total: bar.update(task, completed=done, total=total)
