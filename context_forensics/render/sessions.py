"""``ctxf sessions`` and ``ctxf show``: the session list, and one session's messages."""

from __future__ import annotations

from typing import Iterable

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..records import NAIVE_TIMES_KEY, NAIVE_TIMES_NOTE
from .common import message_text, preview, safe, step_label

_NUMBERS = ("msgs", "steps")
_COPIED = ("id", "model", "task")  # what other commands take: never cut, never broken over lines
_OPTIONAL = ("agent", "msgs", "format")  # left out in this order when the row does not fit
_MOVABLE = ("model", "task")  # moved, whole, onto a line of their own under the row, in this order
_GAP = 3  # between two columns (rich's SIMPLE_HEAD: padding, no rule, padding)


def sessions_table(console: Console, rows: list[dict]) -> None:
    """The session list. An id, a model or a task is shown whole on one line, never cut or
    folded: it is what other commands take. A column empty in every row is left out. When a
    row does not fit, the title goes first, then the agent, the message count and the format;
    then the model and after it the task move onto a line of their own under the row (whole,
    even past the edge, where the terminal wraps it), and the columns left out come back
    where that made room."""
    if not rows:
        console.print("no sessions in the store (add some with `ctxf ingest PATH`)")
        return
    rows, depth = family_order(rows)
    cells: list[dict[str, Text]] = []
    for r in rows:
        cells.append({
            "id": Text.assemble(("  " * (depth[r["id"]] - 1) + "└ " if depth[r["id"]] else "", "dim"), r["id"]),
            "format": Text(r["format"]), "agent": safe(r.get("agent") or "", newlines=False),
            "model": safe(r.get("model") or "", newlines=False), "task": safe(r.get("task") or "", newlines=False),
            "outcome": Text(r["outcome"], style={"success": "green", "failure": "red"}.get(r["outcome"], "dim")),
            # a count of messages rebuilt from a display record (not what the model was sent): marked
            "msgs": Text(str(r["message_count"])) + (Text("*", style="yellow") if r.get("reconstructed") else Text()),
            "steps": Text(str(r["step_count"])),
        })
    headers = [h for h in ("id", "format", "agent", "model", "task", "outcome", "msgs", "steps")
               if any(c[h].plain for c in cells)]  # a column empty in every row says nothing
    widths = {h: max(len(h), *(c[h].cell_len for c in cells)) for h in headers}
    # a title that only repeats the task (a benchmark instance) is not shown twice: cut short
    # beside it, it read like a cut task ("astropy__astropy-76…")
    titles = [" ".join((r.get("title") or "").split()) for r in rows]
    titles = ["" if t == (r.get("task") or "") else t for t, r in zip(titles, rows)]
    title_want = max(len(t) for t in titles)

    def need(cols: list[str]) -> int:
        return sum(widths[h] for h in cols) + _GAP * (len(cols) - 1) + 4  # the two-space margins

    def shown(dropped: set[str], moved: list[str]) -> list[str]:
        return [h for h in headers if h not in dropped and h not in moved]

    dropped: set[str] = set()
    moved: list[str] = []
    for h in _OPTIONAL:
        if need(shown(dropped, moved)) <= console.width:
            break
        if h in headers:
            dropped.add(h)
    for h in _MOVABLE:
        if need(shown(dropped, moved)) <= console.width:
            break
        if h in headers:
            moved.append(h)
    if moved:  # the room a moved value left: the columns left out come back, most useful first
        for h in reversed(_OPTIONAL):
            if h in dropped and need(shown(dropped - {h}, moved)) <= console.width:
                dropped.discard(h)
    cols = shown(dropped, moved)
    spare = console.width - need(cols) - _GAP
    title_width = min(spare, title_want) if not moved and title_want else 0
    with_title = title_width >= min(20, title_want) and title_width > 0

    def line(values: list[Text]) -> Text:
        out = Text("  ")
        for i, (h, v) in enumerate(zip(cols, values)):
            pad = " " * (widths[h] - v.cell_len)
            out.append_text(Text(pad) + v if h in _NUMBERS else v + Text(pad))
            if i < len(cols) - 1:
                out.append(" " * _GAP)
        return out

    def emit(text: Text) -> None:  # never hard-wrapped: a long id or task stays one line, whole
        text.rstrip()
        console.print(text, soft_wrap=True)

    head = line([Text(h) for h in cols])
    if with_title:
        head.append(" " * _GAP + "title")
    console.print()
    emit(Text(head.plain, style="bold"))
    emit(Text(" " + "─" * (need(cols) - 2 + (_GAP + title_width if with_title else 0)) + " "))
    indent = " " * (2 + widths["id"] + _GAP)
    label = max((len(h) for h in moved), default=0)
    for c, title in zip(cells, titles):
        row = line([c[h] for h in cols])
        if with_title:
            row.append(" " * _GAP)
            row.append_text(preview(title, title_width))
        emit(row)
        for h in moved:
            if c[h].plain:
                emit(Text(indent) + Text(h.ljust(label) + " ", style="dim") + c[h])
    console.print()
    notes = [h for h in _OPTIONAL if h in dropped]
    if titles and any(titles) and not with_title:
        notes.append("titles")
    nested = sum(1 for d in depth.values() if d)
    rebuilt = sum(1 for r in rows if r.get("reconstructed"))
    console.print(f"{len(rows)} session(s)" + (f" ({', '.join(notes)} on a wider terminal, or --json)"
                                               if notes else "")
                  + (f" · {nested} started by another session (└, under the one that started it)" if nested else ""),
                  highlight=False)
    if rebuilt:
        console.print(Text(f"* {rebuilt} session(s) reconstructed from what the agent displayed, not from what the "
                           "model was sent (`ctxf show SESSION` says from what)", style="yellow"))


