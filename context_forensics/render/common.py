"""Rich rendering of results. The only module besides cli.py that imports rich.

Text that comes from a log is never interpreted: it goes into ``Text`` objects (no markup)
after control characters are made visible, so a log cannot restyle or drive the terminal.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, Iterable

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.padding import Padding
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
    """Tables to stdout. Piped output gets $COLUMNS or 120 columns rather than rich's 80."""
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = 120
    return console


def stderr_console() -> Console:
    """Errors and warnings to stderr, never hard-wrapped: a message naming a long path stays
    one line (the terminal wraps it), so it can be grepped and pasted whole."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


def min_width(console: Console, table: Table) -> int:
    """The narrowest a table can be drawn without cutting a word or a number."""
    return Measurement.get(console, console.options.update_width(10**5), table).minimum


def fit_columns(console: Console, table: Table, drop_order: Iterable[str] = ()) -> list[str]:
    """Lay a table out so that no word or number is cut.

    Rich shrinks the widest columns first and then every column alike, ignoring the longest
    word of each, so an 80-column terminal printed "5,8…" for 5,835 and split "compactions".
    Here the columns named in ``drop_order`` are dropped (first named, first dropped) until
    every column can have its longest word; the width left over goes to the columns that want
    more, in proportion to how much more they want. Returns the headers dropped.

    It measures through rich's own (private) column measurement; should a rich release change
    that, the table is printed as rich lays it out rather than not at all.
    """
    try:
        return _fit_columns(console, table, drop_order)
    except (AttributeError, TypeError):
        return []


def _fit_columns(console: Console, table: Table, drop_order: Iterable[str]) -> list[str]:
    options = console.options.update_width(10**5)

    def measure() -> list[Measurement]:
        for i, col in enumerate(table.columns):  # dropped columns leave stale indexes behind
            col._index = i
        return [table._measure_column(console, options, col) for col in table.columns]

    sizes = measure()
    dropped: list[str] = []
    for name in drop_order:
        if sum(m.minimum for m in sizes) <= console.width - table._extra_width:
            break
        for col in table.columns:
            if str(col.header) == name:
                table.columns.remove(col)
                dropped.append(name.replace("\n", " "))
                sizes = measure()
                break
    avail = console.width - table._extra_width  # borders and separators: fewer after a drop
    mins = [m.minimum for m in sizes]
    if sum(m.maximum for m in sizes) <= avail:
        return dropped
    if sum(mins) > avail:
        # Still too wide: fold the widest words (long identifiers) one character at a time, so
        # that short cells, the figures, stay whole.
        # Columns marked no_wrap (names the user types) give way last.
        widths = list(mins)
        foldable = [not col.no_wrap for col in table.columns]
        for allowed in (foldable, [True] * len(widths)):
            while sum(widths) > avail:
                candidates = [i for i, ok in enumerate(allowed) if ok and widths[i] > 6]
                if not candidates:
                    break
                widest = max(candidates, key=lambda i: widths[i])
                widths[widest] -= 1
    else:
        # The spare width goes to the columns that want more, in proportion to how much more.
        want = [m.maximum - m.minimum for m in sizes]
        spare, total_want = avail - sum(mins), sum(want)
        give = [spare * w // total_want for w in want]
        for i in sorted(range(len(want)), key=lambda i: -want[i])[: spare - sum(give)]:
            give[i] += 1  # the rounding remainder, to the columns that want most
        widths = [lo + extra for lo, extra in zip(mins, give)]
    for col, width in zip(table.columns, widths):
        col.width = max(1, width - table._get_padding_width(col._index))
    return dropped


def hidden_columns_note(console: Console, dropped: list[str]) -> None:
    if dropped:
        console.print(Text(f"{len(dropped)} column(s) left out at this width ({', '.join(dropped)}); "
                           "a wider terminal or --json shows them", style="dim"))


def print_json(data: Any) -> None:
    """Data to stdout as JSON (never through rich, so it stays machine-readable)."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


# ---------------------------------------------------------------- ingest


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


# ---------------------------------------------------------------- sessions


