"""Rich rendering of ``ctxf drift``: a banded score curve, a step table, a summary line.

Log text (goal, keywords, phrases) goes through ``render.safe`` / ``render.preview`` so it
stays inert on the terminal.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from .common import model_notes, preview, safe

BAND_STYLES = {"FRESH": "green", "MILD": "cyan", "MODERATE": "yellow", "SEVERE": "red", "CRITICAL": "bold magenta"}
_FLOORS = (("FRESH", 90), ("MILD", 75), ("MODERATE", 55), ("SEVERE", 35))
_BLOCKS = " ▁▂▃▄▅▆▇█"


def _band(score: float) -> str:
    for name, floor in _FLOORS:
        if score >= floor:
            return name
    return "CRITICAL"


def verdict_text(v: str | None) -> Text:
    return Text(v or "n/a", style=BAND_STYLES.get(v or "", "dim"))


def score_curve(scores: list[int | None], *, width: int = 60, height: int = 10) -> list[Text]:
    """Scores 0-100 as a block chart, one column per step (stretched when there are few, the
    worst of each bucket when there are many), coloured by band, dotted at the band floors."""
    if not scores:
        return [Text("(no steps)", style="dim")]
    n = len(scores)
    cols = min(width, n)
    buckets: list[float | None] = []
    for i in range(cols):
        part = [s for s in scores[i * n // cols:max((i + 1) * n // cols, i * n // cols + 1)] if s is not None]
        buckets.append(min(part) if part else None)
    stretch = max(1, min(4, width // cols))
    step = 100 / height
    rows = []
    for r in range(height, 0, -1):
        lo, hi = (r - 1) * step, r * step
        floors = [f"{name} ≥{f}" for name, f in _FLOORS if lo <= f < hi]
        line = Text()
        for v in buckets:
            if v is None or v <= lo:
                line.append(("┈" if floors else " ") * stretch, style="dim")
                continue
            fill = min(1.0, (v - lo) / step)
            line.append(_BLOCKS[max(1, int(round(fill * 8)))] * stretch, style=BAND_STYLES[_band(v)])
        label = " " + floors[0] if floors else (" 100" if r == height else "")
        line.append(label, style="dim")
        rows.append(line)
    span = cols * stretch
    rows.append(Text(f"step 1{' ' * max(1, span - len(str(n)) - 6)}{n}", style="dim"))
    return rows


def events_text(step: dict[str, Any]) -> Text:
    t = Text()
    for e in step["events"]:
        if e["type"] == "goal_left_window":
            lost = ", ".join(f"seq {sq} {st}" for sq, st in e["states"].items())
            kept = "" if e["all_gone"] else "; still in: seq " + ",".join(map(str, e["remaining"]))
            label = f"goal left the window: {lost}{kept}"
            t.append(("; " if t else "") + label, style="bold red")
        elif e["type"] == "goal_returned":
            t.append(("; " if t else "") + "goal back in the window", style="green")
    return t


def _interesting(steps: list[dict[str, Any]], worst: int | None) -> set[int]:
    keep = {0, len(steps) - 1}
    prev = None
    seg = 0
    for i, s in enumerate(steps):
        if s["verdict"] != prev or s["events"] or s["phrases"] or s["step"] == worst or s.get("segment", 0) != seg:
            keep.add(i)
        prev, seg = s["verdict"], s.get("segment", 0)
    return keep


def drift_view(console: Console, session: dict[str, Any], report: dict[str, Any], *, all_steps: bool = False) -> None:
    goal = report["goal"]
    console.print(Text.assemble(("session ", "bold"), session["id"], "  ",
                                preview(session.get("title"), max(20, console.width - 23))))
    seqs = ",".join(map(str, goal["seqs"]))
    template = goal.get("template")
    where = {"messages": f"session opening, seq {seqs}", "option": "--goal",
             "config": "config drift.goal"}[goal["source"]]
    console.print(Text.assemble(("goal ", "bold"), (f"({where}) ", "dim"), preview(goal["text"], 110)))
    if template:  # the part of the opening that is this session's own: what decides, and the keywords
        task_seqs = ",".join(map(str, template["task_seqs"]))
        console.print(Text.assemble(("task ", "bold"), (f"(seq {task_seqs}; the rest is harness template shared with "
                                                        f"{template['other_tasks']} other task(s)) ", "dim"),
                                    preview(template["task_text"], 110)))
    if report.get("state") == "no_goal":  # say so, and nothing else: no curve, no bands, no verdicts
        console.print(Text.assemble(("not judged ", "bold yellow"), safe(goal["explanation"])))
        n = len(report["steps"])
        console.print(Text(f"{n} model call(s), no score and no verdict: drift needs a goal to measure against",
                           style="dim"))
        return
    segments = report.get("segments") or []
    if goal.get("state") == "no_goal":  # the opening is not judged, a later request is
        console.print(Text.assemble(("not judged ", "bold yellow"), f"steps {segments[0]['start_step']}-"
                                    f"{segments[0]['end_step']}: ", safe(goal["explanation"])))
    elif goal["keywords"]:
        console.print(Text.assemble(("keywords ", "bold"), safe(", ".join(goal["keywords"]))))
    for seg in segments[1:]:  # each request unlike the goals before it: a label, the goals before it stay
        g = seg["goal"]
        span = (f"steps {seg['start_step']}-{seg['end_step']}" if seg["end_step"] >= seg["start_step"]
                else f"after step {seg['end_step']}")
        line = Text.assemble((f"goal {seg['index'] + 1} ", "bold"),
                             (f"(new request, seq {','.join(map(str, g['seqs']))}, {span}) ", "dim"),
                             preview(g["text"], 90))
        if g["state"] != "judged":
            scored = any(s["score"] is not None for s in report["steps"]
                         if seg["start_step"] <= s["step"] <= seg["end_step"])
            why = ("too short to stand alone" if g["reason"] == "too_short" else
                   f"no task in it ({g['reason']})") if scored else "not judged: " + g["explanation"]
            line.append_text(safe(f" ({why})", style="yellow"))
        console.print(line)
    replay = ""
    if report["model"]:
        replay = ("  goal window: as the log recorded it" if report["policy"] == "recorded"
                  else f"  goal window: what-if {report['model']} / {report['policy']}")
    console.print(safe(
        f"window {report['window_size']} replies · score = 100 × P(on topic | similarity, goal words, keywords) · "
        f"{report['embedding_model']}{replay}", style="dim"))
    model_notes(console, report.get("model_notes"), indent="")
    steps = report["steps"]
    summary = report["summary"]
    for line in score_curve([s["score"] for s in steps]):
        console.print(line)
    if steps:
        table = Table(box=box.SIMPLE_HEAD)
        columns: tuple[tuple[str, JustifyMethod], ...] = (
            ("step", "right"), ("seq", "right"), ("score", "right"), ("verdict", "left"), ("sim", "right"),
            ("why", "left"))
        for col, just in columns:
            table.add_column(col, justify=just, overflow="fold" if col == "why" else "ellipsis",
                             no_wrap=col != "why")
        shown = set(range(len(steps))) if all_steps else _interesting(steps, summary["worst_step"])
        hidden = 0
        for i, s in enumerate(steps):
            if i not in shown:
                hidden += 1
                continue
            why = safe(s["explanation"])
            ev = events_text(s)
            if s.get("segment", 0) and (i == 0 or steps[i - 1].get("segment", 0) != s["segment"]):
                ev = Text.assemble(ev, "; " if ev else "", (f"goal {s['segment'] + 1}: new request", "bold"))
            if ev:
                why = Text.assemble(ev, "\n", why)
            sim = "" if s["similarity"] is None else f"{s['similarity']:.2f}"
            table.add_row(str(s["step"]), str(s["message_seq"]), "" if s["score"] is None else str(s["score"]),
                          verdict_text(s["verdict"]), sim + ("" if s["judged"] else " ·"), why)
        console.print(table)
        if hidden:
            console.print(Text(f"{hidden} step(s) with an unchanged verdict hidden (--all-steps shows them); "
                               "· marks a reply too short to judge", style="dim"))
    drift_summary(console, summary)


def drift_summary(console: Console, s: dict[str, Any]) -> None:
    if not s["steps"]:
        console.print("no model calls in this session: nothing to score")
        return
    t = Text()
    t.append("final ", style="bold")
    t.append_text(verdict_text(s["final_verdict"]))
    if s["final_score"] is None:
        t.append(" · no reply long enough to judge", style="dim")
    else:
        t.append(f" ({s['final_score']})")
        t.append(f" · worst step {s['worst_step']} ({s['worst_score']}, {s['worst_verdict']})")
        firsts = [f"{band} step {step}" for band, step in s["first_step_at"].items() if step is not None
                  and band != "MILD"]
        t.append(" · first " + ", ".join(firsts) if firsts else " · never below MILD")
    if s["goal_left_window_step"] is not None:
        t.append(f" · goal left the window at step {s['goal_left_window_step']}", style="red")
    if s["drift_phrase_steps"]:
        t.append(f" · drift phrases at step(s) {', '.join(map(str, s['drift_phrase_steps']))}")
    console.print(t)
