"""``ctxf replay``: the step table and utilization curve of each model, and one step's window (``--at``)."""

from __future__ import annotations

from rich import box
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from .common import (
    curve,
    fit_columns,
    hidden_columns_note,
    message_text,
    model_notes,
    preview,
    prose_width,
    safe,
    step_label,
    zero_first,
)
from .events import EDIT_BY_CODE, TRUNCATION_NOT_RECORDED, edit_label, event_label, left_out_label, unrecorded_name


def _events_text(step: dict) -> Text:
    t = Text()
    for e in step["events"]:
        kind = e["type"]
        style = {"overflow": "bold red", "compaction": "magenta", "history_edit": "magenta", "eviction": "yellow",
                 "clearing": "yellow"}.get(kind, "")
        label = kind
        if kind == "history_edit":  # recorded by the log: a truncation, a rewind, a condensing
            label = edit_label(e)
        if kind == "unrecorded_truncation":  # the recorded prompt fell, and the log records no edit
            style = "bold magenta"
            rewritten = len(e.get("rewritten") or [])
            n = len(e.get("would_drop") or [])
            name = unrecorded_name(e)  # a rewrite that took nothing out is no truncation
            label = (f"{name}: −{e.get('tokens_gone', 0):,} tok, "
                     + ("" if name != TRUNCATION_NOT_RECORDED else
                        f"{n:,} out, " if e.get("applied") else f"{n:,} would go (not applied), " if n
                        else "no policy says what, ")
                     + (f"{rewritten:,} rewritten" if rewritten else "")).rstrip(", ")
        if kind == "unrecorded_call":  # implied by the log (Cline removed its record), its reply in this answer
            style = "yellow"
            label = event_label(e)
        if kind == "left_out":  # the harness never sends them again (Pi's cut-off replies)
            style = "yellow"
            label = f"{left_out_label(e)}: −{e.get('tokens', 0):,} tok"
        if kind == "compaction":
            label += " (recorded)" if e.get("recorded") else " (simulated)"
        if kind == "clearing" and e.get("inferred"):  # the agent's own rewrites, which its log never records
            label = f"{e.get('count', 0):,} rewritten (inferred)"
        if kind == "overflow":
            label = f"overflow +{e.get('overflow', 0):,}" + (" ✗ would fail" if e.get("would_fail") else "")
        t.append(("; " if t else "") + label, style=style)
    return t


def _lost_text(seqs: list[int], limit: int = 6) -> str:
    if not seqs:
        return ""
    shown = ",".join(map(str, seqs[:limit]))
    return shown + (f",…(+{len(seqs) - limit})" if len(seqs) > limit else "")


