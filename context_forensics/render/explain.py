"""Rich rendering of ``ctxf explain``: the verdict, its ranked reasons with their evidence, the
decisive step and its window, the constraints there, drift, a good run's divergence and the
counterfactual replays, sized for an 80-column terminal (wider ones get longer lines, nothing
more). Log text goes through ``render.safe`` so it stays inert on the terminal.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from .common import model_notes, safe

VERDICT_STYLES = {"contributed": "bold red", "not_limiting": "bold green", "unknown": "bold yellow"}
STATE_STYLES = {"present": "green", "at_risk": "yellow", "summarized": "yellow", "gone": "red", "not_yet": "dim"}


def _pct(x: float | None) -> str:
    if x is None:
        return "n/a"
    return "<1%" if 0 < x < 0.01 else f"{x * 100:.0f}%"


def _evidence(ev: dict[str, Any]) -> str:
    parts = []
    if ev.get("step") is not None:
        parts.append(f"step {ev['step']}")
    if ev.get("seq") is not None:
        parts.append(f"seq {ev['seq']}")
    if ev.get("event"):
        parts.append(str(ev["event"]))
    return " · ".join(parts)


def _head(console: Console, data: dict[str, Any]) -> None:
    s = data["session"]
    rp = data["replay"]
    line = Text("ctxf explain ", style="bold")
    line.append(str(s["id"]))
    if s.get("task") or s.get("title"):
        line.append(" · ")
        line.append_text(safe(s.get("task") or s.get("title"), 50, newlines=False))
    line.append(f" · outcome {s.get('outcome') or 'unknown'}")
    console.print(line)
    how = "what-if" if rp["what_if"] else "the log's record"
    console.print(Text(f"replay: {rp['model']} · {rp['policy']} ({how}) · {rp['steps']:,} step(s)", style="dim"))


def explain_view(console: Console, data: dict[str, Any], *, command: str = "ctxf") -> None:
    """Print one diagnosis."""
    _head(console, data)
    console.print()
    v = data["verdict"]
    verdict = Text("Verdict: ", style="bold")
    verdict.append(data["verdict_words"], style=VERDICT_STYLES.get(v, "bold"))
    verdict.append(f"  [{v}]", style="dim")
    console.print(verdict)
    _reasons(console, data["reasons"])
    _decisive(console, data)
    _constraints(console, data)
    _drift(console, data)
    _divergence(console, data)
    _counterfactuals(console, data)
    for note in data.get("notes") or []:
        console.print(Text("note: ", style="yellow").append_text(safe(note)))
    model_notes(console, data.get("model_notes"), indent="")
    d = data.get("decisive_step")
    if d:
        sid = data["session"]["id"]
        check = Text("check: ", style="dim")
        check.append(f"{command} replay {sid} --at {d['step']}" +
                     (f" --model {data['replay']['model']}" if data["replay"]["what_if"] else ""))
        check.append(f"  ·  {command} view {sid} (#step={d['step']})", style="dim")
        console.print(check)


def _reasons(console: Console, reasons: list[dict[str, Any]]) -> None:
    console.print()
    console.print(Text("Reasons, strongest first", style="bold"))
    t = Table.grid(padding=(0, 1))
    t.add_column(justify="right", no_wrap=True)
    t.add_column(no_wrap=True)
    t.add_column(overflow="fold", ratio=1)
    for r in reasons:
        mark = {"strong": "!", "unknown": "?"}.get(r["weight"], "·")
        text = safe(r["text"])
        ev = _evidence(r["evidence"])
        if ev:
            text.append(f"  [{ev}]", style="dim")
        t.add_row(Text(f"{r['rank']}.", style="bold" if r["weight"] != "weak" else ""),
                  Text(mark, style={"!": "red", "?": "yellow"}.get(mark, "dim")), text)
    console.print(t)
    console.print(Text("  ! decides the verdict   ? makes it unknown   · said, decides nothing", style="dim"))


def _decisive(console: Console, data: dict[str, Any]) -> None:
    d = data.get("decisive_step")
    console.print()
    if not d:
        console.print(Text("No decisive step", style="bold"))
        return
    head = Text(f"Decisive step {d['step']}", style="bold")
    head.append(f" (seq {d['seq']}): {d['why_words']}")
    console.print(head)
    if d.get("action"):
        console.print(Padding(safe(d["action"], 200, newlines=False), (0, 0, 0, 2)))
    console.print(Padding(safe(d["text"], 400), (0, 0, 0, 2)))
    w = data.get("window")
    if w:
        line = Text(f"window {w['tokens']:,} tokens ({w['tokens_kind']}), {_pct(w['utilization'])} of "
                    f"{w['limit']:,}")
        if w.get("assumed"):
            line.append(" (assumed limit)", style="yellow")
        if w["lost_count"]:
            by = ", ".join(f"{k}: {n}" for k, n in w["lost_by_event"].items())
            line.append(f"; {w['lost_count']} message(s) lost before it ({by})", style="red")
        else:
            line.append("; nothing lost before it", style="green")
        console.print(Padding(line, (0, 0, 0, 2)))
    lb = data.get("loss_before")
    if lb:
        when = "at this step" if lb["steps_before"] == 0 else f"{lb['steps_before']} step(s) before"
        console.print(Padding(Text(f"a loss {when}: step {lb['step']} ({', '.join(lb['events']) or 'lost'}) "
                                   f"removed seq {', '.join(map(str, lb['seqs'][:6]))}"
                                   + (" …" if len(lb["seqs"]) > 6 else ""), style="yellow"), (0, 0, 0, 2)))


def _constraints(console: Console, data: dict[str, Any]) -> None:
    cs = data.get("constraints") or []
    d = data.get("decisive_step")
    if not cs:
        return
    console.print()
    console.print(Text("Constraints" + (f" at step {d['step']}" if d else " at the last step"), style="bold"))
    t = Table(box=None, show_header=False, padding=(0, 1), expand=False)
    t.add_column("state", no_wrap=True)
    t.add_column("left", no_wrap=True, style="dim")
    t.add_column("constraint", overflow="fold", ratio=1)
    for c in cs:
        left = f"step {c['left_step']} {c['event'] or ''}".strip() if c.get("left_step") else ""
        text = safe(c["text"], 160, newlines=False)
        if c["source"] != "given":
            text.append(f" ({c['source']})", style="dim")
        t.add_row(Text(c["state"], style=STATE_STYLES.get(c["state"], "")), left, text)
    console.print(t)


def _drift(console: Console, data: dict[str, Any]) -> None:
    dr = data.get("drift")
    if not dr:
        return
    console.print()
    if dr["state"] != "judged":
        console.print(Text("Drift: not judged: ", style="bold").append_text(safe(dr["explanation"], 200)))
        return
    at = dr.get("at_step")
    line = Text("Drift", style="bold")
    if at and at.get("verdict"):
        line.append(f" at step {at['step']}: {at['verdict']} (score {at['score']})")
        line.append_text(Text(" · ").append_text(safe(at.get("explanation") or "", 160)))
    else:
        line.append(f": worst {dr.get('worst_verdict') or 'n/a'} at step {dr.get('worst_step')}")
    console.print(line)


def _divergence(console: Console, data: dict[str, Any]) -> None:
    dv = data.get("divergence")
    if not dv:
        return
    console.print()
    console.print(Text(f"Against the good run {dv['good']}", style="bold"))
    e = dv.get("earliest")
    if e:
        console.print(Text(f"  earliest divergence: step {e.get('b_step')} (theirs {e.get('a_step')}), "
                           f"{e.get('cause')}").append_text(Text(" · ").append_text(
                               safe(e.get("explanation") or "", 120))))
    else:
        console.print("  the runs do not diverge")
    d = dv.get("decisive")
    if d:
        console.print(Text(f"  decisive edit: step {d['b_step']} (theirs {d['a_step']}), {d.get('reason') or ''}"))
        fin = d.get("final") or {}
        if fin.get("b") is not None or fin.get("a") is not None:
            ours = f"step {fin['b']}" if fin.get("b") is not None else "no edit in the log"
            theirs = fin["a"] if fin.get("a") is not None else "–"
            console.print(Text(f"  the final patches differ first at the hunk written by {ours} (theirs {theirs})"))
    fe = [x for x in dv["failed_events"] if x["lost"]]
    ge = [x for x in dv["good_events"] if x["lost"]]
    console.print(Text(f"  context events before it: this run {len(fe)}"
                       + (f" ({', '.join(x['event'] for x in fe[-3:])})" if fe else "")
                       + f", the good run {len(ge)}", style="dim"))


def _counterfactuals(console: Console, data: dict[str, Any]) -> None:
    cf = data.get("counterfactuals") or []
    d = data.get("decisive_step")
    if not cf or not d:
        return
    console.print()
    console.print(Text(f"Would the lost items have been in the window at step {d['step']}?", style="bold"))
    t = Table(box=box.SIMPLE, padding=(0, 1), show_edge=False, pad_edge=False)
    t.add_column("model", no_wrap=True, overflow="ellipsis", max_width=24)
    t.add_column("policy", overflow="fold")
    t.add_column("window", justify="right", no_wrap=True)
    t.add_column("kept", justify="right", no_wrap=True)
    t.add_column("", overflow="fold")
    for c in cf:
        if c.get("error"):
            t.add_row(str(c.get("model") or "-"), c["label"], "", "", Text("could not run", style="dim"))
            continue
        n = len(c["kept"]) + len(c["summarized"]) + len(c["lost"])
        if c["keeps_all"]:
            verdict = Text("keeps them (restated)" if c.get("restated") else "keeps them", style="green")
        elif c["overflow"]:
            verdict = Text("over the budget", style="red")
        elif c["summarized"] and not c["lost"] and not c["kept"]:
            verdict = Text("summarized (text unknown)", style="yellow")
        else:
            verdict = Text("loses some" if c["kept"] else "loses them", style="red")
        label = c["label"] if c["label"] in (c["policy"], "a larger window") or not c["label"] else c["label"]
        policy = c["policy"] if label == "a larger window" else label
        approx = "" if c.get("window_tokens_kind") == "exact" else "≈"
        t.add_row(str(c["model"]), policy, f"{approx}{c['window_tokens']:,}", f"{len(c['kept'])}/{n}", verdict)
    console.print(t)
    if any(c.get("window_tokens_kind") != "exact" for c in cf if not c.get("error")):
        console.print(Text("≈ estimated (the model's tokenizer is approximate, or calibrated on the log's "
                           "recorded usage); kept/lost is read from each replay's own window", style="dim"))
