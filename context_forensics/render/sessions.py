"""``ctxf sessions`` and ``ctxf show``: the session list, and one session's messages."""

from __future__ import annotations

from typing import Iterable

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .common import message_text, preview, safe, step_label

def sessions_table(console: Console, rows: list[dict]) -> None:
    if not rows:
        console.print("no sessions in the store (add some with `ctxf ingest PATH`)")
        return
    headers = ["id", "format", "agent", "model", "task", "outcome", "msgs", "steps"]
    cells = [[r["id"], r["format"], r.get("agent") or "", r.get("model") or "", r.get("task") or "", r["outcome"],
              str(r["message_count"]), str(r["step_count"])] for r in rows]
    # Every identifying cell is shown whole: ids, formats, models and tasks are what other
    # commands take. The title gets what is left (from 20 columns), else it is left out; when
    # even the identifying columns do not fit, the message count is left out and model, task
    # and format fold (whole, over lines) rather than being cut.
    def layout() -> tuple[dict[str, int], int]:
        widths = {h: max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)}
        return widths, console.width - sum(widths.values()) - (3 * len(headers) + 1)  # padding, gaps, edges

    folding = ("model", "task")

    def fold(widths: dict[str, int], spare: int, least: int) -> int:
        while spare < 0 and max(widths[h] for h in folding) > least:
            widths[max(folding, key=lambda h: widths[h])] -= 1
            spare += 1
        return spare

    widths, spare = layout()
    spare = fold(widths, spare, 20)  # a long model name over two lines costs less than a column
    notes = []
    for dropped in ("agent", "msgs", "format"):  # the agent first: the format mostly names it
        if spare >= 0:
            break
        i = headers.index(dropped)
        headers.pop(i)
        for c in cells:
            c.pop(i)
        widths, spare = layout()
        spare = fold(widths, spare, 20)
        notes.append(dropped)
    spare = fold(widths, spare, 10)
    with_title = spare >= 3 + 20
    if not with_title:
        notes.append("titles")
    table = Table(box=box.SIMPLE_HEAD)
    for h in headers:
        table.add_column(h, justify="right" if h in ("msgs", "steps") else "left", width=widths[h],
                         overflow="fold", no_wrap=h not in folding)
    if with_title:
        table.add_column("title", overflow="ellipsis", no_wrap=True, width=spare - 3)
    for r, c in zip(rows, cells):
        outcome_style = {"success": "green", "failure": "red"}.get(r["outcome"], "dim")
        shown = [safe(v) if h in ("model", "task") else v for h, v in zip(headers, c)]
        shown[headers.index("outcome")] = Text(r["outcome"], style=outcome_style)
        table.add_row(*shown, *([preview(r.get("title"), 60)] if with_title else []))
    console.print(table)
    console.print(f"{len(rows)} session(s)" + (f" ({', '.join(notes)} on a wider terminal, or --json)"
                                               if notes else ""), highlight=False)


def show_session(console: Console, session: dict, messages: Iterable[dict]) -> None:
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")  # a long source path is shown whole, folded, never cut
    for key in ("id", "format", "title", "model", "task", "outcome", "started_at", "parent_id", "source"):
        if session.get(key):
            head.add_row(key, safe(str(session[key])))
    calls = session["step_count"]
    head.add_row("messages", f"{session['message_count']} ({calls} model call{'' if calls == 1 else 's'})")
    console.print(head)
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("seq", justify="right")
    table.add_column("step", justify="right")
    table.add_column("role")
    table.add_column("kind")
    table.add_column("tokens", justify="right")
    table.add_column("text", overflow="fold")
    recorded = False  # the footer explains the tokens column only when some figure was recorded
    for m in messages:
        kind = "" if m["kind"] == "message" else m["kind"]
        usage = m.get("usage") or {}
        tokens = ""
        if usage.get("prompt_tokens") is not None:
            tokens = f"{usage['prompt_tokens']:,}→{usage.get('completion_tokens') or 0:,}"
            recorded = True
        label = m["role"] + (f":{m['name']}" if m.get("name") else "")
        table.add_row(str(m["seq"]), step_label({"step": m.get("step"), "joined_step": m.get("joins_step")}),
                      safe(label, 24), kind, tokens, preview(message_text(m), 160))
    console.print(table)
    console.print(Text("step: the model call an assistant message makes (replay --at STEP), →k the first step "
                       "whose window holds the message"
                       + (" · tokens: prompt→completion as recorded by the log" if recorded else ""), style="dim"))