def replay_view(console: Console, session: dict, replays: list[dict], *, all_steps: bool = False,
                check: dict | None = None) -> None:
    """One model: a step table and a curve. Several: side by side, one column group per model.
    ``check``: what ``ctxf check`` found on the session (a header line when it found anything)."""
    from .check import check_header

    console.print(Text.assemble(("session ", "bold"), session["id"], "  ",
                                preview(session.get("title"), max(20, prose_width(console) - 23))))
    check_header(console, check, session["id"])
    rebuilt = session.get("reconstructed") or (session.get("metadata") or {}).get("reconstructed")
    if rebuilt:  # the messages are what the agent displayed (e.g. a UI timeline), not what the model was sent
        for line in safe(f"messages reconstructed {rebuilt}", style="yellow").wrap(console, console.width - 2):
            console.print(Text("  ") + line)
    for rep in replays:
        line = Text.assemble(
            ("model ", "bold"), safe(rep["model"], newlines=False), "  policy ", safe(rep["policy"], newlines=False),
            "  tokenizer ", safe(rep["tokenizer"], newlines=False), " ", (f"({rep['token_kind']})", "dim"),
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
        from ..tokens.labels import UNVERIFIED

        basis = next((f for f in rep.get("flags") or [] if UNVERIFIED in f), None)
        if basis:  # a vendor vocabulary no recorded usage has confirmed: why the counts are estimates
            console.print(Text("  counts: ", style="dim") + safe(basis))
        if rep.get("window_lacks"):  # parts of every request the log does not hold and nothing estimates
            from ..analysis.replay.parts import lacks_words
            from ..store.agents import agent_of

            agent = agent_of(session.get("format"), session.get("metadata"))
            for line in safe(lacks_words(rep["window_lacks"], agent), style="yellow").wrap(console, console.width - 2):
                console.print(Text("  ") + line)
        for o in rep.get("other_models") or ():  # calls of another model: not counted as what ran
            at = o["steps"]
            steps = ", ".join(map(str, at[:6])) + (f" … ({len(at)} calls)" if len(at) > 6 else "")
            words = (f"step(s) {steps} ran under {o['model']} (its window {o['limit']:,}, tokenizer "
                     f"{o['tokenizer']}{', assumed' if o.get('assumed') else ''}): counted here with "
                     f"{rep['tokenizer']} and this budget, not their own")
            for line in safe(words, style="yellow").wrap(console, console.width - 2):
                console.print(Text("  ") + line)
        over = rep.get("overhead")
        if over and over.get("capture"):  # measured on a capture of the agent: on what, and that it is an estimate here
            for line in safe(f"+ {over['tokens']:,} tokens per call not in the log: {over['rests_on']}",
                             style="yellow").wrap(console, console.width - 2):
                console.print(Text("  ") + line)
        elif over:  # a what-if carries the part of each call the log does not hold: an estimate, and on what
            console.print(Text(f"  + ≈{over['tokens']:,} tokens per call not in the log (harness system prompt, "
                               f"tools), estimated: {over['rests_on']}", style="yellow"))
        params = rep.get("params") or {}
        if rep["policy"] == "auto_compaction" and params.get("preset"):  # which agent's rule, and why
            console.print(Text("  preset " + (params.get("preset_picked") or params["preset"]), style="dim"))
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
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("step", "right"), ("seq", "right"), ("window", "right"), ("util", "right"), ("kept", "right"),
        ("evicted", "right"), ("cleared", "right"), ("summ.", "right"), ("out\nlocal", "right"), ("recorded", "right"),
        ("lost now", "left"), ("events", "left"))
    for col, just in columns:
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
            str(s["step"]), str(s["message_seq"]), f"{s['window_tokens']:,}",
            Text(f"{s['utilization']:.0%}", style=util_style),
            str(c["kept"]), str(c["evicted"]), str(c["cleared"]), str(c["summarized"]), str(c["outside_local"]),
            rec, _lost_text(s["newly_lost"]), _events_text(s),
        )
    # All-zero (or empty) columns go first, any of them: then the figures, least needed first.
    dropped = fit_columns(console, table,
                          zero_first(table, ("recorded", "out\nlocal", "kept", "cleared", "summ.", "seq"),
                                                     also=("evicted", "lost now", "events")))
    console.print(table)
    hidden_columns_note(console, dropped)
    if hidden:
        console.print(Text(f"{hidden} quiet step(s) hidden (--all-steps shows them)", style="dim"))
    _after_last_call(console, [rep])
    for line in curve([s["utilization"] for s in steps], marker=rep["summary"]["alert_threshold"]):
        console.print(line)
    _replay_summary(console, [rep])


def _compactions_cell(s: dict) -> str:
    """Compactions, and the truncations the log did not record (not all of them compactions: a
    rewrite, or one no agent policy names, removes nothing from the replay's window)."""
    cell = str(s["compactions"])
    if s.get("compactions_after_last_call"):
        cell += f" ({s['compactions_after_last_call']} after the last call)"
    if s.get("unrecorded_truncations"):
        cell += f"\n{s['unrecorded_truncations']} not recorded"
    return cell


def _after_last_call(console: Console, reps: list[dict]) -> None:
    """The log's records after its last call (a compaction after the final answer): no step
    shows them, so they get a line each."""
    from .events import event_detail, event_label

    for rep in reps:
        who = f"{rep['model']}: " if len(reps) > 1 else ""
        for e in rep.get("after_last_call") or ():
            console.print(Text(f"after the last call: {who}{event_label(e)}: {event_detail(e)}", style="magenta"))


def _replay_compare(console: Console, reps: list[dict], all_steps: bool) -> None:
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("step", justify="right")
    table.add_column("seq", justify="right")
    for rep in reps:
        table.add_column(safe(rep["model"], newlines=False) + Text("\nwindow / util / lost"), justify="right",
                         overflow="fold")
    steps = reps[0]["steps"]
    shown: set[int] = set(range(len(steps))) if all_steps else set().union(*(_interesting(r["steps"]) for r in reps))
    for i in sorted(shown):
        row: list[str | Text] = [str(steps[i]["step"]), str(steps[i]["message_seq"])]
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
    _after_last_call(console, reps)
    for rep in reps:
        console.print(safe(rep["model"], newlines=False, style="bold"))
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
            safe(rep["model"], newlines=False), str(s["steps"]),
            str(s["first_loss_step"]) if s["first_loss_step"] else "none",
            f"{s['peak_utilization']:.0%} @{s['peak_step']}" if s["peak_utilization"] is not None else "",
            str(len(s["steps_above_alert"])), _compactions_cell(s), str(len(s["would_fail_steps"])), fid_text,
        )
    dropped = fit_columns(console, table, zero_first(table, ("steps", "above alert", "compactions"),
                                                     also=("would fail",)))
    console.print(table)
    hidden_columns_note(console, dropped)
    for rep in reps:
        if rep.get("overhead"):
            console.print(Text(f"{rep['model']}: every window counts ≈{rep['overhead']['tokens']:,} estimated tokens "
                               "the log does not hold (system prompt, tools"
                               + (", from a capture" if rep["overhead"].get("capture") else "") + "; see above)",
                               style="dim"))