def family_lines(session: dict) -> list[tuple[str, Text]]:
    """``show``'s head rows naming the session that started this one (and the call that did)
    and the sessions it started (one row each), with the sub-agents its log names that are not
    in the store."""
    out: list[tuple[str, Text]] = []
    parent = session.get("parent")
    if parent is None and session.get("parent_id"):
        parent = {"id": session["parent_id"], "stored": True}
    if parent:
        text = Text(parent["id"]) + _spawn_text(parent)
        if not parent.get("stored", True):
            text.append(" (not in the store: ingest its log to see it)", style="dim")
        out.append(("parent", text))
    children = session.get("children") or []
    for i, c in enumerate(children):
        text = Text(c["id"]) + Text(f" {c.get('role') or 'subagent'}", style="dim")
        if c.get("agent_id"):
            text.append_text(safe(f" {c['agent_id']}", newlines=False))
        text.append_text(_spawn_text(c))
        steps = c.get("step_count") or 0
        text.append(f" · {steps} model call{'' if steps == 1 else 's'}", style="dim")
        out.append(("children" if i == 0 else "", text))
    stored = {c.get("agent_id") for c in children}
    missing = [a for a in ((session.get("metadata") or {}).get("subagents") or {}) if a not in stored]
    if missing:
        out.append(("not stored", safe(f"sub-agent{'' if len(missing) == 1 else 's'} {', '.join(missing[:8])}"
                                       + (" …" if len(missing) > 8 else "")
                                       + " started here, whose logs are not in the store", newlines=False,
                                       style="dim")))
    return out


def _spawn_text(s: dict) -> Text:
    """`` · Task toolu_01… "description" (Explore, completed)`` from what the logs say of a call."""
    text = Text()
    if s.get("tool") or s.get("tool_call_id"):
        text.append_text(safe(" · " + " ".join(v for v in (s.get("tool"), s.get("tool_call_id")) if v), newlines=False))
    if s.get("description"):
        text.append(" ")
        text.append_text(safe(f"\u201c{s['description']}\u201d", newlines=False))
    extra = [v for v in (s.get("subagent_type"), s.get("status")) if v]
    if extra:
        text.append_text(safe(f" ({', '.join(extra)})", newlines=False))
    return text


def family_order(rows: list[dict]) -> tuple[list[dict], dict[str, int]]:
    """``rows`` with each session's children (sub-agents) right after it, and each row's depth
    (0: no parent among the rows; 1: a child of one; ...). Otherwise in the order given."""
    ids: set[str] = {r["id"] for r in rows}
    kids: dict[str, list[dict]] = {}
    roots: list[dict] = []
    for r in rows:
        pid = (r.get("parent") or {}).get("id") or r.get("parent_id")
        (kids.setdefault(pid, []) if pid in ids and pid != r["id"] else roots).append(r)
    out: list[dict] = []
    depth: dict[str, int] = {}
    stack = [(r, 0) for r in reversed(roots)]
    while stack:
        r, d = stack.pop()
        if r["id"] in depth:  # a parent link loop: each row once
            continue
        depth[r["id"]] = d
        out.append(r)
        stack.extend((c, d + 1) for c in reversed(kids.get(r["id"], [])))
    out += [r for r in rows if r["id"] not in depth]  # rows only a loop reaches: as given
    for r in out[len(depth):]:
        depth[r["id"]] = 0
    return out, depth


def show_session(console: Console, session: dict, messages: Iterable[dict]) -> None:
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")  # a long source path is shown whole, folded, never cut
    for key in ("id", "format", "title", "model", "task", "outcome", "started_at", "source"):
        if session.get(key):
            head.add_row(key, safe(str(session[key])))
    naive = (session.get("metadata") or {}).get(NAIVE_TIMES_KEY)
    if naive:  # times the log recorded with no zone: never taken as UTC
        head.add_row("times", f"{NAIVE_TIMES_NOTE}: {naive} of its times were recorded with no zone (kept as "
                             "recorded); a time with a Z is UTC")
    for key, value in family_lines(session):
        head.add_row(key, value)
    rebuilt = session.get("reconstructed") or (session.get("metadata") or {}).get("reconstructed")
    if rebuilt:  # the messages are not what the model was sent: said before any of them
        head.add_row(Text("reconstructed", style="bold yellow"), safe(str(rebuilt)))
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
