"""Rich rendering of results. The only module besides cli.py that imports rich.

Text that comes from a log is never interpreted: it goes into ``Text`` objects (no markup)
after control characters are made visible, so a log cannot restyle or drive the terminal.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Iterable

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def safe(text: str | None, limit: int | None = None) -> Text:
    """Log text made inert: no markup, control and bidi characters shown as escapes."""
    s = "" if text is None else str(text)
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "…"
    s = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}", s)
    return Text(s)


def preview(text: str | None, limit: int = 80) -> Text:
    """One line: whitespace collapsed, cut to ``limit``."""
    return safe(" ".join((text or "").split()), limit)


def stdout_console() -> Console:
    return Console(highlight=False, soft_wrap=False)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def print_json(data: Any) -> None:
    """Data to stdout as JSON (never through rich, so it stays machine-readable)."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


# ---------------------------------------------------------------- ingest


def ingest_summary(console: Console, report: dict) -> None:
    t = report["totals"]
    table = Table(box=box.SIMPLE_HEAD, title="ingest", title_justify="left")
    for col in ("file", "format", "status", "sessions", "messages", "skipped", "warnings"):
        table.add_column(col, justify="right" if col in ("sessions", "messages", "skipped", "warnings") else "left")
    for f in report["files"]:
        style = {"failed": "red", "unchanged": "dim"}.get(f["status"], "")
        table.add_row(
            safe(_short_path(f["path"])),
            f["format"] or "?",
            Text(f["status"], style=style),
            str(len(f["sessions"])),
            str(f["messages"]),
            str(sum(f["skipped"].values())),
            str(len(f["warnings"])),
        )
    console.print(table)
    console.print(
        f"{t['files']} file(s): {t['ingested']} ingested, {t['unchanged']} unchanged, "
        f"{t['failed']} failed · {t['sessions']} session(s), {t['messages']} message(s) · "
        f"{t['skipped_records']} record(s) skipped · {t['warnings']} warning(s)"
        + (f" · {t['ignored_files']} file(s) not recognised" if t["ignored_files"] else ""),
        highlight=False,
    )


def ingest_problems(console: Console, report: dict, *, verbose: bool = False) -> None:
    """Errors and warnings to stderr, each naming the file and the place."""
    for f in report["files"]:
        if f["error"]:
            console.print(Text("error: ", style="bold red") + safe(f["error"]))
        shown = f["warnings"] if verbose else f["warnings"][:5]
        for w in shown:
            console.print(Text("warning: ", style="yellow") + safe(w))
        if len(f["warnings"]) > len(shown):
            console.print(
                Text(f"  … {len(f['warnings']) - len(shown)} more warning(s) for this file "
                     "(--verbose shows all)", style="dim")
            )
        if verbose and f["skipped"]:
            skipped = ", ".join(f"{k}: {v}" for k, v in sorted(f["skipped"].items()))
            console.print(Text(f"skipped in {_short_path(f['path'])}: ", style="dim") + safe(skipped))
    if report["ignored"]:
        console.print(
            Text(f"{len(report['ignored'])} file(s) in the walked folders are not session logs "
                 "and were left alone", style="dim")
        )
        if verbose:
            for p in report["ignored"]:
                console.print(Text("  ") + safe(p))


def _short_path(p: str, limit: int = 60) -> str:
    return p if len(p) <= limit else "…" + p[-(limit - 1):]


# ---------------------------------------------------------------- sessions


def sessions_table(console: Console, rows: list[dict]) -> None:
    if not rows:
        console.print("no sessions in the store (add some with `ctxf ingest PATH`)")
        return
    table = Table(box=box.SIMPLE_HEAD)
    for col, just in (("id", "left"), ("format", "left"), ("model", "left"), ("task", "left"),
                      ("outcome", "left"), ("msgs", "right"), ("steps", "right"), ("title", "left")):
        table.add_column(col, justify=just, overflow="ellipsis", no_wrap=col != "title")
    for r in rows:
        outcome_style = {"success": "green", "failure": "red"}.get(r["outcome"], "dim")
        table.add_row(
            r["id"],
            r["format"],
            safe(r.get("model") or "", 28),
            safe(r.get("task") or "", 28),
            Text(r["outcome"], style=outcome_style),
            str(r["message_count"]),
            str(r["step_count"]),
            preview(r.get("title"), 50),
        )
    console.print(table)
    console.print(f"{len(rows)} session(s)", highlight=False)


def show_session(console: Console, session: dict, messages: Iterable[dict]) -> None:
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    for key in ("id", "format", "title", "model", "task", "outcome", "started_at", "parent_id", "source"):
        if session.get(key):
            head.add_row(key, safe(str(session[key])))
    head.add_row("messages", f"{session['message_count']} ({session['step_count']} model calls)")
    console.print(head)
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("seq", justify="right")
    table.add_column("role")
    table.add_column("kind")
    table.add_column("tokens", justify="right")
    table.add_column("text", overflow="fold")
    for m in messages:
        kind = "" if m["kind"] == "message" else m["kind"]
        usage = m.get("usage") or {}
        tokens = ""
        if usage.get("prompt_tokens") is not None:
            tokens = f"{usage['prompt_tokens']:,}→{usage.get('completion_tokens') or 0:,}"
        text = m["text"]
        if m["tool_calls"]:
            calls = "; ".join(f"{c['name']}({c['arguments']})" for c in m["tool_calls"])
            text = (text + "\n" if text else "") + "⮑ " + calls
        label = m["role"] + (f":{m['name']}" if m.get("name") else "")
        table.add_row(str(m["seq"]), safe(label, 24), kind, tokens, preview(text, 160))
    console.print(table)
    console.print(Text("tokens: prompt→completion as recorded by the log", style="dim"))


# ---------------------------------------------------------------- config and formats


def config_view(console: Console, cfg: dict, source: str) -> None:
    console.print(Text(f"config: {source}", style="bold"))
    models = Table(box=box.SIMPLE_HEAD, title="model_mappings", title_justify="left")
    for col in ("model", "tokenizer", "context_limit", "reserved_output", "eviction_strategy", "preserve_system"):
        models.add_column(col)
    for name, m in cfg["model_mappings"].items():
        models.add_row(safe(name), m["tokenizer"], f"{m['context_limit']:,}", f"{m['reserved_output']:,}",
                       m["eviction_strategy"], str(m["preserve_system"]).lower())
    console.print(models)
    for section in ("analysis_thresholds", "storage", "embedding"):
        grid = Table(box=box.SIMPLE_HEAD, title=section, title_justify="left", show_header=False)
        grid.add_column()
        grid.add_column()
        for k, v in cfg[section].items():
            grid.add_row(k, safe(str(v)))
        console.print(grid)


def formats_table(console: Console, rows: list[dict]) -> None:
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("format")
    table.add_column("description")
    table.add_column("extensions")
    for r in rows:
        table.add_row(r["name"], r["description"], " ".join(r["extensions"]) + (" dir" if r["directory"] else ""))
    console.print(table)