_STATE_STYLES = {"kept": "", "evicted": "red", "cleared": "yellow", "summarized": "magenta", "outside_local": "cyan"}
# Short names for a window's non-message rows (the full label goes in the text column).
_PART_NAMES = {"cleared_placeholders": "placeholders", "compaction_summary": "summary",
               "tool_definitions": "tools", "framing": "framing", "not_in_log": "unlogged",
               "calibration_scale": "calibration"}


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
                                ("model ", "bold"), safe(data["model"], newlines=False), "  policy ",
                                safe(data["policy"], newlines=False)))
    model_notes(console, data.get("model_notes"))
    lost = [m for m in data["messages"] if not m["in_window"] or m["state"] == "cleared"]
    kept = [m for m in data["messages"] if m["in_window"] and m["state"] != "cleared"]
    console.print(Text(f"window {s['window_tokens']:,} / {s['limit']:,} tokens ({s['utilization']:.0%}, "
                       f"{s['window_tokens_kind']}) = {len(kept)} message(s) ({data['window_parts'][0]['tokens']:,}) "
                       f"+ {len(data['window_parts']) - 1} other part(s); {len(lost)} lost"))
    table = Table(box=box.SIMPLE_HEAD)
    message_columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("seq", "right"), ("step", "right"), ("role", "left"), ("state", "left"), ("tokens", "right"), ("text", "left"))
    for col, just in message_columns:
        table.add_column(col, justify=just, overflow="fold")
    # A preview of about two lines of the text column; --full prints it all.
    limit = max(48, prose_width(console) - 24)
    show = (lambda t: safe(t)) if full else (lambda t: preview(t, limit))

    def label(m: dict) -> Text:
        return safe(m["role"] + (f":{m['name']}" if m.get("name") else ""), 18)

    def body(m: dict) -> Text:  # a special record's kind leads its text, so the role column stays narrow
        kind = "" if m["kind"] == "message" else f"[{m['kind']}] "
        return Text(kind, style="italic") + show(message_text(m))

    for m in kept:
        table.add_row(str(m["seq"]), step_label(m), label(m), Text(m["state"], style=_STATE_STYLES.get(m["state"], "")),
                      f"{m['window_tokens']:,}", body(m))
    for part in data["window_parts"]:
        if part["kind"] == "messages":
            continue
        table.add_row("", "", Text(_PART_NAMES.get(part["kind"], part["kind"]), style="italic"), "",
                      f"{part['tokens']:,}", safe(part["label"]) + safe(f" ({part['figure']})", style="dim"))
    table.add_row("", "", Text("window", style="bold"), "", Text(f"{s['window_tokens']:,}", style="bold"),
                  Text("the sum of the rows above", style="dim"), end_section=bool(lost))
    for m in lost:
        note = f"[left @{m['left_step']}" if m.get("left_step") else "[lost"
        by = m.get("left_by")
        if by:
            note += (f": {by.get('edit') or by['type']} ({EDIT_BY_CODE})" if by.get("rests_on") else
                     f": {by['type']}" + (" (recorded)" if by.get("recorded") else ""))
        cleared = ("" if m["state"] != "cleared" else
                f"; {m['window_tokens']:,} left after the agent rewrote it, counted above" if m.get("rewritten")
                else "; placeholder counted above")
        note += f"; {m['tokens']:,} tok" + cleared + "] "
        table.add_row(str(m["seq"]), step_label(m), label(m), Text(m["state"], style=_STATE_STYLES.get(m["state"], "")),
                      "", Text(note, style="dim") + body(m))
    fit_columns(console, table)
    console.print(table)
    for note in data.get("notes") or ():
        console.print(safe("note: " + note, style="yellow"))
    console.print(Text("step: the call an assistant message makes, →k the first step whose window holds the "
                       "message; @k the step it left at" + ("" if full else "; --full prints whole texts"),
                       style="dim"))
