"""Rich rendering of fact timelines, fact suggestions and threshold calibration.

Fact texts and chunks come from logs or users: they go through ``render.safe``/``preview``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .common import fit_columns, hidden_columns_note, model_notes, preview, safe

GLYPHS = {"present": "█", "at_risk": "▓", "summarized": "▒", "gone": "·", "not_yet": " "}
STYLES = {"present": "green", "at_risk": "yellow", "summarized": "cyan", "gone": "red", "not_yet": ""}
# Down-sampled strips show the worst state of each run of steps.
_SEVERITY = {"not_yet": 0, "present": 1, "at_risk": 2, "summarized": 3, "gone": 4}
LEGEND = "█ present  ▓ at risk  ▒ summarized  · gone  (blank) not yet"


def strip(states: list[str], width: int) -> tuple[Text, int]:
    """One glyph per step, or per run of ``ceil(steps / width)`` steps showing the worst state."""
    n = len(states)
    per = max(1, -(-n // max(width, 1)))
    out = Text()
    for lo in range(0, n, per):
        worst = max(states[lo : lo + per], key=_SEVERITY.__getitem__)
        out.append(GLYPHS[worst], style=STYLES[worst])
    return out, per


def _cause_text(cause: dict | None) -> str:
    if not cause:
        return ""
    seqs = cause.get("seqs") or []
    who = ", ".join(f"#{s}" for s in seqs[:3]) + (" …" if len(seqs) > 3 else "")
    kind = cause["type"]
    if kind == "compaction":
        kind += " (recorded)" if cause.get("recorded") else " (simulated)"
    elif kind == "history_edit":
        kind = f"recorded {(cause.get('event') or {}).get('edit', 'history edit')}"
    elif kind == "unrecorded_truncation":
        kind = _unrecorded_cause(cause)
    elif kind == "left_out":
        kind = "cut-off reply the harness left out"
    return f"{kind} {who}".strip()


def _unrecorded_cause(cause: dict) -> str:
    """An edit the log did not record, as a fact's cause: a truncation, or a rewrite in place."""
    from .events import TRUNCATION_NOT_RECORDED, unrecorded_name

    if unrecorded_name(cause.get("event") or {}) != TRUNCATION_NOT_RECORDED:
        return "duplicate file reads rewritten, which the log did not record"
    return "truncation the log did not record"


