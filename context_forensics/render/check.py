"""``ctxf check``: each session's inconsistencies, grouped by check; and the one-line header that
``replay`` and ``view`` print for a session ctxf does not fully agree with."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from .common import preview, prose_width, safe

_SHOWN = 3  # inconsistencies printed per check and session (``--json`` lists each)


def check_view(console: Console, data: dict[str, Any], *, verbose: bool = False) -> None:
    """Every inconsistent session with its findings by check; the consistent ones in one line."""
    rows = data["sessions"]
    width = prose_width(console)
    for row in rows:
        if row["consistent"] and not verbose:
            continue
        s = row["session"]
        title = preview(s.get("title"), max(20, width - len(s["id"]) - len(s.get("format") or "") - 6))
        console.print(Text.assemble((s["id"], "bold"), "  ", s.get("format") or "", "  ") + title)
        if row["consistent"]:
            console.print(Text("  consistent", style="green"))
        _findings(console, row["inconsistencies"])
        if row["skipped"]:
            why: dict[str, list[str]] = {}  # one reason, said once for the checks it skips
            for k, v in row["skipped"].items():
                why.setdefault(v, []).append(k)
            console.print(Padding(Text("skipped: " + "; ".join(f"{', '.join(ks)} ({v})" for v, ks in why.items()),
                                       style="dim"), (0, 0, 0, 2), expand=False))
    t = data["totals"]
    line = f"{t['sessions']} session(s) checked: {t['sessions'] - t['inconsistent']} consistent"
    if t["inconsistent"]:
        line += (f", {t['inconsistent']} with {t['inconsistencies']} inconsistenc"
                 f"{'y' if t['inconsistencies'] == 1 else 'ies'} ("
                 + ", ".join(f"{k} {n}" for k, n in t["by_check"].items()) + ")")
    console.print(Text(line, style="bold" if t["inconsistent"] else "green"))
    if t["inconsistent"] and not verbose:
        console.print(Text("--json lists every one with its figures", style="dim"))


def _findings(console: Console, found: list[dict[str, Any]]) -> None:
    groups: dict[str, list[dict[str, Any]]] = {}
    for f in found:
        groups.setdefault(f["check"], []).append(f)
    for name, items in groups.items():
        steps = [f["step"] for f in items if f.get("step") is not None]
        head = Text.assemble(("  " + name, "bold yellow"), f" ×{len(items)}")
        if len(steps) > 1:
            listed = ", ".join(map(str, steps[:8])) + ("…" if len(steps) > 8 else "")
            head.append(f"  steps {listed}", style="dim")
        console.print(head)
        shown = _worst(items)[:_SHOWN]
        same = {f.get("accounted") for f in items}
        once = same.pop() if len(same) == 1 else None  # every one accounted for alike: said once, after them
        for f in shown:
            console.print(Padding(safe(f["message"]), (0, 0, 0, 4), expand=False))
            if f.get("accounted") and not once:
                console.print(Padding(Text("↳ " + f["accounted"], style="dim"), (0, 0, 0, 6), expand=False))
        if len(items) > _SHOWN:
            console.print(Text(f"    … {len(items) - _SHOWN} more", style="dim"))
        if once:
            console.print(Padding(Text("↳ " + once + ("" if len(items) == 1 else " (each)"), style="dim"),
                                  (0, 0, 0, 6), expand=False))


def _worst(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The findings with the largest error first (those that have one), else in step order."""
    def key(f: dict[str, Any]) -> float:
        e = (f.get("figures") or {}).get("error")
        return -abs(e) if isinstance(e, (int, float)) else 0.0

    return sorted(items, key=key)


def check_header(console: Console, row: dict[str, Any] | None, session_id: str) -> None:
    """One line under a replay's or view's title when the session's checks found anything."""
    if not row or row.get("consistent", True):
        return
    counts = row.get("counts") or {}
    total = sum(counts.values())
    parts = ", ".join(f"{k} {n}" for k, n in counts.items())
    console.print(Text.assemble(("  check: ", "bold yellow"),
                                f"{total} inconsistenc{'y' if total == 1 else 'ies'} ({parts}); ",
                                (f"ctxf check {session_id}", "dim"), (" lists them", "dim")))
