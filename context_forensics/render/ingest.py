"""``ctxf ingest`` and ``ctxf formats``: the ingest summary, its problems on stderr, the formats read."""

from __future__ import annotations

import os

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from .common import fit_columns, safe

def ingest_summary(console: Console, report: dict) -> None:
    t = report["totals"]
    root = _common_root([f["path"] for f in report["files"]])
    title = "ingest" + (f" (paths under {root})" if root else "")
    rows = []
    for f in report["files"]:
        shown = os.path.relpath(os.path.abspath(f["path"]), root) if root else _relative(f["path"])
        rows.append((shown, f["format"] or "?", f["status"], str(len(f["sessions"])), str(f["messages"]),
                     str(sum(f["skipped"].values())), str(len(f["warnings"]))))
    headers = ("file", "format", "status", "sessions", "msgs", "skipped", "warn.")
    # Each column but the path takes its widest cell plus padding; the path gets the rest. When
    # that leaves too little for a path to be read (an 80-column terminal, deep folders), each
    # file gets a line of its own with its figures under it, instead of a path folded into
    # slivers beside them.
    others = sum(max(len(h), *(len(r[i]) for r in rows)) + 2 for i, h in enumerate(headers) if i) + 4
    longest = max((len(r[0]) for r in rows), default=0)
    if rows and console.width - others < min(longest, 36):
        console.print(Text(title, style="bold"))
        for path, fmt, status, sessions, msgs, skipped, warns in rows:
            style = {"failed": "red", "unchanged": "dim"}.get(status, "")
            name = safe(path)
            name.overflow = "fold"  # a path is one word: folded whole under its indent
            console.print(Padding(name, (0, 0, 0, 2)))
            figures = Text.assemble(fmt, " · ", (status, style), f" · {sessions} session(s) · {msgs} msgs"
                                    f" · {skipped} skipped · {warns} warn.")
            console.print(Padding(figures, (0, 0, 0, 6)))
    else:
        table = Table(box=box.SIMPLE_HEAD, title=safe(title), title_justify="left")
        # Short headers over the counts leave the room to the path, which folds rather than
        # being cut; a format name is one word and never folds.
        table.add_column("file", overflow="fold")
        table.add_column("format", no_wrap=True)
        table.add_column("status", no_wrap=True)
        for col in headers[3:]:
            table.add_column(col, justify="right", no_wrap=True)
        for path, fmt, status, *counts in rows:
            style = {"failed": "red", "unchanged": "dim"}.get(status, "")
            table.add_row(safe(path), fmt, Text(status, style=style), *counts)
        fit_columns(console, table)
        console.print(table)
    console.print(
        f"{t['files']} file(s): {t['ingested']} ingested, {t['unchanged']} unchanged, "
        f"{t['failed']} failed · {t['sessions']} session(s), {t['messages']} message(s) · "
        f"{t['skipped_records']} record(s) skipped · {t['warnings']} warning(s)"
        + (f" · {t['ignored_files']} file(s) not recognised" if t["ignored_files"] else ""),
        highlight=False,
    )
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
    for r in rows:
        table.add_row(r["name"], r["description"], " ".join(r["extensions"]) + (" dir" if r["directory"] else ""))
    console.print(table)