def sessions_table(console: Console, rows: list[dict]) -> None:
    if not rows:
        console.print("no sessions in the store (add some with `ctxf ingest PATH`)")
        return
    headers = ["id", "format", "model", "task", "outcome", "msgs", "steps"]
    cells = [[r["id"], r["format"], r.get("model") or "", r.get("task") or "", r["outcome"],
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
    for dropped in ("msgs", "format"):
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
    head.add_row("messages", f"{session['message_count']} ({session['step_count']} model calls)")
    console.print(head)
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("seq", justify="right")
    table.add_column("step", justify="right")
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
        table.add_row(str(m["seq"]), step_label({"step": m.get("step"), "joined_step": m.get("joins_step")}),
                      safe(label, 24), kind, tokens, preview(text, 160))
    console.print(table)
    console.print(Text("step: the model call an assistant message makes (replay --at STEP), →k the first step "
                       "whose window holds the message · tokens: prompt→completion as recorded by the log",
                       style="dim"))


# ---------------------------------------------------------------- config and formats


def config_view(console: Console, cfg: dict, source: str) -> None:
    console.print(Text(f"config: {source}", style="bold"))
    models = Table(box=box.SIMPLE_HEAD, title="model_mappings", title_justify="left")
    for col in ("model", "tokenizer", "context_limit", "reserved_output", "eviction_strategy", "preserve_system",
                "base"):
        models.add_column(col.replace("_", "_\n"), overflow="fold",
                          justify="right" if col in ("context_limit", "reserved_output") else "left")
    for name, m in cfg["model_mappings"].items():
        models.add_row(safe(name), m["tokenizer"], f"{m['context_limit']:,}", f"{m['reserved_output']:,}",
                       m["eviction_strategy"], str(m["preserve_system"]).lower(), safe(m.get("base") or ""))
    fit_columns(console, models)
    console.print(models)
    for section in ("analysis_thresholds", "storage", "embedding", "drift"):
        if not isinstance(cfg.get(section), dict):
            continue
        grid = Table(box=box.SIMPLE_HEAD, title=section, title_justify="left", show_header=False)
        grid.add_column()
        grid.add_column()
        for k, v in cfg[section].items():
            grid.add_row(k, safe(str(v)))
        console.print(grid)
    if cfg.get("facts"):
        console.print(Text("facts", style="italic"))
        for f in cfg["facts"]:
            console.print(Text("  - ") + safe(f))
    if cfg.get("audit") is not None:
        console.print(Text("audit", style="italic"))
        for name, spec in ((cfg["audit"] or {}).get("rules") or {}).items():
            console.print(Text(f"  {name}: ") + safe(str(spec or {})))


def formats_table(console: Console, rows: list[dict]) -> None:
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("format")
    table.add_column("description")
    table.add_column("extensions")
    for r in rows:
        table.add_row(r["name"], r["description"], " ".join(r["extensions"]) + (" dir" if r["directory"] else ""))
    console.print(table)


# ---------------------------------------------------------------- replay

_BLOCKS = " ▁▂▃▄▅▆▇█"


def curve(values: list[float], *, width: int = 60, height: int = 6, ceiling: float = 1.0,
          marker: float | None = None) -> list[Text]:
    """A block chart of values in [0, ceiling], down-sampled to ``width`` columns (max per bucket).

    ``marker`` draws a dotted threshold line (the utilization alert).
    """
    if not values:
        return [Text("(no steps)", style="dim")]
    n = len(values)
    cols = min(width, n)
    buckets = [max(values[i * n // cols:max((i + 1) * n // cols, i * n // cols + 1)]) for i in range(cols)]
    top = max(ceiling, max(buckets))
    rows = []
    for r in range(height, 0, -1):
        line = Text()
        lo = (r - 1) / height * top
        for v in buckets:
            fill = (v - lo) / (top / height)
            ch = _BLOCKS[max(0, min(8, int(round(fill * 8))))] if v > lo else " "
            style = "red" if marker is not None and v >= marker else "cyan"
            if ch == " " and marker is not None and lo <= marker < lo + top / height:
                line.append("┈", style="dim")
            else:
                line.append(ch, style=style)
        label = f" {r / height * top:>4.0%}" if r in (height, (height + 1) // 2) else ""
        line.append(label, style="dim")
        rows.append(line)
    axis = Text(f"step 1{' ' * max(1, cols - len(str(n)) - 6)}{n}", style="dim")
    rows.append(axis)
    return rows


def _events_text(step: dict) -> Text:
    t = Text()
    for e in step["events"]:
        kind = e["type"]
        style = {"overflow": "bold red", "compaction": "magenta", "eviction": "yellow", "clearing": "yellow"}.get(kind, "")
        label = kind
        if kind == "compaction":
            label += " (recorded)" if e.get("recorded") else " (simulated)"
        if kind == "overflow":
            label = f"overflow +{e.get('overflow', 0):,}" + (" ✗ would fail" if e.get("would_fail") else "")
        t.append(("; " if t else "") + label, style=style)
    return t


def _lost_text(seqs: list[int], limit: int = 6) -> str:
    if not seqs:
        return ""
    shown = ",".join(map(str, seqs[:limit]))
    return shown + (f",…(+{len(seqs) - limit})" if len(seqs) > limit else "")


def model_notes(console: Console, notes: Iterable[str] | None, indent: str = "  ") -> None:
    """Where a replay's limits come from, under its header: assumed limits (the figures rest on
    no model), a borrowed table entry, a budget bounded by a recorded call. Every view that
    prints a replay-derived figure prints these."""
    for note in notes or ():
        # model names in a note can come from the log: printed inert, like all log text
        text = safe(note)
        text.stylize("bold yellow" if "model unknown:" in note else
                     "yellow" if note.endswith("for its own figures") else "dim")
        for line in text.wrap(console, max(20, console.width - len(indent))):  # wrapped lines keep the indent
            line.rstrip()
            console.print(Text(indent) + line)


def replay_view(console: Console, session: dict, replays: list[dict], *, all_steps: bool = False) -> None:
    """One model: a step table and a curve. Several: side by side, one column group per model."""
    console.print(Text.assemble(("session ", "bold"), session["id"], "  ", preview(session.get("title"), max(20, console.width - 23))))
    for rep in replays:
        line = Text.assemble(
            ("model ", "bold"), safe(rep["model"]), f"  policy {rep['policy']}  tokenizer {rep['tokenizer']} ",
            (f"({rep['token_kind']})", "dim"),
        )
        # bounded by an answered call: the reserved output was at most this, the budget at least
        le, ge = ("≤", "≥") if (rep.get("bound") or {}).get("limit") is None and rep.get("bound") else ("", "")
        budget = f"limit {rep['limit']:,} − reserved {le}{rep['reserved_output']:,} = budget {ge}{rep['budget']:,}"
        if line.cell_len + 2 + len(budget) <= console.width:
            console.print(line + Text("  " + budget))
        else:  # the budget sum on a line of its own rather than broken across two
            console.print(line)
            console.print(Text("  " + budget))
        model_notes(console, rep.get("model_notes"))
    if len(replays) == 1:
        _replay_single(console, replays[0], all_steps)
    else:
        _replay_compare(console, replays, all_steps)


def _interesting(steps: list[dict]) -> set[int]:
    keep = {0, len(steps) - 1}
    for i, s in enumerate(steps):
        if s["events"] or s["newly_lost"] or s["overflow"]:
            keep.add(i)
    return keep


def _replay_single(console: Console, rep: dict, all_steps: bool) -> None:
    steps = rep["steps"]
    table = Table(box=box.SIMPLE_HEAD)
    for col, just in (("step", "right"), ("seq", "right"), ("window", "right"), ("util", "right"),
                      ("kept", "right"), ("evicted", "right"), ("cleared", "right"), ("summ.", "right"),
                      ("out\nlocal", "right"), ("recorded", "right"), ("lost now", "left"), ("events", "left")):
        table.add_column(col, justify=just, overflow="fold")
    shown = set(range(len(steps))) if all_steps else _interesting(steps)
    hidden = 0
    for i, s in enumerate(steps):
        if i not in shown:
            hidden += 1
            continue
        c = s["counts"]
        util_style = "red" if s["alert"] else ""
        rec = ""
        if s.get("recorded_prompt_tokens") is not None:
            rec = f"{s['recorded_prompt_tokens']:,}"
        table.add_row(
            str(s["step"]), str(s["message_seq"]), f"{s['window_tokens']:,}", Text(f"{s['utilization']:.0%}", style=util_style),
            str(c["kept"]), str(c["evicted"]), str(c["cleared"]), str(c["summarized"]), str(c["outside_local"]),
            rec, _lost_text(s["newly_lost"]), _events_text(s),
        )
    dropped = fit_columns(console, table, ("recorded", "out\nlocal", "summ.", "cleared", "kept", "seq"))
    console.print(table)
    hidden_columns_note(console, dropped)
    if hidden:
        console.print(Text(f"{hidden} quiet step(s) hidden (--all-steps shows them)", style="dim"))
    for line in curve([s["utilization"] for s in steps], marker=rep["summary"]["alert_threshold"]):
        console.print(line)
    _replay_summary(console, [rep])


def _replay_compare(console: Console, reps: list[dict], all_steps: bool) -> None:
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("step", justify="right")
    table.add_column("seq", justify="right")
    for rep in reps:
        table.add_column(f"{rep['model']}\nwindow / util / lost", justify="right", overflow="fold")
    steps = reps[0]["steps"]
    shown: set[int] = set(range(len(steps))) if all_steps else set().union(*(_interesting(r["steps"]) for r in reps))
    for i in sorted(shown):
        row = [str(steps[i]["step"]), str(steps[i]["message_seq"])]
        for rep in reps:
            s = rep["steps"][i]
            c = s["counts"]
            lost = c["evicted"] + c["cleared"] + c["summarized"]
            cell = Text(f"{s['window_tokens']:,} / ")
            cell.append(f"{s['utilization']:.0%}", style="red" if s["alert"] else "")
            cell.append(f" / {lost}")
            if s["events"]:
                cell.append("\n")
                cell.append_text(_events_text(s))
            row.append(cell)
        table.add_row(*row)
    dropped = fit_columns(console, table, ("seq",))
    console.print(table)
    hidden_columns_note(console, dropped)
    for rep in reps:
        console.print(Text(safe(rep["model"]).plain, style="bold"))
        for line in curve([s["utilization"] for s in rep["steps"]], height=4, marker=rep["summary"]["alert_threshold"]):
            console.print(line)
    _replay_summary(console, reps)


def _replay_summary(console: Console, reps: list[dict]) -> None:
    from ..tokens.fidelity import fidelity_text

    table = Table(box=box.SIMPLE_HEAD, title="summary", title_justify="left")
    for col in ("model", "steps", "first loss\nat step", "peak util\n@ step", "above alert", "compactions",
                "would fail", "fidelity (median |err|)"):
        table.add_column(col, overflow="fold")
    for rep in reps:
        s = rep["summary"]
        fid_text = fidelity_text(rep.get("fidelity"))
        table.add_row(
            safe(rep["model"]), str(s["steps"]),
            str(s["first_loss_step"]) if s["first_loss_step"] else "none",
            f"{s['peak_utilization']:.0%} @{s['peak_step']}" if s["peak_utilization"] is not None else "",
            str(len(s["steps_above_alert"])), str(s["compactions"]), str(len(s["would_fail_steps"])), fid_text,
        )
    dropped = fit_columns(console, table, ("steps", "above alert", "compactions"))
    console.print(table)
    hidden_columns_note(console, dropped)


_STATE_STYLES = {"kept": "", "evicted": "red", "cleared": "yellow", "summarized": "magenta", "outside_local": "cyan"}
# Short names for a window's non-message rows (the full label goes in the text column).
_PART_NAMES = {"cleared_placeholders": "placeholders", "compaction_summary": "summary",
               "tool_definitions": "tools", "framing": "framing", "not_in_log": "unlogged",
               "calibration_scale": "calibration"}


def step_label(m: dict) -> str:
    """The step a message belongs to: ``k`` for the assistant message making call k, ``→k``
    for any other message, k being the first step whose window holds it ("" if none does)."""
    if m.get("step"):
        return str(m["step"])
    return f"→{m['joined_step']}" if m.get("joined_step") else ""


def _message_text(m: dict) -> str:
    text = m["text"] or ""
    if m["tool_calls"]:
        text = (text + " " if text else "") + "⮑ " + "; ".join(f"{c['name']}({c['arguments']})" for c in m["tool_calls"])
    return text


def window_view(console: Console, data: dict, *, full: bool = False) -> None:
    """One step's window: the messages in it and every other part, adding up to the window
    total, then what had been lost and when. Several models' windows one after the other."""
    windows = data.get("windows") or [data]
    for i, w in enumerate(windows):
        if i:
            console.print()
        _window_one(console, w, full)


def _window_one(console: Console, data: dict, full: bool) -> None:
    s = data["step"]
    console.print(Text.assemble(("step ", "bold"), str(s["step"]), f" (message {s['message_seq']})  ",
                                ("model ", "bold"), safe(data["model"]), f"  policy {data['policy']}"))
    model_notes(console, data.get("model_notes"))
    lost = [m for m in data["messages"] if not m["in_window"] or m["state"] == "cleared"]
    kept = [m for m in data["messages"] if m["in_window"] and m["state"] != "cleared"]
    console.print(Text(f"window {s['window_tokens']:,} / {s['limit']:,} tokens ({s['utilization']:.0%}, "
                       f"{s['window_tokens_kind']}) = {len(kept)} message(s) ({data['window_parts'][0]['tokens']:,}) "
                       f"+ {len(data['window_parts']) - 1} other part(s); {len(lost)} lost"))
    table = Table(box=box.SIMPLE_HEAD)
    for col, just in (("seq", "right"), ("step", "right"), ("role", "left"), ("state", "left"),
                      ("tokens", "right"), ("text", "left")):
        table.add_column(col, justify=just, overflow="fold")
    # A preview of about two lines of the text column; --full prints it all.
    limit = max(48, console.width - 24)
    show = (lambda t: safe(t)) if full else (lambda t: preview(t, limit))

    def label(m: dict) -> Text:
        return safe(m["role"] + (f":{m['name']}" if m.get("name") else ""), 18)

    def body(m: dict) -> Text:  # a special record's kind leads its text, so the role column stays narrow
        kind = "" if m["kind"] == "message" else f"[{m['kind']}] "
        return Text(kind, style="italic") + show(_message_text(m))

    for m in kept:
        table.add_row(str(m["seq"]), step_label(m), label(m), Text(m["state"], style=_STATE_STYLES.get(m["state"], "")),
                      f"{m['window_tokens']:,}", body(m))
    for part in data["window_parts"]:
        if part["kind"] == "messages":
            continue
        table.add_row("", "", Text(_PART_NAMES.get(part["kind"], part["kind"]), style="italic"), "",
                      f"{part['tokens']:,}", safe(part["label"]) + Text(f" ({part['figure']})", style="dim"))
    table.add_row("", "", Text("window", style="bold"), "", Text(f"{s['window_tokens']:,}", style="bold"),
                  Text("the sum of the rows above", style="dim"), end_section=bool(lost))
    for m in lost:
        note = f"[left @{m['left_step']}" if m.get("left_step") else "[lost"
        by = m.get("left_by")
        if by:
            note += f": {by['type']}" + (" (recorded)" if by.get("recorded") else "")
        note += f"; {m['tokens']:,} tok" + ("; placeholder counted above" if m["state"] == "cleared" else "") + "] "
        table.add_row(str(m["seq"]), step_label(m), label(m), Text(m["state"], style=_STATE_STYLES.get(m["state"], "")),
                      "", Text(note, style="dim") + body(m))
    fit_columns(console, table)
    console.print(table)
    for note in data.get("notes") or ():
        console.print(Text("note: " + note, style="yellow"))
    console.print(Text("step: the call an assistant message makes, →k the first step whose window holds the "
                       "message; @k the step it left at" + ("" if full else "; --full prints whole texts"), style="dim"))


def models_table(console: Console, rows: list[dict], families: list[dict] | None = None) -> None:
    table = Table(box=box.SIMPLE_HEAD)
    for col in ("model", "tokenizer", "limit", "reserved", "policy", "params", "as of", "origin"):
        # A model name is what the user types: never folded; what does not fit is dropped (and
        # named under the table) instead, and below ~70 columns a long policy name folds.
        table.add_column(col, justify="right" if col in ("limit", "reserved") else "left",
                         no_wrap=col not in ("params", "origin", "policy"), overflow="fold")
    for m in rows:
        params = ", ".join(f"{k}={v}" for k, v in m["params"].items())
        table.add_row(safe(m["name"]), m["tokenizer"], f"{m['context_limit']:,}", f"{m['reserved_output']:,}",
                      m["policy"], safe(params), m["as_of"], safe(m["origin"]))
    dropped = fit_columns(console, table, ("params", "origin", "as of", "tokenizer"))
    console.print(table)
    hidden_columns_note(console, dropped)
    console.print(Text("Dated snapshots, -latest/-preview/-exp, provider prefixes (openai/, anthropic., …) and "
                       "4.6 for 4-6 match their entry; a name extending an entry (gpt-4o-mini-search-preview) "
                       "takes its figures. `ctxf models NAME` shows how a name resolves.", style="dim"))
    if families:
        console.print(Text("Versions newer than the table take the newest of their family, and say so: "
                           + ", ".join(f"{f['family']} → {f['entry']}" for f in families), style="dim"))


def models_lookup(console: Console, specs: list[dict]) -> None:
    """How each looked-up name resolves: the entry, the rule, the figures and their source."""
    for m in specs:
        how = {"exact": "table entry", "alias": "alias of table entry", "snapshot": "snapshot of table entry",
               "variant": f"variant ({m['rule']}) of table entry", "family": f"family {m['rule']}: table entry",
               "mapping": "model_mappings entry"}.get(m["match"], m["match"])
        entry = m["entry"] + (f" {m['rule']}" if m["match"] in ("exact", "snapshot") and m.get("rule") else "")
        console.print(Text.assemble(safe(m["name"]), (" → ", "bold"), f"{how} {entry}"))
        console.print(Text(f"  {m['tokenizer']} tokenizer · limit {m['context_limit']:,} − reserved "
                           f"{m['reserved_output']:,} = budget {m['context_limit'] - m['reserved_output']:,} · "
                           f"{m['policy']} on overflow · as of {m['as_of'] or '–'}"))
        console.print(Text("  source: ", style="dim") + safe(m["source"] or "–"))
