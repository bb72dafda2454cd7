"""What every view shares: the consoles, inert log text, table fitting, JSON out, the block curve.

Only this package and ``cli/`` import rich. Text that comes from a log is never interpreted: it
goes into ``Text`` objects (no markup) after control characters are made visible (``safe``,
``preview``: ``inert.inert``), so a log cannot restyle or drive the terminal. The consoles read
no markup or emoji codes in plain strings either, and under every view they keep a net: a text
segment that still holds such a character is printed inert (``net_catches`` records it: the
tests expect it empty, each view neutralizing its own text where it lays it out). The views of
each command live in modules named for it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Iterable

from rich.console import Console, ConsoleOptions, RenderableType, RenderHook, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from ..inert import CONTROL, inert, inert_json


def safe(text: Any, limit: int | None = None, *, newlines: bool = True, style: str = "") -> Text:
    """Log text made inert: no markup, control, BiDi and zero-width characters shown as escapes
    (``\\x1b``, ``\\u202e``). ``newlines=False`` for a name (one line: tab and newline escaped too)."""
    s = "" if text is None else str(text)
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "…"
    return Text(inert(s, newlines=newlines), style=style)


def preview(text: str | None, limit: int = 80) -> Text:
    """One line: whitespace collapsed, cut to ``limit``."""
    return safe(" ".join((text or "").split()), limit)


net_catches: list[str] = []  # text the consoles' net had to make inert (the first few), for the tests


class _Inert:
    """A renderable drawn as it is, with any text segment still holding a control character
    made inert and any link dropped: the net under every view of the two consoles. On a
    console of natural width (piped, no $COLUMNS) each renderable is drawn at the width it
    wants, so a panel or a grid that expands does not fill ``WIDE`` columns."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if is_natural(console):
            try:
                want = Measurement.get(console, options, self.renderable).maximum
            except Exception:  # a renderable rich cannot measure is drawn as it would be
                want = options.max_width
            options = options.update_width(max(1, min(options.max_width, want)))
        for seg in console.render(self.renderable, options):
            if seg.control:
                yield seg
                continue
            text, style = seg.text, seg.style
            if CONTROL.search(text):
                if len(net_catches) < 20:
                    net_catches.append(text)
                text = inert(text)
            if style is not None and style.link:
                style = style.update_link(None)
            yield Segment(text, style) if (text, style) != (seg.text, seg.style) else seg


class _InertHook(RenderHook):
    def process_renderables(self, renderables: list) -> list:
        return [_Inert(r) for r in renderables]


def _console(**kwargs: Any) -> Console:
    console = Console(highlight=False, markup=False, emoji=False, **kwargs)
    console.push_render_hook(_InertHook())
    return console


# Piped output without $COLUMNS: wide enough that no row wraps (``ctxf sessions | grep`` gets
# whole rows); each table still takes only the width its cells need.
WIDE = 4096
PROSE = 120  # what a preview or a paragraph is sized to on such a console


def _columns() -> int | None:
    """$COLUMNS when it holds a width (a positive whole number), else None."""
    value = os.environ.get("COLUMNS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def is_natural(console: Console) -> bool:
    """Whether the console has no width of its own (piped, no $COLUMNS): see ``WIDE``."""
    return bool(getattr(console, "_ctxf_natural", False))


def prose_width(console: Console) -> int:
    """The width to size previews and wrapped notes to: the console's, or ``PROSE`` columns
    on a console of natural width (a preview there would otherwise be a whole message)."""
    return PROSE if is_natural(console) else console.width


def stdout_console() -> Console:
    """Tables to stdout, as wide as $COLUMNS when it is set, else as the terminal when stdout
    is one, else (piped) ``WIDE``: rows are never wrapped for a pipe."""
    columns = _columns()
    if columns is not None:
        return _console(soft_wrap=False, width=columns)
    console = _console(soft_wrap=False)
    if not console.is_terminal:
        console.width = WIDE
        console._ctxf_natural = True  # type: ignore[attr-defined]
    return console


def stderr_console() -> Console:
    """Errors and warnings to stderr, never hard-wrapped: a message naming a long path stays
    one line (the terminal wraps it), so it can be grepped and pasted whole."""
    return _console(stderr=True, soft_wrap=True)


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


def zero_first(table: Table, drop_order: Iterable[str], also: Iterable[str] = ()) -> list[str]:
    """``drop_order`` for ``fit_columns`` with the columns that are all zero or empty over the
    rows shown put first (those of ``also`` too): when columns must go, a column that says
    nothing goes before one that holds a figure, so a compaction never reads "evicted 0"
    while its "summ." column is the one left out."""
    order = list(dict.fromkeys([*drop_order, *also]))

    def says_nothing(name: str) -> bool:
        for col in table.columns:
            if str(col.header) == name:
                cells = list(getattr(col, "_cells", None) or [])
                return bool(cells) and all(str(getattr(c, "plain", c)).strip() in ("", "0") for c in cells)
        return False

    empty = [n for n in order if says_nothing(n)]
    return empty + [n for n in drop_order if n not in empty]


def hidden_columns_note(console: Console, dropped: list[str]) -> None:
    if dropped:
        console.print(Text(f"{len(dropped)} column(s) left out at this width ({', '.join(dropped)}); "
                           "a wider terminal or --json shows them", style="dim"))


def print_json(data: Any) -> None:
    """Data to stdout as JSON (never through rich, so it stays machine-readable). Characters a
    terminal or a viewer could act on are ``\\uXXXX`` escapes (``inert_json``): the same data."""
    sys.stdout.write(inert_json(json.dumps(data, indent=2, ensure_ascii=False, default=str)) + "\n")


def wrote(console: Console, path: Path | str) -> None:
    """The line a command prints after writing a file (its path shown inert)."""
    console.print(Text("wrote ") + safe(str(path)))


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


def step_label(m: dict) -> str:
    """The step a message belongs to: ``k`` for the assistant message making call k, ``→k``
    for any other message, k being the first step whose window holds it ("" if none does)."""
    if m.get("step"):
        return str(m["step"])
    return f"→{m['joined_step']}" if m.get("joined_step") else ""


def message_text(m: dict) -> str:
    """A message's text, then its tool calls: ``text ⮑ name(arguments); …``."""
    text = m["text"] or ""
    if m["tool_calls"]:
        text = (text + " " if text
                else "") + "⮑ " + "; ".join(f"{c['name']}({c['arguments']})" for c in m["tool_calls"])
    return text


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