def facts_view(console: Console, session: dict, data: dict, *, at: int | None = None) -> None:
    m = data["steps"]
    head = Text()
    head.append(f"session {session['id']}  ", style="bold")
    head.append_text(Text.assemble("model ", safe(data["model"], newlines=False), "  policy ",
                                   safe(data["policy"], newlines=False), f"  threshold {data['threshold']:.2f}  ",
                                   "embedding ", safe(data["embedding"]["model"], newlines=False), f"  steps {m}"))
    console.print(head)
    model_notes(console, data.get("model_notes"))
    if not data["facts"]:
        console.print("no facts")
        return
    cols: list[tuple[str, str, list[Any]]] = [  # (header, justify, cells)
        ("#", "right", [str(n) for n in range(1, len(data["facts"]) + 1)]),
        ("first", "right", [_num(f["first_appeared"]) for f in data["facts"]]),
        ("last", "right", [_num(f["last_present"]) for f in data["facts"]]),
        ("left at", "right", [_num(f["disappeared_at"]) for f in data["facts"]]),
        ("cause", "left", [_cause_text(f["cause"]) for f in data["facts"]]),
        ("now", "left", [f["final_state"] or "" for f in data["facts"]]),
    ]
    if at is not None:
        cols.append((f"@ step {at}", "left",
                     [f["timeline"][at - 1]["state"] if 1 <= at <= m else "" for f in data["facts"]]))
    strip_head = f"steps 1–{m}" if m else "steps"
    fact_len = max(len(f["fact"]) for f in data["facts"])

    def widths(cs: list) -> int:
        # SIMPLE_HEAD: a padding space each side of a cell, a blank divider between columns
        return sum(max(len(h), *(len(c) for c in cells)) for h, _, cells in cs) + 3 * (len(cs) + 2) + 1

    # The strip gets up to 60 glyphs and the fact text what is left; on a narrow terminal the
    # cause column goes first (the notes below the table say it in full).
    fixed = widths(cols)
    if console.width - fixed - min(m, 20) < 16:
        cols = [c for c in cols if c[0] != "cause"]
        fixed = widths(cols)
    strip_w = max(len(strip_head), min(60, m, console.width - fixed - 24))
    fact_w = max(12, min(48, fact_len, console.width - fixed - strip_w))
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column(cols[0][0], justify="right", no_wrap=True)
    table.add_column("fact", overflow="ellipsis", no_wrap=True, max_width=fact_w)
    for h, justify, _ in cols[1:]:
        table.add_column(h, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    table.add_column(strip_head, no_wrap=True, min_width=strip_w)
    per = 1
    for r, f in enumerate(data["facts"]):
        glyphs, per = strip([t["state"] for t in f["timeline"]], strip_w)
        cells: list[Any] = [cols[0][2][r], preview(f["fact"], fact_w)]
        for h, _, values in cols[1:]:
            v = values[r]
            if h == "now" or h.startswith("@"):
                cells.append(Text(v.replace("_", " "), style=STYLES.get(v, "")))
            else:
                cells.append(safe(v))
        table.add_row(*cells, glyphs)
    console.print(table)
    scale = "1 glyph = 1 step" if per == 1 else f"1 glyph = {per} steps (worst state shown)"
    console.print(Text(f"{LEGEND}; {scale}", style="dim"))
    method = data.get("method") or {}
    if method.get("method") == "prefiltered" and method.get("encoded", 0) < method.get("chunks", 0):
        console.print(Text(f"embedded {method['encoded']:,} of {method['chunks']:,} unique chunks: those that could "
                           "hold a fact (near misses among them only; --exhaustive: all)", style="dim"))
    for n, f in enumerate(data["facts"], start=1):
        for line in _notes(f):
            if isinstance(line, _Reason):  # a why the reader needs whole: folded, never cut
                console.print(Text("       ") + line.text, overflow="fold")
            elif isinstance(line, _Quoted):  # the quote holds the differing value: whole, never cut
                head = Text(f"{n:>3}  ", style="bold") + line.line
                if head.cell_len + line.quote.cell_len <= console.width:
                    console.print(head + line.quote, no_wrap=True)
                else:
                    head.rstrip()
                    console.print(head, no_wrap=True, overflow="ellipsis")
                    console.print(Text("       ") + line.quote, overflow="fold")
            else:
                console.print(Text(f"{n:>3}  ", style="bold") + line, no_wrap=True, overflow="ellipsis")


def _num(v: Any) -> str:
    return "–" if v is None else str(v)


@dataclass(frozen=True)
class _Quoted:
    """A near-miss note and the text it quotes: on one line when it fits, else the quote folded below."""

    line: Text
    quote: Text


@dataclass(frozen=True)
class _Reason:
    """A note's continuation line: the polarity conflict or the dropped statement behind a near
    miss."""

    text: Text


def _notes(f: dict) -> list[Text | _Reason | _Quoted]:
    out: list[Text | _Reason | _Quoted] = []
    if f["first_appeared"] is None:
        line = Text("never in any window")
        if f["near_misses"]:
            nm = f["near_misses"][0]
            line.append(f"; closest text {_what_differs(nm)}: #{nm['seq']} ({nm['score']:.2f}")
            if nm.get("polarity") or nm.get("dropped"):  # a why to read whole, on its own line
                line.append(")")
                out += [line, _Reason(safe(_why(nm)))]
                return out
            line.append(", ")
            line.append(safe(_why(nm)))
            line.append(")")
        out.append(line)
        return out
    for d in f["departures"]:
        c = d["cause"] or {}
        seqs = c.get("seqs") or []
        who = ", ".join(f"#{s} {r}" for s, r in zip(seqs[:4], c.get("roles") or []))
        kind = c.get("type", "?")
        if kind == "compaction":
            kind += " (recorded)" if c.get("recorded") else " (simulated)"
        elif kind == "history_edit":
            kind = f"recorded {(c.get('event') or {}).get('edit', 'history edit')}"
        elif kind == "unrecorded_truncation":
            kind = _unrecorded_cause(c)
        elif kind == "left_out":
            kind = "cut-off reply the harness left out"
        line = Text(f"step {d['step']}: {d['from'].replace('_', ' ')} → {d['to'].replace('_', ' ')} by {kind}")
        if c.get("policy") and not (c["policy"] == "recorded" and "recorded" in kind):  # not "(recorded) [recorded]"
            line.append_text(safe(f" [{c['policy']}]"))
        if who:
            line.append_text(safe(f" of {who}"))
        out.append(line)
    if f["first_at_risk"] is not None:
        reasons = sorted({t["reason"] for t in f["timeline"] if t["reason"]})
        out.append(Text(f"at risk from step {f['first_at_risk']}: " + ", ".join(r.replace("_", " ") for r in reasons)))
    from ..analysis.facts.timeline import REASON_RESTATED

    anchored = [t["step"] for t in f["timeline"] if t["reason"] == REASON_RESTATED]
    if anchored:  # present only through goal anchoring's simulated copy of the source
        n = len(anchored)
        out.append(Text(f"in view only as goal anchoring's restatement (simulated text) at {n} "
                        f"{'step' if n == 1 else 'steps'}, from step {anchored[0]} to {anchored[-1]}"))
    for r in f["recollections"][:5]:
        out.append(Text(f"step {r['step']}: the model stated it without the source in view (#{r['seq']}, "
                        f"{r['score']:.2f})"))
    for r in f["restated"][:5]:
        out.append(safe(f"step {r['step']}: restated by #{r['seq']} {r['role']} ({r['score']:.2f})"))
    if f["near_misses"]:
        nm = f["near_misses"][0]
        line = safe(f"similar text {_what_differs(nm)}: #{nm['seq']} {nm['role']} ({nm['score']:.2f}")
        long_why = bool(nm.get("polarity") or nm.get("dropped"))
        if not long_why:
            line.append(", ")
            line.append(safe(_why(nm)))
        line.append("): ")
        out.append(_Quoted(line, safe(_quote(nm.get("span") or nm["chunk"], f["fact"]))))
        if long_why:
            out.append(_Reason(safe(_why(nm))))
    return out


# A value a fact can differ by: a token with a digit, an underscore or a slash, or a dotted name.
_VALUE = re.compile(r"\S*[\d_/]\S*|\S*[A-Za-z]\.[A-Za-z_]\S*")
_PUNCT = ".,;:!?()[]{}<>'\"`"


def _quote(text: str, fact: str, limit: int = 60) -> str:
    """The near miss's text on one line, cut after ``limit`` characters but never before the end
    of a value the fact does not hold (the differing "3,000" of a fact saying "4,500") and
    the word after it (its unit: "3,000 EUR")."""
    from ..matching.lexical import text_numbers

    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    fact_nums, fact_low = text_numbers(fact), fact.lower()
    end = limit
    for m in _VALUE.finditer(text):
        tok = m.group().strip(_PUNCT)
        if not tok:
            continue
        nums = text_numbers(tok) if any(ch.isdigit() for ch in tok) else set()
        if (nums - fact_nums) if nums else tok.lower() not in fact_low:
            unit = re.match(r"\s+\S+", text[m.end():])
            end = max(end, m.end() + (unit.end() if unit else 0))
    return text if end >= len(text) else text[:end].rstrip() + "…"


def _what_differs(nm: dict) -> str:
    if nm.get("polarity"):
        return "with other polarity"
    if nm.get("dropped"):
        return "without its ban" if nm["dropped"]["prohibition"] else "without all of it"
    return "with other tokens"


def _why(nm: dict) -> str:
    """'missing 4500', "polarity differs: 'Do not rename' vs 'You may rename'" or "does not
    carry the prohibition 'no ad-hoc SQL outside migrations'"."""
    if nm.get("polarity"):
        return nm["polarity"]["reason"]
    if nm.get("dropped"):
        return nm["dropped"]["reason"]
    return "missing " + ", ".join(nm["missing"][:4])


def suggestions_view(console: Console, session: dict, rows: list[dict]) -> None:
    if not rows:
        console.print("no constraint-like sentences in the system prompt or the first user message")
        return
    table = Table(box=box.SIMPLE_HEAD, title=f"fact suggestions for {session['id']}", title_justify="left")
    table.add_column("seq", justify="right")
    table.add_column("role")
    table.add_column("score", justify="right")
    table.add_column("why", overflow="fold", max_width=24)
    table.add_column("text", overflow="fold")
    for r in rows:
        table.add_row(str(r["seq"]), safe(r["role"]), f"{r['score']:.1f}", safe(", ".join(r["reasons"])),
                      safe(r["text"]))
    console.print(table)
    console.print(Text("track them with: ctxf facts SESSION --fact \"…\" (or a `facts:` list in the config)",
                       style="dim"))


def calibration_view(console: Console, data: dict) -> None:
    console.print(safe(f"{data['pairs']} pair(s), {data['positives']} present; "
                       f"{data['lexical_failures']} fail the lexical check, "
                       f"{data.get('polarity_failures', 0)} the polarity check, "
                       f"{data.get('clause_failures', 0)} the statement check; "
                       f"{data.get('verbatim', 0)} verbatim; "
                       f"embedding {data['embedding']['model']}"))
    table = Table(box=box.SIMPLE_HEAD)
    for col in ("threshold", "precision", "recall", "f1", "tp", "fp", "fn", "tn"):
        table.add_column(col, justify="right")
    rec = data["recommended"]["threshold"]
    cur = (data.get("current") or {}).get("threshold")
    for r in data["table"]:
        mark = " ◀ recommended" if r["threshold"] == rec else ""
        if cur is not None and abs(r["threshold"] - cur) < 1e-9:
            mark += " (current)"
        style = "bold" if r["threshold"] == rec else ""
        table.add_row(f"{r['threshold']:.2f}{mark}", f"{r['precision']:.3f}", f"{r['recall']:.3f}",
                      f"{r['f1']:.3f}", str(r["tp"]), str(r["fp"]), str(r["fn"]), str(r["tn"]), style=style)
    dropped = fit_columns(console, table, ("tn", "fn", "fp", "tp"))  # the counts go before a figure is cut
    console.print(table)
    hidden_columns_note(console, dropped)
    r = data["recommended"]
    line = (f"recommended fact_presence_cosine: {r['threshold']:.2f} "
            f"(precision {r['precision']:.3f}, recall {r['recall']:.3f}, F1 {r['f1']:.3f})")
    c = data.get("current")
    if c:
        line += (f"; current {c['threshold']:.2f}: precision {c['precision']:.3f}, recall {c['recall']:.3f}, "
                 f"F1 {c['f1']:.3f}")
    console.print(Text(line, style="bold"))
    if data.get("subsets"):
        _subsets_view(console, data["subsets"])


def _subsets_view(console: Console, subsets: list[dict]) -> None:
    """F1 (precision/recall) per subset of the pairs file at the reported thresholds."""
    table = Table(box=box.SIMPLE_HEAD, title="by subset: precision / recall / F1", title_justify="left")
    table.add_column("subset")
    table.add_column("pairs", justify="right")
    table.add_column("present", justify="right")
    for at in subsets[0]["at"]:
        table.add_column(f"@ {at['threshold']:.2f}", justify="right")
    for sub in subsets:
        cells = [f"{a['precision']:.2f} / {a['recall']:.2f} / {a['f1']:.3f}" for a in sub["at"]]
        table.add_row(safe(sub["subset"]), str(sub["pairs"]), str(sub["positives"]), *cells,
                      style="bold" if sub["subset"] == "all" else "")
    dropped = fit_columns(console, table, ("present", "pairs"))
    console.print(table)
    hidden_columns_note(console, dropped)
