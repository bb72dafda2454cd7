"""Rich rendering of ``ctxf diverge``: the earliest divergence (the two events side by side, how
they were compared, the context state of both runs), the decisive one (the first differing edit
of the source files, with its hunk), the two final patches compared, the aligned events around
the divergence, and the window-similarity curve.

All log text goes through ``render.safe`` / ``render.preview`` (inert: no markup, no escapes).
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .common import curve, fit_columns, model_notes, preview, safe

CAUSE_STYLE = {
    "system_prompt": "magenta",
    "user_input": "blue",
    "tool_definitions": "magenta",
    "tool_output": "yellow",
    "assistant_action": "red",
    "context_window": "bold red",
    "run_ended": "cyan",
}
OP_STYLE = {"match": "green", "similar": "green", "preexisting": "dim", "detour": "dim", "mismatch": "red",
            "a_only": "yellow", "b_only": "yellow", "not_comparable": "yellow"}
OP_MARK = {"match": "=", "similar": "≈", "preexisting": "·", "detour": "~", "mismatch": "≠", "a_only": "+a",
           "b_only": "+b", "not_comparable": "?"}
ROWS_BEFORE, ROWS_AFTER = 3, 12
HUNK_LINES = 16
# the short form of each measure in the aligned table, and what it means (the legend)
SHORT = {"lexical": ("lex", "difflib ratio of two actions (shown only: different actions never match)"),
         "lines": ("lines", "share of shared output lines"),
         "contained": ("in", "share of one look's lines in the other"),
         "truncated": ("cut", "share of a cut output's lines in the full one"),
         "same_output": ("out", "two looks at one file, compared by their outputs")}


def _step(v: Any) -> str:
    return "–" if v is None else str(v)


def _run_line(label: str, run: dict) -> Text:
    return Text.assemble(
        (f"{label} ", "bold"), run["id"], "  ", safe(run["format"]), "/", safe(run["protocol"]), "  ",
        (safe(run.get("outcome") or "unknown").plain, "green" if run.get("outcome") == "success" else
         "red" if run.get("outcome") == "failure" else ""),
        f"  {run['steps']} steps, {run['aligned_events']} events aligned  ", preview(run.get("task") or "", 40),
    )


def _event_panel(title: str, ev: dict | None, pos: str) -> Panel:
    if ev is None:
        return Panel(Text("(run ended)", style="dim"), title=title, subtitle=pos, expand=True)
    body = Text()
    body.append_text(safe(ev["type"], style="bold"))
    if ev.get("tool"):
        body.append_text(safe(f" via {ev['tool']}", newlines=False, style="dim"))
    if ev.get("returncode") is not None:
        body.append_text(safe(f"  rc={ev['returncode']}", newlines=False, style="dim"))
    body.append("\n")
    body.append_text(safe(ev["display"], 200))
    text = ev.get("text") or ""
    if text and text != ev["display"]:
        lines = text.split("\n")
        body.append("\n")
        body.append_text(safe("\n".join(lines[:14])
                              + (f"\n… {len(lines) - 14} more line(s)" if len(lines) > 14 else ""),
                             1400))
    return Panel(body, title=title, subtitle=pos, expand=True)


def _pos(d: dict, side: str) -> str:
    step, seq = d.get(f"{side}_step"), d.get(f"{side}_seq")
    return f"step {_step(step)} · seq {_step(seq)}"


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


def _styled(t: Text, style: str) -> Text:
    t.stylize(style)
    return t


def _word_diff_text(changes: list[dict]) -> Text:
    t = Text()
    for k, c in enumerate(changes):
        if c["op"] == "more":
            t.append("… further changes not listed\n", style="dim")
            break
        t.append("… " if c["before"] else "", style="dim")
        t.append_text(preview(c["before"], 80))
        if c["deleted"]:
            t.append(" [-", style="red")
            t.append_text(_styled(preview(c["deleted"], 300), "red"))
            t.append("-]", style="red")
        if c["inserted"]:
            t.append(" {+", style="green")
            t.append_text(_styled(preview(c["inserted"], 300), "green"))
            t.append("+}", style="green")
        t.append(" ")
        t.append_text(preview(c["after"], 80))
        t.append(" …\n" if c["after"] else "\n", style="dim")
    return t


def compared_text(d: dict) -> Text:
    """How the pair shown side by side was compared: the method, the figure if one was
    computed, and what it rests on (never a figure beside a threshold it was not judged by)."""
    method, sim, reason = d.get("method"), d.get("similarity"), d.get("reason") or ""
    t = Text("compared: ", style="bold")
    if method is None:
        t.append_text(safe(reason or "no pair to compare"))
        return t
    t.append_text(safe(method))
    if method == "embedding" and sim is not None:
        t.append(f" cosine {sim:.2f} ({'≥' if sim >= (d.get('threshold') or 0) else '<'} threshold "
                 f"{d.get('threshold'):.2f})")
    elif method == "lexical" and sim is not None:
        t.append(f" {sim:.2f}")
    t.append_text(safe(f" — {reason}", style="dim"))
    return t


def _context_table(console: Console, ctx: dict) -> None:
    table = Table(box=box.SIMPLE_HEAD, title="context at the divergence", title_justify="left")
    for col in ("run", "step", "window", "util", "kept", "lost", "lost events", "facts gone"):
        table.add_column(col, justify="right" if col in ("step", "window", "util", "kept", "lost") else "left",
                         overflow="fold")
    for side in ("a", "b"):
        c = ctx[side]
        counts = c.get("counts") or {}
        lost = sum(counts.get(k, 0) for k in ("evicted", "cleared", "summarized")) if counts else None
        facts = c.get("facts_gone")
        facts_text = safe("; ".join(facts), 120) if facts else safe("none" if facts == [] else
                                                                   (c.get("facts_note") or "n/a"), style="dim")
        table.add_row(
            side.upper(), _step(c.get("step")),
            f"{c['window_tokens']:,}" if c.get("window_tokens") is not None else "–",
            f"{c['utilization']:.0%}" if c.get("utilization") is not None else "–",
            str(counts.get("kept", "–")), str(lost if lost is not None else "–"),
            preview("; ".join(f"{e['seq']}:{e['event']}" for e in c.get("lost_events", [])[:4]), 80),
            facts_text,
        )
    fit_columns(console, table)
    console.print(table)


def _compared_cell(r: dict) -> str:
    method, sim, measure = r.get("method"), r.get("similarity"), r.get("measure")
    if method is None:
        return ""
    if method == "embedding":
        return f"cos {sim:.2f}" if sim is not None else "cos"
    if method == "lexical":
        short = SHORT.get(measure or "", ("lex", ""))[0]
        return f"{short} {sim:.2f}" if sim is not None else short
    if method == "text":
        return "text" if r["op"] == "match" else "text ≠"
    return method


def _legend(rows: list[dict], threshold: float | None) -> list[Text]:
    present = {(r.get("method"), r.get("measure")) for r in rows}
    parts = []
    methods = {m for m, _ in present}
    if "exact" in methods:
        parts.append("exact = equal after normalization")
    if "text" in methods:
        parts.append("text = given inputs compared as text (≠: they differ)")
    if "embedding" in methods:
        parts.append(f"cos = embedding cosine (the same at ≥ {threshold:.2f})" if threshold is not None else
                     "cos = embedding cosine")
    for measure, (short, what) in SHORT.items():
        if ("lexical", measure) in present or (measure == "same_output" and ("lexical", measure) in present):
            parts.append(f"{short} = {what}")
    if "status" in methods:
        parts.append("status = return codes or success/failure compared")
    out = [Text("compared: " + "; ".join(parts), style="dim")] if parts else []
    reasons: dict[str, int] = {}
    for r in rows:
        if r.get("method") == "n/a":
            reasons[r.get("reason") or "not compared"] = reasons.get(r.get("reason") or "not compared", 0) + 1
    for reason, n in reasons.items():
        out.append(safe(f"n/a ({n} row{'s' if n != 1 else ''}): {reason}", style="dim"))
    return out


def _aligned_table(console: Console, rows: list[dict], first: int | None, *, all_rows: bool,
                   threshold: float | None) -> int:
    table = Table(box=box.SIMPLE_HEAD, title="aligned events", title_justify="left")
    for col in ("", "type", "A step", "A", "B step", "B", "compared"):
        # the figure in "compared" wraps under its label rather than being cut on a narrow terminal
        table.add_column(col, justify="right" if col in ("A step", "B step") else "left",
                         no_wrap=col in ("", "type"), overflow="fold" if col == "compared" else "ellipsis",
                         min_width={"": 3}.get(col))
    if all_rows or first is None:
        lo, hi = 0, len(rows)
    else:
        lo, hi = max(0, first - ROWS_BEFORE), min(len(rows), first + ROWS_AFTER)
    for k in range(lo, hi):
        r = rows[k]
        style = OP_STYLE.get(r["op"], "")
        mark = Text(OP_MARK.get(r["op"], "?") + (" ◀" if k == first else ""),
                    style=style + (" bold" if k == first else ""))
        table.add_row(mark, safe(r["type"]), _step(r["a_step"]) if r["a"] is not None else "",
                      preview(r["a"] or "", 50), _step(r["b_step"]) if r["b"] is not None else "",
                      preview(r["b"] or "", 50), safe(_compared_cell(r)))
    fit_columns(console, table)
    console.print(table)
    for line in _legend(rows[lo:hi], threshold):
        console.print(line)
    return len(rows) - (hi - lo)


def _earliest(console: Console, d: dict) -> None:
    head = Text.assemble(("earliest divergence: ", "bold"), safe(d["cause"], style=CAUSE_STYLE.get(d["cause"], "")),
                         f"   A {_pos(d, 'a')}   B {_pos(d, 'b')}")
    console.print(head)
    console.print(compared_text(d))
    console.print(safe(d["explanation"], style="italic"))
    detail = d.get("detail") or {}
    if detail.get("read_at_step"):
        rs = detail["read_at_step"]
        console.print(Text(f"given before the first model call (step 0); first read at A step {_step(rs.get('a'))}, "
                           f"B step {_step(rs.get('b'))}", style="dim"))
    grid = Table.grid(expand=True, padding=(0, 1))
    grid.add_column(ratio=1)
    grid.add_column(ratio=1)
    grid.add_row(_event_panel("A", d["a_event"], _pos(d, "a")), _event_panel("B", d["b_event"], _pos(d, "b")))
    console.print(grid)
    if d.get("word_diff"):
        console.print(Panel(_word_diff_text(d["word_diff"]), title="word diff A → B ([-deleted-] {+inserted+})",
                            expand=True))
    elif d.get("diff"):
        console.print(Panel(_diff_text(d["diff"]), title="diff A → B", expand=True))
    for item in detail.get("lost_in_one_window", [])[:6]:
        console.print(Text.assemble(("  lost in ", "dim"), safe(item["run"].upper()), ("'s window only: ", "dim"),
                                    preview(item["event"], 90)))
    change = detail.get("first_state_change")
    if change and (change.get("a_step"), change.get("b_step")) != (d.get("a_step"), d.get("b_step")):
        console.print(Text.assemble(("first differing change: ", "dim"),
                                    f"A step {_step(change.get('a_step'))} ", preview(change.get("a") or "–", 50),
                                    "  |  ", f"B step {_step(change.get('b_step'))} ",
                                    preview(change.get("b") or "–", 50)))
    if detail.get("event_divergence"):
        e = detail["event_divergence"]
        console.print(safe(f"the events diverge next: {e['cause']} at A step {_step(e['a_step'])}, "
                           f"B step {_step(e['b_step'])}", style="dim"))
    rejoined = detail.get("rejoined")
    if rejoined:
        console.print(Text(f"the runs line up again at A step {_step(rejoined.get('a_step'))}, "
                           f"B step {_step(rejoined.get('b_step'))}", style="dim"))
    if d.get("context"):
        _context_table(console, d["context"])


def _yes_no(v: bool | None) -> str:
    return "yes" if v is True else "no" if v is False else "cannot tell"


def _edit_panel(label: str, side: dict | None, other: str) -> Panel:
    if side is None:
        return Panel(Text("(no further edit of the source files)", style="dim"), title=label, expand=True)
    body = Text()
    body.append_text(_styled(safe(", ".join(side["files"])), "bold"))
    body.append("\n")
    body.append_text(preview(side["display"], 160))
    body.append("\n")
    if side.get("hunk"):
        src = "from the command" if side["hunk_source"] == "command" else "from the final patch"
        body.append(f"hunk ({src}):\n", style="dim")
        hunk = side["hunk"]
        body.append_text(_diff_text(hunk[:HUNK_LINES] + ([f"… {len(hunk) - HUNK_LINES} more line(s) (--json)"]
                                                          if len(hunk) > HUNK_LINES else [])))
    if side.get("note"):
        body.append_text(safe(side["note"] + "\n", style="dim"))
    if side.get("submission_note"):
        body.append_text(safe(side["submission_note"] + "\n", style="bold"))
    if side.get("reverted"):
        back = side["reverted"]
        body.append_text(safe(f"put back at step {back['step']} ({back['display']}): the final patch does not "
                              "hold this change\n", style="bold"))
    body.append_text(Text(f"the same edit in {other}: {_yes_no(side['same_edit_in_other'])} · in {other}'s final "
                          f"patch: {_yes_no(side['in_other_patch'])}", style="dim"))
    return Panel(body, title=label, subtitle=f"step {_step(side['step'])} · seq {_step(side['seq'])}", expand=True)


def _decisive(console: Console, dec: dict) -> None:
    if not dec:
        return
    head = Text("decisive divergence: ", style="bold")
    if not dec.get("differs"):
        head.append_text(safe(dec.get("reason") or "none"))
        console.print(head)
        return
    head.append(f"the first differing edit: A step {_step(dec.get('a_step'))}, B step {_step(dec.get('b_step'))}")
    console.print(head)
    console.print(safe(f"{dec['reason']} (source files: {', '.join(dec['source_files'])}; {dec['same_before']} "
                       "identical edit(s) before)", style="dim"))
    console.print(_edit_panel("A", dec.get("a"), "B"))
    console.print(_edit_panel("B", dec.get("b"), "A"))
    final = dec.get("final") or {}
    if final.get("a") or final.get("b"):
        console.print(Text("where the final patches differ first (the first hunk only one run's patch has, and the "
                           "edit that wrote it):", style="bold"))
        for side in ("a", "b"):
            f = final.get(side)
            line = Text(f"  {side.upper()} ", style="bold")
            if f is None:
                line.append("every hunk is in the other run's patch too", style="dim")
                console.print(line)
                continue
            line.append_text(safe(f["file"]))
            line.append(f": written at step {f['step']}" if f["traced"] else ": not traced")
            if f.get("note"):
                line.append_text(safe(f" ({f['note']})", style="dim"))
            console.print(line)
            hunk = f["hunk"]
            console.print(_diff_text(hunk[:8]
                                     + ([f"… {len(hunk) - 8} more line(s) (--json)"] if len(hunk) > 8 else [])),
                          end="")


def _patch_source(p: dict | None) -> str:
    if p is None:
        return "none"
    what = "rebuilt from its edits" if p["reconstructed"] else "the patch it submitted"
    return f"{what}: {p['note']}"


def _patches(console: Console, pt: dict) -> None:
    if not pt:
        return
    console.print(Text("final patches", style="bold"))
    for side in ("a", "b"):
        console.print(Text.assemble((f"  {side.upper()}: ", "bold"), safe(_patch_source(pt.get(side)))))
        for u in (pt.get(side) or {}).get("unsubmitted") or []:
            console.print(safe(f"     {u['words']}", style="bold"))
    if not pt.get("comparable"):
        console.print(safe(f"  {pt.get('note')}", style="dim"))
        return
    h = pt["hunks"]
    console.print(Text(f"  files: A {len(pt['files_a'])}, B {len(pt['files_b'])}, in common {len(pt['common_files'])}"
                       f" · hunks: {h['common']} in common, {h['only_a']} only in A, {h['only_b']} only in B"))
    table = Table(box=box.SIMPLE_HEAD)
    for col in ("file", "A", "B", "common", "only A", "only B"):
        table.add_column(col, justify="left" if col in ("file", "A", "B") else "right", overflow="fold")
    for f in pt["per_file"]:
        unknown = set(f.get("unknown") or [])
        table.add_row(safe(f["path"]), safe((f["a"] or "–") + (" ?" if "a" in unknown else "")),
                      safe((f["b"] or "–") + (" ?" if "b" in unknown else "")), str(f["common"]), str(f["only_a"]),
                      str(f["only_b"]))
    fit_columns(console, table)
    console.print(table)
    console.print(safe(f"  {pt['note']}" + ("; ? = changed by a command that does not show how"
                                            if any(f.get("unknown") for f in pt["per_file"]) else ""), style="dim"))


def _inputs_line(inputs: dict) -> Text | None:
    if not inputs:
        return None
    names = {"system_prompt": "system prompt", "user_input": "task", "tool_definitions": "tool definitions"}
    parts = []
    for key, label in names.items():
        x = inputs.get(key)
        if not x:
            continue
        state = "equal" if x.get("equal") is True else "differ" if x.get("equal") is False else \
            (x.get("note") or "not compared")
        parts.append(f"{label} {state}")
    return safe("given inputs (compared as text): " + " · ".join(parts), style="dim")


def diverge_view(console: Console, report: dict, *, all_rows: bool = False) -> None:
    """One pair: who, where and why they diverged (earliest and decisive), side by side, with
    the final patches compared, the context and the curve."""
    a, b = report["a"], report["b"]
    console.print(_run_line("A", a))
    console.print(_run_line("B", b))
    for label, run in (("A", a), ("B", b)):  # the limits each run's window figures rest on
        model_notes(console, [f"{label}: {n}" for n in (run.get("replay") or {}).get("model_notes") or ()])
    line = _inputs_line(report.get("inputs") or {})
    if line is not None:
        console.print(line)
    for p in report.get("preexisting", []):
        sim = "" if p.get("similarity") is None else f" (line overlap {p['similarity']:.2f})"
        console.print(safe(f"pre-existing: {p['cause']} differs{sim}: {p['note']}", style="dim"))
    if report.get("detours"):
        n = len(report["detours"])
        console.print(Text(f"{n} read-only detour(s) tolerated (both runs looked around, then rejoined)", style="dim"))
    d = report["divergence"]
    if d is None:
        console.print(Text("no divergence: the runs match event for event", style="bold green"))
    else:
        _earliest(console, d)
    _decisive(console, report.get("decisive") or {})
    _patches(console, report.get("patches") or {})
    first = d.get("row") if d else None
    hidden = _aligned_table(console, report["aligned"], first, all_rows=all_rows,
                            threshold=(report.get("settings") or {}).get("divergence_cosine"))
    if hidden:
        console.print(Text(f"{hidden} aligned row(s) hidden (--all shows them; --json has everything)", style="dim"))
    if report.get("curve"):
        console.print(Text("window similarity A vs B per aligned model call (Jaccard over aligned events)",
                           style="bold"))
        for line in curve([p["similarity"] for p in report["curve"]], height=4):
            console.print(line)


def _earliest_line(r: dict) -> Text:
    cause = r.get("cause")
    if not cause:
        return Text("none: the runs match event for event", style="green")
    d = r.get("divergence") or {}
    t = safe(cause, style=CAUSE_STYLE.get(cause, ""))
    t.append(f" at A step {_step(r.get('a_step'))} · B step {_step(r.get('b_step'))}")
    sim, method = r.get("similarity"), r.get("method")
    if method:
        t.append_text(safe(f" ({method}" + (f" {sim:.2f}" if sim is not None and method in ("lexical", "embedding")
                                             else "") + ")", style="dim"))
    ea, eb = d.get("a_event") or {}, d.get("b_event") or {}
    t.append("\n")
    t.append_text(preview(ea.get("display") or "–", 60))
    t.append("  |  ", style="dim")
    t.append_text(preview(eb.get("display") or "–", 60))
    return t


def _decisive_line(dec: dict) -> Text:
    if not dec:
        return Text("–", style="dim")
    if not dec.get("differs"):
        return safe(dec.get("reason") or "none", style="dim")
    files = sorted({f for s in ("a", "b") for f in ((dec.get(s) or {}).get("files") or [])})
    t = Text(f"edit #{dec.get('index')} at A step {_step(dec.get('a_step'))} · B step {_step(dec.get('b_step'))}: ")
    t.append_text(safe(", ".join(files)))
    t.append("\n")
    t.append_text(safe(dec.get("reason") or "", style="dim"))
    final = dec.get("final") or {}
    steps = [f"{s.upper()} step {f['step']}" if f and f["traced"] else f"{s.upper()} not traced" if f else
             f"{s.upper()} none" for s, f in (("a", final.get("a")), ("b", final.get("b")))]
    t.append(f"\nfinal patches differ first at: {' · '.join(steps)}", style="dim")
    return t


def _patches_line(pt: dict) -> Text:
    if not pt:
        return Text("–", style="dim")
    if not pt.get("comparable"):
        return safe(pt.get("note") or "not comparable", style="dim")
    h = pt["hunks"] or {}
    t = Text(f"files A {len(pt['files_a'])} · B {len(pt['files_b'])} · in both {len(pt['common_files'])}; "
             f"hunks in both {h.get('common')} · only A {h.get('only_a')} · only B {h.get('only_b')}")
    rebuilt = [s.upper() for s in ("a", "b") if (pt.get(s) or {}).get("reconstructed")]
    if rebuilt:
        t.append(f" ({' and '.join(rebuilt)} rebuilt from edits: no recorded patch)", style="dim")
    unknown = [u for s in ("a", "b") for u in ((pt.get(s) or {}).get("unknown_files") or [])]
    if unknown:
        t.append_text(safe(f"; not countable: {', '.join(sorted(set(unknown)))}", style="dim"))
    return t


def pairs_table(console: Console, rows: list[dict]) -> None:
    """``--all-tasks``: per success/failure pair, the earliest and the decisive divergence and
    the two final patches compared."""
    for r in rows:
        console.print(Text.assemble(safe(r.get("task") or "", newlines=False, style="bold"), f"   A {r['a']} ",
                                    safe(r.get("a_outcome") or "unknown",
                                         style="green" if r.get("a_outcome") == "success" else ""),
                                    f" · B {r['b']} ", safe(r.get("b_outcome") or "unknown",
                                                            style="red" if r.get("b_outcome") == "failure" else "")))
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True, style="bold")
        grid.add_column(overflow="fold")
        grid.add_row("  earliest", _earliest_line(r))
        grid.add_row("  decisive", _decisive_line(r.get("decisive") or {}))
        grid.add_row("  patches", _patches_line(r.get("patches") or {}))
        console.print(grid)
    if not rows:
        console.print(Text("no task has both a success and a failure run in the store", style="dim"))
    else:
        console.print(Text("earliest: the first aligned events that differ (cause, steps, how they were compared) · "
                           "decisive: the first differing edit of the source files · patches: files and change "
                           "blocks (hunks) in both / only A / only B", style="dim"))


__all__ = ["diverge_view", "pairs_table"]
