"""``ctxf ingest`` and ``ctxf formats``: the ingest summary, its problems on stderr, the formats read."""

from __future__ import annotations

import os

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from .common import min_width, safe


def ingest_summary(console: Console, report: dict) -> None:
    t = report["totals"]
    root = _common_root([f["path"] for f in report["files"]])
    title = "ingest" + (f" (paths under {root})" if root else "")
    rows: list[tuple[str, ...]] = []
    for f in report["files"]:
        shown = os.path.relpath(os.path.abspath(f["path"]), root) if root else _relative(f["path"])
        status = "partial" if f.get("partial") and f["status"] == "ingested" else f["status"]  # an older report
        rows.append((shown, f["format"] or "?", status, str(len(f["sessions"])), str(f["messages"]),
                     str(sum(f["skipped"].values())), str(len(f["warnings"]))))
    headers = ("file", "format", "status", "sessions", "msgs", "skipped", "warn.")
    # A path is shown whole on one line, never folded into slices beside the figures: a table
    # when every path fits its column whole (the skipped and warning counts left out when they
    # are all zero: the totals line says so), else a line per file with its figures under it.
    table = None
    for leave_out in ((), tuple(i for i in (5, 6) if all(r[i] == "0" for r in rows))):
        table = _summary_table(title, headers, rows, leave_out)
        if min_width(console, table) <= console.width:
            break
        table = None
    if table is not None or not rows:
        console.print(table if table is not None else Text(title, style="bold"))
    else:
        console.print(Text(title, style="bold"))
        for path, fmt, status, sessions, msgs, skipped, warns in rows:
            style = {"failed": "red", "partial": "yellow", "unchanged": "dim"}.get(status, "")
            # one line, never hard-wrapped: past the edge the terminal wraps it, and a copy of it
            # (or a grep) gets the whole path
            console.print(Text("  ") + safe(path, newlines=False), soft_wrap=True)
            figures = Text.assemble(fmt, " · ", (status, style), f" · {sessions} session(s) · {msgs} msgs"
                                    f" · {skipped} skipped · {warns} warn.")
            console.print(Padding(figures, (0, 0, 0, 6)))
    console.print(
        f"{t['files']} file(s): {t['ingested']} ingested"
        + (f", {t['partial']} partial (stored in part: records not read)" if t.get("partial") else "")
        + f", {t['unchanged']} unchanged, "
        f"{t['failed']} failed · {t['sessions']} session(s), {t['messages']} message(s) · "
        f"{t['skipped_records']} record(s) skipped · {t['warnings']} warning(s)"
        + (f" · {t['ignored_files']} file(s) not recognised" if t["ignored_files"] else ""),
        highlight=False,
    )
    for f in report["files"]:  # a file stored in part: what of it was not read, by kind
        if f.get("partial") and f["status"] in ("ingested", "partial"):
            shown = os.path.relpath(os.path.abspath(f["path"]), root) if root else _relative(f["path"])
            unread = f.get("unread") or {k: n for k, n in f["skipped"].items()}
            kinds = ", ".join(f"{k} ×{n}" for k, n in sorted(unread.items(), key=lambda kv: (-kv[1], kv[0])))
            of = f" of {f['records']}" if f.get("records") else ""
            console.print(Text("partial: ", style="yellow") + safe(shown)
                          + safe(f": {sum(unread.values())}{of} records not read ({kinds}); {f['messages']} message(s) "
                               "stored from the rest"))
    for f in report["files"]:  # what was replaced before storing, by type (never the secret itself)
        if f.get("redacted"):
            kinds = ", ".join(f"{k} ×{n}" for k, n in f["redacted"].items())
            shown = os.path.relpath(os.path.abspath(f["path"]), root) if root else _relative(f["path"])
            console.print(Text("secrets redacted in ", style="dim") + safe(shown) + Text(f": {kinds}", style="dim"))


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
            console.print(safe(f"skipped in {_short_path(f['path'])}: ", style="dim") + safe(skipped))
        if f.get("same_as"):  # the same run reached through another path: stored once
            same = f["same_as"]
            ids = ", ".join(s["session"] for s in same[:3]) + (" …" if len(same) > 3 else "")
            sources = sorted({s["source"] for s in same})
            console.print(Text("note: ", style="dim") + safe(
                f"{f['path']}: the same run as {len(same)} stored session(s) ({ids}) from "
                f"{sources[0]}{f' and {len(sources) - 1} other path(s)' if len(sources) > 1 else ''}; "
                "kept once"))
    if report["ignored"]:
        console.print(
            Text(f"{len(report['ignored'])} file(s) in the walked folders are not session logs "
                 "and were left alone", style="dim")
        )
        if verbose:
            for p in report["ignored"]:
                console.print(Text("  ") + safe(p))
    links = report.get("totals", {}).get("links_skipped")
    if links:  # a symlink back up (a -> ..) or a second way into a walked folder or file
        console.print(Text(f"{links} link(s) to a folder or file already walked were skipped", style="dim"))


def _summary_table(title: str, headers: tuple[str, ...], rows: list[tuple[str, ...]],
                   leave_out: tuple[int, ...]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, title=safe(title), title_justify="left")
    keep = [i for i in range(len(headers)) if i not in leave_out]
    for i in keep:  # a path and a format name are each one word: never folded
        table.add_column(headers[i], justify="right" if i >= 3 else "left", no_wrap=True)
    for row in rows:
        style = {"failed": "red", "partial": "yellow", "unchanged": "dim"}.get(row[2], "")
        cells = {0: safe(row[0], newlines=False), 2: Text(row[2], style=style)}
        table.add_row(*(cells.get(i, row[i]) for i in keep))
    return table


def _common_root(paths: list[str]) -> str | None:
    """The folder all ``paths`` lie under when it is outside the working directory (so that the
    table can show them relative to it, named once in the title); None when the paths are
    shown relative to the working directory or there is no common folder worth naming."""
    if len(paths) < 2:
        return None
    try:
        absolute = [os.path.abspath(p) for p in paths]
        root = os.path.commonpath([os.path.dirname(p) for p in absolute])
    except ValueError:  # no common path (another drive), or relative mixed with absolute
        return None
    cwd = os.getcwd()
    if root == os.sep or root == cwd or root.startswith(cwd + os.sep) or root in absolute:
        return None
    return root


def _relative(p: str) -> str:
    """A path under the working directory as the user would type it; any other as it is."""
    try:
        return os.path.relpath(p) if os.path.abspath(p).startswith(os.getcwd() + os.sep) else p
    except ValueError:  # another drive (Windows)
        return p


def _short_path(p: str, limit: int = 60) -> str:
    return p if len(p) <= limit else "…" + p[-(limit - 1):]


def formats_table(console: Console, rows: list[dict]) -> None:
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("format", no_wrap=True)
    table.add_column("description", overflow="fold", ratio=1)  # a long path wraps, never cut
    table.add_column("extensions", overflow="fold", max_width=12)
    counted = bool(rows) and "sessions" in rows[0]  # `ctxf formats --db`: the store's sessions of each
    if counted:
        table.add_column("sessions", justify="right")
    for r in rows:
        cells = [r["name"], r["description"], " ".join(r["extensions"]) + (" dir" if r["directory"] else "")]
        table.add_row(*cells, *([str(r["sessions"])] if counted else []))
    console.print(table)
