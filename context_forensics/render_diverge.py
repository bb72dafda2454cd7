"""Rich rendering of ``ctxf diverge``: the divergence, the two events side by side, the context
state of both runs, the aligned events around it, and the window-similarity curve.

All log text goes through ``render.safe`` / ``render.preview`` (inert: no markup, no escapes).
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

from .render import curve, preview, safe

CAUSE_STYLE = {
    "system_prompt": "magenta",
    "user_input": "blue",
    "tool_output": "yellow",
    "assistant_action": "red",
    "context_window": "bold red",
    "run_ended": "cyan",
}
OP_STYLE = {"match": "green", "similar": "green", "preexisting": "dim", "detour": "dim", "mismatch": "red",
            "a_only": "yellow", "b_only": "yellow"}
OP_MARK = {"match": "=", "similar": "≈", "preexisting": "·", "detour": "~", "mismatch": "≠", "a_only": "+a",
           "b_only": "+b"}
ROWS_BEFORE, ROWS_AFTER = 3, 12


def _run_line(label: str, run: dict) -> Text:
    return Text.assemble(
        (f"{label} ", "bold"), run["id"], "  ", safe(run["format"]), f"/{run['protocol']}  ",
        (safe(run.get("outcome") or "unknown").plain, "green" if run.get("outcome") == "success" else
         "red" if run.get("outcome") == "failure" else ""),
        f"  {run['steps']} steps, {run['aligned_events']} events aligned  ", preview(run.get("task") or "", 40),
    )


def _event_panel(title: str, ev: dict | None, pos: str) -> Panel:
    if ev is None:
        return Panel(Text("(run ended)", style="dim"), title=title, subtitle=pos, expand=True)
    body = Text()
    body.append(f"{ev['type']}", style="bold")
    if ev.get("tool"):
        body.append(f" via {ev['tool']}", style="dim")
    if ev.get("returncode") is not None:
        body.append(f"  rc={ev['returncode']}", style="dim")
    body.append("\n")
    body.append_text(safe(ev["display"], 200))
    text = ev.get("text") or ""
    if text and text != ev["display"]:
        lines = text.split("\n")
        body.append("\n")
        body.append_text(safe("\n".join(lines[:14]) + (f"\n… {len(lines) - 14} more line(s)" if len(lines) > 14 else ""),
                             1400))
    return Panel(body, title=title, subtitle=pos, expand=True)


def _pos(d: dict, side: str) -> str:
    step, seq = d.get(f"{side}_step"), d.get(f"{side}_seq")
    return f"step {step if step is not None else '–'} · seq {seq if seq is not None else '–'}"


def _diff_text(lines: list[str]) -> Text:
    t = Text()
    for line in lines:
        style = "green" if line.startswith("+") and not line.startswith("+++") else \
            "red" if line.startswith("-") and not line.startswith("---") else \
            "cyan" if line.startswith("@@") else "dim"
        seg = safe(line, 200)
        seg.stylize(style)
        t.append_text(seg)
        t.append("\n")
    return t


def _context_table(ctx: dict) -> Table:
    table = Table(box=box.SIMPLE_HEAD, title="context at the divergence", title_justify="left")
    for col in ("run", "step", "window", "util", "kept", "lost", "lost events", "facts gone"):
        table.add_column(col, justify="right" if col in ("step", "window", "util", "kept", "lost") else "left",
                         overflow="fold")
    for side in ("a", "b"):
        c = ctx[side]
        counts = c.get("counts") or {}
        lost = sum(counts.get(k, 0) for k in ("evicted", "cleared", "summarized")) if counts else None
        facts = c.get("facts_gone")
        facts_text = safe("; ".join(facts), 120) if facts else Text("none" if facts == [] else
                                                                   (c.get("facts_note") or "n/a"), style="dim")
        table.add_row(
            side.upper(), str(c.get("step") if c.get("step") is not None else "–"),
            f"{c['window_tokens']:,}" if c.get("window_tokens") is not None else "–",
            f"{c['utilization']:.0%}" if c.get("utilization") is not None else "–",
            str(counts.get("kept", "–")), str(lost if lost is not None else "–"),
            preview("; ".join(f"{e['seq']}:{e['event']}" for e in c.get("lost_events", [])[:4]), 80),
            facts_text,
        )
    return table


def _aligned_table(rows: list[dict], first: int | None, *, all_rows: bool) -> tuple[Table, int]:
    table = Table(box=box.SIMPLE_HEAD, title="aligned events", title_justify="left")
    for col in ("", "type", "A step", "A", "B step", "B", "sim"):
        table.add_column(col, justify="right" if col in ("A step", "B step", "sim") else "left",
                         no_wrap=col in ("", "type"), overflow="ellipsis")
    if all_rows or first is None:
        lo, hi = 0, len(rows)
    else:
        lo, hi = max(0, first - ROWS_BEFORE), min(len(rows), first + ROWS_AFTER)
    for k in range(lo, hi):
        r = rows[k]
        style = OP_STYLE.get(r["op"], "")
        mark = Text(OP_MARK.get(r["op"], "?") + (" ◀" if k == first else ""), style=style + (" bold" if k == first else ""))
        sim = "" if r["similarity"] is None else f"{r['similarity']:.2f}"
        table.add_row(mark, r["type"], str(r["a_step"] or ""), preview(r["a"] or "", 50), str(r["b_step"] or ""),
                      preview(r["b"] or "", 50), sim)
    return table, len(rows) - (hi - lo)


def diverge_view(console: Console, report: dict, *, all_rows: bool = False) -> None:
    """One pair: who, where and why they diverged, side by side, with context and curve."""
    a, b = report["a"], report["b"]
    console.print(_run_line("A", a))
    console.print(_run_line("B", b))
    for p in report.get("preexisting", []):
        what = "line overlap" if p.get("measure") == "lines" else "similarity"
        sim = "" if p.get("similarity") is None else f" ({what} {p['similarity']:.2f})"
        console.print(Text(f"pre-existing: {p['cause']} differs{sim}: {p['note']}", style="dim"))
    if report.get("detours"):
        n = len(report["detours"])
        console.print(Text(f"{n} read-only detour(s) tolerated (both runs looked around, then rejoined)", style="dim"))
    d = report["divergence"]
    if d is None:
        console.print(Text("no divergence: the runs match event for event", style="bold green"))
    else:
        head = Text.assemble(("diverged: ", "bold"), (d["cause"], CAUSE_STYLE.get(d["cause"], "")),
                             f"   A {_pos(d, 'a')}   B {_pos(d, 'b')}")
        if d.get("similarity") is not None:
            head.append(f"   similarity {d['similarity']:.2f} ({d.get('measure')}, threshold {d['threshold']:.2f})",
                        style="dim")
        console.print(head)
        console.print(Text(d["explanation"], style="italic"))
        grid = Table.grid(expand=True, padding=(0, 1))
        grid.add_column(ratio=1)
        grid.add_column(ratio=1)
        grid.add_row(_event_panel("A", d["a_event"], _pos(d, "a")), _event_panel("B", d["b_event"], _pos(d, "b")))
        console.print(grid)
        if d.get("diff"):
            console.print(Panel(_diff_text(d["diff"]), title="diff A → B", expand=True))
        detail = d.get("detail") or {}
        for item in detail.get("lost_in_one_window", [])[:6]:
            console.print(Text.assemble(("  lost in ", "dim"), item["run"].upper(), ("'s window only: ", "dim"),
                                        preview(item["event"], 90)))
        change = detail.get("first_state_change")
        if change and (change.get("a_step"), change.get("b_step")) != (d.get("a_step"), d.get("b_step")):
            console.print(Text.assemble(("first differing change: ", "dim"),
                                        f"A step {change.get('a_step') or '–'} ", preview(change.get("a") or "–", 50),
                                        "  |  ", f"B step {change.get('b_step') or '–'} ",
                                        preview(change.get("b") or "–", 50)))
        rejoined = detail.get("rejoined")
        if rejoined:
            console.print(Text(f"the runs line up again at A step {rejoined.get('a_step') or '–'}, "
                               f"B step {rejoined.get('b_step') or '–'}", style="dim"))
        if d.get("context"):
            console.print(_context_table(d["context"]))
    table, hidden = _aligned_table(report["aligned"], d["row"] if d else None, all_rows=all_rows)
    console.print(table)
    if hidden:
        console.print(Text(f"{hidden} aligned row(s) hidden (--all shows them; --json has everything)", style="dim"))
    if report.get("curve"):
        console.print(Text("window similarity A vs B per aligned model call (Jaccard over aligned events)",
                           style="bold"))
        for line in curve([p["similarity"] for p in report["curve"]], height=4):
            console.print(line)


def pairs_table(console: Console, rows: list[dict]) -> None:
    """``--all-tasks``: one line per pair."""
    table = Table(box=box.SIMPLE_HEAD)
    for col in ("task", "A (success)", "B (failure)", "cause", "A step", "B step", "similarity"):
        table.add_column(col, justify="right" if col in ("A step", "B step", "similarity") else "left")
    for r in rows:
        cause = r.get("cause") or "none"
        sim = "" if r.get("similarity") is None else f"{r['similarity']:.2f}"
        table.add_row(preview(r.get("task") or "", 40), r["a"], r["b"], Text(cause, style=CAUSE_STYLE.get(cause, "green")),
                      str(r.get("a_step") or "–"), str(r.get("b_step") or "–"), sim)
    console.print(table)
    if not rows:
        console.print(Text("no task has both a success and a failure run in the store", style="dim"))


class EmbedProgress:
    """A rich progress bar on stderr for embedding, shown only on a terminal."""

    def __init__(self, console: Console, label: str = "embed"):
        self.console = console
        self.label = label
        self.bar: Progress | None = None
        self.task: Any = None

    def __enter__(self) -> EmbedProgress:  # noqa: PYI034
        return self

    def __call__(self, done: int, total: int) -> None:
        if not self.console.is_terminal or total == 0:
            return
        if self.bar is None:
            self.bar = Progress(TextColumn(self.label), BarColumn(), MofNCompleteColumn(), console=self.console,
                                transient=True)
            self.bar.start()
            self.task = self.bar.add_task("", total=total)
        self.bar.update(self.task, completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


__all__ = ["EmbedProgress", "diverge_view", "pairs_table"]
