"""``ctxf ingest --discover``: what was found per agent (logs, size, newest), and where it looked."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .common import fit_columns, hidden_columns_note, safe


def size_text(n: int) -> str:
    """Bytes in the largest unit that keeps the figure at least 1 (1,024-based), measured."""
    value, unit = float(n), "B"
    for u in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, u
    return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"


def discovery_table(console: Console, data: dict, *, verbose: bool = False, dry_run: bool = False) -> None:
    """One row per agent asked for; ``verbose`` lists every place searched and every log found."""
    table = Table(box=box.SIMPLE_HEAD, title="discover" + (" (dry run: nothing read or stored)" if dry_run else ""),
                  title_justify="left")
    rows = []
    for a in data["agents"]:
        logs = f"{a['files']}" + (f" {a['unit']}s" if a["unit"] != "file" and a["files"] != 1 else
                                  f" {a['unit']}" if a["unit"] != "file" else "")
        newest = (a["newest"] or "").replace("T", " ").removesuffix("+00:00")[:16]
        rows.append((a, logs, size_text(a["bytes"]) if a["files"] else "", newest))

    def widest(k: int, header: str) -> int:  # a figure is never cut or broken across lines
        return max([len(header)] + [len(r[k]) for r in rows])

    table.add_column("agent", no_wrap=True)
    table.add_column("logs", justify="right", no_wrap=True, min_width=widest(1, "logs"))
    table.add_column("size", justify="right", no_wrap=True, min_width=widest(2, "size"))
    table.add_column("newest (UTC)", no_wrap=True, min_width=widest(3, "newest (UTC)"))
    table.add_column("note", overflow="fold")
    for a, logs, size, newest in rows:
        existing = sum(p["exists"] for p in a["places"])
        if not a["files"]:
            note = Text(f"nothing found ({existing} of {len(a['places'])} places exist)", style="dim")
        elif not a["readable"]:
            note = Text("listed only: this ctxf has no importer for " + ", ".join(a["formats"]), style="yellow")
        else:
            note = Text(", ".join(a["formats"]), style="dim")
        table.add_row(a["agent"], logs, size, newest, note)
    dropped = fit_columns(console, table, drop_order=("note", "newest (UTC)"))
    console.print(table)
    hidden_columns_note(console, dropped)
    t = data["totals"]
    console.print(f"{t['files']} log(s), {size_text(t['bytes'])}, from {t['agents_with_logs']} of "
                  f"{t['agents']} agent(s)" + ("" if verbose else " · -v lists the places and every log, "
                                                "--json too"), highlight=False)
    if verbose:
        for a in data["agents"]:
            console.print(Text(a["agent"], style="bold"))
            for p in a["places"]:
                mark = "found  " if p["exists"] else "absent "
                console.print(Text(f"  {mark}", style="" if p["exists"] else "dim") + safe(p["path"])
                              + Text(f"  ({p['looks_for']})", style="dim"))
            for f in a["found"]:
                console.print(Text("    ") + safe(f["path"]) + Text(f"  {size_text(f['bytes'])}", style="dim"))
    for a in data["agents"]:
        for u in a["unreadable"]:
            console.print(Text("warning: ",
                               style="yellow") + safe(f"{u['path']}: cannot list this folder: {u['error']}"))
        if a["links_skipped"]:
            console.print(Text(f"{a['agent']}: {a['links_skipped']} link(s) to a folder or file already walked "
                               "were skipped", style="dim"))
