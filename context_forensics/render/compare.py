"""``ctxf replay --compare-policies``: one row per policy, its facts at the last step and its token cost."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .common import fit_columns, hidden_columns_note, model_notes, preview, prose_width, safe

MAX_FACT_COLUMNS = 4  # more facts than this: a "kept" count and the first loss instead of a column each
_KIND = {"exact": "exact", "calibrated": "calibrated", "estimated": "estimated"}


def _num(v: int | None) -> str:
    return "–" if v is None else f"{v:,}"


def _cell(f: dict[str, Any]) -> Text:
    if not f["stated"]:
        return Text("–", style="dim")
    if f["kept_to_end"]:
        return Text("kept" + ("*" if f["restated"] else ""), style="green")
    at = f" {f['lost_at']}" if f["lost_at"] is not None else ""
    if f["final_state"] == "summarized":
        return Text("summ" + at, style="magenta")
    return Text("lost" + at, style="red")


def _order(row: dict[str, Any]) -> tuple:
    """Errors last; then most facts kept, fewest calls over the budget, fewest tokens sent."""
    return (row["error"] is not None, -row["kept"], row["overflow_steps"], row["total_tokens_sent"] or 0)


def compare_view(console: Console, data: dict[str, Any]) -> None:
    """The comparison table, the facts it numbers, and what each figure rests on."""
    session, facts = data["session"], data["facts"]
    width = prose_width(console)
    console.print(Text.assemble(("session ", "bold"), session["id"], "  ",
                                preview(session.get("title"), max(20, width - 23))))
    console.print(Text.assemble(("model ", "bold"), data["model"], f"  limit {data['limit']:,}  budget ",
                                f"{data['budget']:,}", ("  facts at the last step, per policy", "dim")))
    model_notes(console, data.get("model_notes"))
    for k, fact in enumerate(facts, start=1):
        console.print(Text.assemble((f"  #{k} ", "bold"), safe(fact, max(20, width - 6))))
    rows = sorted(data["policies"], key=_order)
    per_fact = len(facts) <= MAX_FACT_COLUMNS
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, header_style="bold")
    table.add_column("policy", no_wrap=True)
    if per_fact:
        for k in range(1, len(facts) + 1):
            table.add_column(f"#{k}", no_wrap=True)
    else:  # the count, and the first loss
        table.add_column("kept", justify="right", no_wrap=True)
        table.add_column("first lost", no_wrap=True)
    table.add_column("over", justify="right", no_wrap=True)
    table.add_column("mean", justify="right", no_wrap=True)
    table.add_column("final", justify="right", no_wrap=True)
    table.add_column("sent", justify="right", no_wrap=True)
    table.add_column("synth.", justify="right", no_wrap=True)
    kinds = set()
    for row in rows:
        if row["error"] is not None:
            blanks = ["–"] * (len(facts) if per_fact else 2)
            table.add_row(Text(row["label"], style="dim"), *blanks, "–", "–", "–", "–", "–")
            continue
        kinds.add(row["token_kind"])
        if per_fact:
            cells: list[Text | str] = [_cell(f) for f in row["facts"]]
        else:
            lost = [(f["lost_at"], k) for k, f in enumerate(row["facts"], start=1)
                    if f["stated"] and not f["kept_to_end"] and f["lost_at"] is not None]
            cells = [f"{row['kept']}/{len(facts)}",
                     Text(f"#{min(lost)[1]} at {min(lost)[0]}", style="red") if lost else Text("–", style="dim")]
        over = Text(str(row["overflow_steps"]), style="bold red" if row["would_fail_steps"] else "") \
            if row["overflow_steps"] else Text("0", style="dim")
        table.add_row(row["label"], *cells, over, _num(row["mean_window_tokens"]),
                      _num(row["final_window_tokens"]), _num(row["total_tokens_sent"]),
                      _num(row["synthetic_tokens_sent"]))
    dropped = fit_columns(console, table, ["final", "synth.", "over"])
    console.print(table)
    hidden_columns_note(console, dropped)
    kind = ", ".join(sorted(_KIND.get(k, str(k)) for k in kinds if k)) or "–"
    legend = [
        "kept: a supporting message in the window at the last step (* only as goal anchoring's restatement); "
        "lost N / summ N: gone / only in a simulated summary (its text unknown: not kept) since step N; "
        "– never stated",
        f"over: calls over the budget; mean, final: window tokens per call; sent: their sum over all calls; "
        f"synth.: simulated text among them (summaries, restatements: estimates). Tokens: {kind}",
    ]
    for line in legend:
        console.print(Text(line, style="dim"))
    failing = [r for r in rows if r["error"] is None and r["would_fail_steps"]]
    if failing:
        console.print(Text.assemble(("would fail: ", "bold red"), ", ".join(
            f"{r['label']} ({r['would_fail_steps']} call(s))" for r in failing),
            " over the budget: what they keep is no rescue"))
    for row in rows:
        if row["error"] is not None:
            console.print(Text.assemble((f"{row['label']}: ", "bold"), safe(row["error"])))
        for note in row["notes"]:
            console.print(Text.assemble((f"{row['label']}: ", "bold"), safe(note)))
