"""Token-count fidelity on the real corpus: computed prompt tokens vs the usage logs recorded.

    python bench/fidelity.py                 # ../shared/corpus, a table per source
    python bench/fidelity.py --corpus PATH   # another folder
    python bench/fidelity.py --json          # every call as JSON lines, then the summary
    python bench/fidelity.py --sessions      # a line per session too

The corpus is ingested into a temporary store; every assistant message with recorded prompt
tokens is one call. Its context is rebuilt (messages before it, restarted after the latest
compaction, system messages kept) and counted with the session model's tokenizer and chat
framing (context_forensics.tokens.fidelity). A source gets up to two rows:

- ``exact`` / ``estimated``: the computed figure as is;
- ``calibrated``: the per-session calibrated figure, each call predicted by a fit that did not
  see it (leave-one-out), so the error is not fitted on the point it is measured at. Calls of
  sessions with a single recorded call cannot be held out and are left out of this row.

Targets (replay issue): OpenAI calls whose log holds the exact request within ±2 tokens (±1%
with tools); Claude calibrated median error ≤ 3%.

The second table is compaction fidelity (context_forensics.analysis.replay.compaction_fidelity):
a row per compaction or truncation the corpus recorded (Claude Code compact_boundary, Codex
compacted, Pi compaction entries, Cline deleted ranges, Roo condense, Gemini CLI compression):
agent, agent version, session, the recorded step (the first model call after it), the step the
matching auto_compaction preset (picked from the agent and version) fires at, run from the window
the log recorded after the previous compaction, their difference, and the tokens before as
recorded (preTokens / tokensBefore; Cline's from the previous call's usage) and as simulated.
Manual compactions are listed and left out of the statistics. Target (issue 15): median step
error 0, none off by more than 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from _common import FIXTURES, add_corpus_option  # first: puts this checkout's package on sys.path

from context_forensics.store.db import Store
from context_forensics.store.ingest import ingest_paths
from context_forensics.tokens.fidelity import session_fidelity, summarize


def source_label(session: dict) -> str:
    """A readable source name: format, endpoint or harness, and model family."""
    fmt = session["format"]
    md = session.get("metadata") or {}
    model = (session.get("model") or "?").rsplit("/", 1)[-1]
    if fmt == "inspect":
        return f"Inspect logs ({model})"
    if fmt == "vcr_cassette":
        ep = ",".join(md.get("endpoint") or ["?"])
        return {"openai_chat": "OpenAI cassettes (chat)", "openai_responses": "OpenAI cassettes (responses)",
                "anthropic": "Anthropic cassettes", "gemini": "Gemini cassette"}.get(ep, f"cassettes ({ep})")
    if fmt == "openhands":
        return "OpenHands (claude-3.5-sonnet)"
    if fmt == "claude_code":
        role = md.get("role")
        return {"subagent": "Claude Code subagents", "compaction_call": "Claude Code compaction calls"}.get(
            role, "Claude Code sessions")
    if fmt == "codex":
        return f"Codex ({model})"
    if fmt == "gemini_cli":  # token-audit's sample is hand-written: its figures are no measurement
        return "Gemini CLI (hand-written sample)" if "token-audit" in (session.get("source") or "") else \
            f"Gemini CLI ({model})"
    if fmt == "cline":  # the window is the API history only where the folder holds it
        where = "history" if md.get("window") == "api_conversation_history.json" else "ui only"
        return f"{md.get('agent', 'cline').capitalize()} ({where}, {model})"
    if fmt == "pi":  # the Pi coding agent's usage per assistant message (input + cacheRead + cacheWrite)
        return f"Pi ({model})"
    if fmt == "copilot_cli":  # per reply only outputTokens: no prompt size per call (copilot_context)
        return f"Copilot CLI ({model})"
    if fmt == "otel":  # chat spans' gen_ai.usage.input_tokens against their recorded request
        forms = "+".join(md.get("forms") or ["?"])
        return f"OTel GenAI ({forms}, {model})"
    if fmt == "pydantic_ai":  # each ModelResponse's RequestUsage.input_tokens (cached tokens included)
        return f"Pydantic AI ({model})"
    if fmt == "mini_swe_agent":
        fam = "gpt-5-mini" if "gpt-5-mini" in model else ("gemini-3-pro" if "gemini-3" in model else model)
        return f"mini-swe-agent ({fam})"
    return f"{fmt} ({model})"


def run(corpus: Path, *, as_json: bool, per_session: bool) -> int:
    t0 = time.perf_counter()
    rows: list[dict] = []
    sessions_out: list[dict] = []
    with tempfile.TemporaryDirectory() as d, Store.open(Path(d) / "fidelity.db") as store:
        report = ingest_paths(store, [corpus], recursive=True)
        failed = [f for f in report.files if f.status == "failed"]
        for f in failed:
            print(f"warning: {f.path}: {f.error}", file=sys.stderr)
        t_ingest = time.perf_counter() - t0
        for ses in store.sessions():
            if not ses["usage_count"]:
                continue
            fid = session_fidelity(store, ses["id"])
            label = source_label(ses)
            sm = fid.summary()
            sm["source"] = label
            sm["file"] = ses["source"]
            sessions_out.append(sm)
            for st in fid.recorded_steps():
                rows.append({"source": label, "session": ses["id"], "session_kind": fid.kind,
                             "tokenizer": fid.spec.tokenizer, "n_tools": st.n_tools, **st.to_dict()})
        replayed = replay_rows(store)
        compactions = compaction_checks(store)
        copilot = copilot_context(store)
        aider = aider_rounded(store)
        otel_seen = any(r["source"].startswith("OTel GenAI") for r in rows)
    if not otel_seen:  # no public OTel export exists: the generated fixtures, their usage canned
        rows += otel_fixture_rows()
    if not any(r["source"].startswith("Pydantic AI") for r in rows):  # no public dump: TestModel's canned usage
        rows += pydantic_ai_fixture_rows()
    t_total = time.perf_counter() - t0
    if as_json:
        for r in rows:
            print(json.dumps(r))
    table = summarize_rows(rows)
    if as_json:
        print(json.dumps({"version": 1, "summary": table, "replayed": replayed,
                          "sessions": sessions_out if per_session else None,
                          "copilot_cli": copilot, "aider_rounded": aider,
                          "compactions": [c.to_dict() for c in compactions]}))
        return 0
    print_table(table)
    print_targets(rows, table)
    print_replayed(replayed)
    print_copilot(copilot)
    print_aider(aider)
    print_compactions(compactions)
    if any(r["source"].startswith("OTel fixture") for r in rows):
        print("\nOTel fixture rows: no public OTel export exists, so these are tests/fixtures/otel (written by")
        print("the real instrumentations over a mocked transport); their usage is the mock's canned figures,")
        print("not an API's count: they show recorded usage and requests reaching the table, and what")
        print("recording the tool definitions (OpenLLMetry, OpenInference) or not (openai-v2) changes.")
    if any(r["source"].startswith("Pydantic AI canned") for r in rows):
        print("\nPydantic AI canned rows: no public message-history dump exists, so these are tests/fixtures/")
        print("pydantic_ai (dumped by Pydantic AI itself); their usage is TestModel's canned estimate and the")
        print("FunctionModel's made-up figures, not any provider's count: they show usage reaching the table only.")
    if per_session:
        print()
        for sm in sessions_out:
            c, cal = sm["computed"], sm.get("calibrated") or {}
            print(f"  {sm['source']:32} {Path(sm['file']).name[:48]:48} {sm['kind']:10} "
                  f"calls={c.get('calls', 0):3} computed med={_pct(c.get('median_pct'))} "
                  f"calibrated med={_pct(cal.get('median_pct'))}")
    print(f"\n{len(rows)} recorded calls; ingest {t_ingest:.1f}s, total {t_total:.1f}s", file=sys.stderr)
    return 0


def otel_fixture_rows() -> list[dict]:
    """Fidelity rows of tests/fixtures/otel (one store per file: the forms give identical sessions,
    which one store would keep once). Their usage is the mock transport's canned figures, not an
    API's count: the rows show recorded usage and recorded requests reaching the table (and
    what recording tool definitions or not changes), not the tokenizer's accuracy."""
    rows = []
    for f in sorted((FIXTURES / "otel").glob("*.json*")):
        with tempfile.TemporaryDirectory() as d, Store.open(Path(d) / "otel.db") as store:
            ingest_paths(store, [f])
            for ses in store.sessions():
                fid = session_fidelity(store, ses["id"])
                label = f"OTel fixture ({'+'.join((ses.get('metadata') or {}).get('forms') or ['?'])})"
                for st in fid.recorded_steps():
                    rows.append({"source": label, "session": f"{f.name}:{ses['id']}", "session_kind": fid.kind,
                                 "tokenizer": fid.spec.tokenizer, **st.to_dict()})
    return rows


def pydantic_ai_fixture_rows() -> list[dict]:
    """Fidelity rows of tests/fixtures/pydantic_ai's generated dumps. Their usage is canned (TestModel's
    estimate from the text, the FunctionModel's figures set by the script), not a provider's count."""
    rows = []
    for name in ("continued.json", "function_model.json"):  # test_model_run.json is continued.json's first run
        with tempfile.TemporaryDirectory() as d, Store.open(Path(d) / "pai.db") as store:
            ingest_paths(store, [FIXTURES / "pydantic_ai" / name])
            for ses in store.sessions():
                fid = session_fidelity(store, ses["id"])
                model = "TestModel" if ses.get("model") == "test" else "FunctionModel"
                label = f"Pydantic AI canned ({model})"
                for st in fid.recorded_steps():
                    rows.append({"source": label, "session": f"{name}:{ses['id']}", "session_kind": fid.kind,
                                 "tokenizer": fid.spec.tokenizer, **st.to_dict()})
    return rows


def summarize_rows(rows: list[dict]) -> list[dict]:
    by_source: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_source[r["source"]].append(r)
    out = []
    for source in sorted(by_source):
        rs = by_source[source]
        kinds = {r["computed_kind"] for r in rs}
        raw_kind = "exact" if kinds == {"exact"} else ("estimated" if kinds == {"estimated"} else "mixed")
        raw = summarize([r["error"] for r in rs], [r["recorded"] for r in rs])
        out.append({"source": source, "kind": raw_kind, "sessions": len({r["session"] for r in rs}), **raw})
        cal_rows = [r for r in rs if r["session_kind"] == "calibrated"]
        if cal_rows:
            held = [r for r in cal_rows if r.get("calibrated_error") is not None]
            cal = summarize([r["calibrated_error"] for r in held], [r["recorded"] for r in held])
            cal["not_held_out"] = len(cal_rows) - len(held)
            out.append({"source": source, "kind": "calibrated",
                        "sessions": len({r["session"] for r in cal_rows}), **cal})
    return out


def _pct(v: float | None) -> str:
    return "    -" if v is None else f"{v:5.2f}%"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}" if v >= 10 else f"{v:.1f}"


def print_table(table: list[dict]) -> None:
    head = (f"{'source':34} {'kind':10} {'sess':>4} {'calls':>5} {'med |err|':>10} {'p95 |err|':>10} "
            f"{'med %':>7} {'p95 %':>7} {'≤2 tok':>7} {'≤1%':>5}")
    print(head)
    print("-" * len(head))
    for t in table:
        if not t.get("calls"):
            extra = f"  ({t.get('not_held_out', 0)} single-call, not held out)" if t.get("not_held_out") else ""
            print(f"{t['source']:34} {t['kind']:10} {t['sessions']:>4} {0:>5}{extra}")
            continue
        note = f"  (+{t['not_held_out']} not held out)" if t.get("not_held_out") else ""
        print(f"{t['source']:34} {t['kind']:10} {t['sessions']:>4} {t['calls']:>5} {_num(t['median_abs']):>10} "
              f"{_num(t['p95_abs']):>10} {t['median_pct']:6.2f}% {t['p95_pct']:6.2f}% "
              f"{t['within_2']:>7} {t['within_1pct']:>5}{note}")


EXACT_REQUEST_SOURCES = ("Inspect logs", "OpenAI cassettes")  # logs holding the exact request
CLAUDE_WHOLE_REQUEST = ("Anthropic cassettes", "OpenHands")  # Claude logs holding the whole request


def print_targets(rows: list[dict], table: list[dict]) -> None:
    print("\nexact / estimated rows: the computed figure as is. An exact tokenizer still misses what a")
    print("harness adds without logging it (gpt-5-mini's hidden system prompt; Codex's instructions and")
    print("tools; Claude Code's system prompt, tools and retained thinking), so those sessions are")
    print("calibrated. calibrated rows: each call predicted by a per-session fit that did not see it.")
    exact = [r for r in rows if r["source"].startswith(EXACT_REQUEST_SOURCES)]
    ok = sum(abs(r["error"]) <= 2 or abs(r["error"]) <= 0.01 * r["recorded"] for r in exact)
    print(f"\ntarget  OpenAI calls with the exact request logged within ±2 tokens (±1% with tools): "
          f"{ok}/{len(exact)} calls")
    claude = {r["source"] for r in rows if r["tokenizer"] == "claude"}
    parts = [f"{t['source']} {t['median_pct']:.2f}% ({t['calls']} calls)" for t in table
             if t["source"] in claude and t["kind"] == "calibrated" and t.get("calls")]
    print("target  Claude calibrated median error <= 3%: " + "; ".join(parts))
    # Claude calls whose log holds the whole request (the cassettes' bodies, OpenHands' messages
    # and tools): the counting model alone, no calibration
    whole = [r for r in rows if r["tokenizer"] == "claude" and r["source"].startswith(CLAUDE_WHOLE_REQUEST)]
    for label, want, limit in (("with tools", True, 5.0), ("without tools", False, 3.0)):
        pct = sorted(100 * abs(r["error"]) / r["recorded"] for r in whole
                     if bool(r.get("n_tools")) == want and r["recorded"])
        med = statistics.median(pct) if pct else None
        print(f"target  Claude uncalibrated median error {label} <= {limit:g}% (exact request logged): "
              + (f"{med:.2f}% ({len(pct)} calls)" if pct else "no calls"))


def replay_rows(store: Store) -> list[dict]:
    """The recorded replay's window against the recorded prompt, per source: what ``ctxf replay``
    shows (the log's own compactions and history edits, an agent's own policy where the log records
    no edit, the plausible calibration held out), where the table above rebuilds each call's
    context alone. ``within`` counts calls within 25% (issue 30: at least 90% on Cline logs)."""
    from context_forensics.analysis.replay import replay_session

    by: dict[str, list[float]] = defaultdict(list)
    for ses in store.sessions():
        if not ses["usage_count"]:
            continue
        rep = replay_session(store, ses["id"], policy="recorded", use_cache=False)
        label = source_label(ses)
        for st in rep.steps:
            rec = st.get("recorded_prompt_tokens")
            if rec:
                by[label].append(abs(st["window_tokens"] - rec) / rec)
    return [{"source": k, "calls": len(v), "median_pct": 100 * statistics.median(v),
             "p95_pct": 100 * sorted(v)[min(len(v) - 1, int(0.95 * len(v)))],
             "within_25": sum(e <= 0.25 for e in v)} for k, v in sorted(by.items())]


def print_replayed(rows: list[dict]) -> None:
    print("\nrecorded replay (what ctxf replay shows): window vs recorded prompt per call")
    print(f"{'source':44} {'calls':>6} {'med %':>7} {'p95 %':>7} {'within 25%':>11}")
    for r in rows:
        print(f"{r['source'][:44]:44} {r['calls']:6d} {r['median_pct']:6.2f}% {r['p95_pct']:6.2f}% "
              f"{r['within_25']:5d} ({100 * r['within_25'] / r['calls']:.0f}%)")


def compaction_checks(store: Store, preset_for=None) -> list:
    """Every recorded compaction beside its preset's simulation (compaction_fidelity)."""
    from context_forensics.analysis.replay.compaction_fidelity import compaction_fidelity

    return compaction_fidelity(store, preset_for=preset_for)


def print_compactions(checks: list, title: str = "") -> None:
    """The second table: a row per recorded compaction, then the statistics over the automatic ones."""
    from context_forensics.analysis.replay.compaction_fidelity import fidelity_summary

    print("\ncompaction fidelity" + (f" ({title})" if title else "") + ": per recorded compaction, the "
          "matching auto_compaction preset run from the recorded window after the previous one")
    head = (f"{'agent':12} {'version':9} {'session':12} {'kind':11} {'trigger':12} {'preset':16} {'rec step':>8} "
            f"{'sim step':>8} {'err':>5} {'tokens before rec':>18} {'sim':>9}  basis")
    print(head)
    print("-" * len(head))
    for c in checks:
        r = c.recorded
        rec_tok = "-" if r.tokens_before is None else f"{r.tokens_before:,} ({r.tokens_source})"
        sim_tok = "-" if c.simulated_tokens_before is None else f"{c.simulated_tokens_before:,}"
        err = "-" if c.step_error is None else f"{c.step_error:+d}"
        trig = r.trigger if r.trigger in ("auto", "manual") else ("inferred auto" if c.automatic else "excluded")
        print(f"{r.agent:12} {(r.version or '-'):9} {r.session_id:12} {r.kind:11} {trig:12} {c.preset:16} "
              f"{r.step:>8} {('never' if c.simulated_step is None else c.simulated_step):>8} {err:>5} "
              f"{rec_tok:>18} {sim_tok:>9}  {c.simulated_basis or '-'}")
    for c in checks:
        if not c.automatic:
            print(f"  excluded {c.recorded.session_id} step {c.recorded.step}: {c.why}")
    picked = sorted({(c.preset, c.preset_why) for c in checks})
    for name, why in picked:
        print(f"  preset {name}: {why}")
    sm = fidelity_summary(checks)
    if sm["automatic"]:
        print(f"  automatic: {sm['automatic']} of {sm['recorded']}; median step error {sm['median_step_error']}, "
              f"max |error| {sm['max_abs_step_error']}, within ±2: {sm['within_2']}, never fired: "
              f"{sm['never_fired']}; median tokens-before error {sm['median_tokens_error']}")
    print("  (target: median step error 0, none off by more than 2)")


def copilot_context(store: Store) -> list[dict]:
    """Copilot CLI records no prompt size per call: each reply's outputTokens only, and at
    shutdown the CLI's own count of its context (system / conversation / tool definitions) and
    per-model sums over the session's requests. What can be compared: our count of the system
    prompt and of the conversation against the shutdown's split, and the sum of our count of
    every call's context (plus the shutdown's tool-definitions figure per call: the tool schemas
    are not in the log) against the recorded inputTokens sum. Computed tokens are the session
    model's tokenizer without calibration (nothing per call to calibrate on)."""
    from context_forensics.config.models import session_spec
    from context_forensics.records import MARKER_KINDS
    from context_forensics.tokens.fidelity import count_session, session_model

    out = []
    for ses in store.sessions(fmt="copilot_cli"):
        sd = (ses.get("metadata") or {}).get("shutdown") or {}
        split = sd.get("context_at_shutdown") or {}
        if not split.get("total"):
            continue
        stored = store.messages(ses["id"])
        msgs = [s.message for s in stored]
        spec = session_spec(session_model(ses, msgs), None)
        counts = count_session(stored, spec, store=store, calibrate=False)
        tok = [int(t) for t in counts.computed.tokens]
        live = [m.kind not in MARKER_KINDS for m in msgs]  # the corpus sessions have no edits
        system = sum(t for m, t, ok in zip(msgs, tok, live) if ok and m.role in ("system", "developer"))
        conversation = sum(t for m, t, ok in zip(msgs, tok, live) if ok and m.role not in ("system", "developer"))
        row = {"session": ses["id"], "model": ses.get("model"), "tokenizer": spec.tokenizer, "kind": counts.kind,
               "system": (system, split.get("system")), "conversation": (conversation, split.get("conversation"))}
        metrics = sd.get("model_metrics") or {}
        steps = counts.steps
        requests = sum((v.get("requests") or {}).get("count") or 0 for v in metrics.values())
        if requests == len(steps) and split.get("tool_definitions") is not None:
            computed = sum(s.computed for s in steps) + len(steps) * split["tool_definitions"]
            recorded = sum((v.get("usage") or {}).get("inputTokens") or 0 for v in metrics.values())
            row["calls"] = len(steps)
            row["input_sum"] = (computed, recorded)
        out.append(row)
    return out


def aider_rounded(store: Store) -> list[dict]:
    """Aider records usage only rounded (``> Tokens: 3.2k sent`` in the chat history: ±0.05k
    below 10k, ±0.5k above), and the exact prompts in the LLM history beside it. Per run, the
    answered calls of the LLM history (in order) are paired with the chat history's Tokens lines
    (in order) when their numbers agree, and our count of each call's exact prompt (no
    calibration) is set beside the rounded "sent" figure. A run that switched models (/model)
    counts each call with the tokenizer of the model the chat history names for it."""
    from context_forensics.config.models import session_spec
    from context_forensics.tokens.fidelity import count_session, session_model

    chats: dict[tuple[str, str], list] = {}
    models: dict[tuple[str, str], list] = {}
    for ses in store.sessions(fmt="aider_chat"):
        key = (str(Path(ses["source"]).parent), ses.get("started_at") or "")
        marked = [m.message for m in store.messages(ses["id"]) if "usage_rounded" in m.message.meta]
        chats[key] = [m.meta["usage_rounded"] for m in marked]
        models[key] = [m.model for m in marked]
    out = []
    for ses in store.sessions(fmt="aider"):
        md = ses.get("metadata") or {}
        key = (str(Path(ses["source"]).parent), md.get("run_started_at") or "")
        rounded = chats.get(key)
        stored = store.messages(ses["id"])
        msgs = [s.message for s in stored]
        answered = [i for i, m in enumerate(msgs) if "call_index" in m.meta and not m.meta.get("no_response")]
        if not rounded or len(rounded) != len(answered):
            continue
        counted: dict[str, tuple] = {}  # per model the run used: (spec, kind, steps by seq)
        for i, u, model in zip(answered, rounded, models[key]):
            model = model or session_model(ses, msgs)
            if model not in counted:
                spec = session_spec(model, None)
                counts = count_session(stored, spec, store=store, calibrate=False)
                counted[model] = (spec, counts.kind, {st.seq: st for st in counts.steps})
            if "cl100k" not in counted:  # what litellm falls back to for a model it has no tokenizer for
                counts = count_session(stored, session_spec("gpt-4", None), store=store, calibrate=False)
                counted["cl100k"] = (None, counts.kind, {st.seq: st for st in counts.steps})
            spec, kind, by_seq = counted[model]
            st, cl = by_seq.get(i), counted["cl100k"][2].get(i)
            if st is None:
                continue
            out.append({"session": ses["id"], "file": Path(ses["source"]).name, "model": model,
                        "tokenizer": spec.tokenizer, "kind": kind, "computed": st.computed,
                        "cl100k_openai": cl.computed if cl is not None else None,
                        "recorded_rounded": u["prompt_tokens"], "rounding": u["prompt_tokens_error"]})
    return out


def print_aider(rows: list[dict]) -> None:
    if not rows:
        return
    import statistics

    print("\nAider: usage is recorded rounded (chat history 'Tokens: 3.2k sent': ±0.05k below 10k, ±0.5k")
    print("above); each answered call's exact prompt (LLM history) counted with its model's tokenizer; beside it")
    print("cl100k_base with OpenAI's framing (litellm's count for a model it has no tokenizer for: a match there")
    print("suggests the figure is Aider's own count, not the provider's usage)")
    by: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        by[(r["file"], r["model"], r["tokenizer"], r["kind"])].append(r)
    for (file, model, tok, kind), rs in by.items():
        errs = [100 * (r["computed"] - r["recorded_rounded"]) / r["recorded_rounded"] for r in rs]
        inside = sum(abs(r["computed"] - r["recorded_rounded"]) <= r["rounding"] for r in rs)
        cl = sum(r["cl100k_openai"] is not None and abs(r["cl100k_openai"] - r["recorded_rounded"]) <= r["rounding"]
                 for r in rs)
        print(f"  {file} {model} [{tok}, {kind}]: {len(rs)} calls, computed vs rounded recorded median "
              f"{statistics.median(errs):+.1f}% (min {min(errs):+.1f}%, max {max(errs):+.1f}%), "
              f"{inside} within the rounding; cl100k_base+OpenAI framing: {cl} within it")


def print_copilot(rows: list[dict]) -> None:
    if not rows:
        return
    print("\nCopilot CLI: no prompt size per call is recorded (outputTokens per reply only), so no row above;")
    print("compared instead: the shutdown's context split (the CLI's own count) and the sum of every call's")
    print("input (modelMetrics inputTokens) against ours (+ the shutdown's tool-definitions figure per call)")
    for r in rows:
        parts = []
        for key in ("system", "conversation", "input_sum"):
            if key in r:
                ours, theirs = r[key]
                pct = f"{100 * (ours - theirs) / theirs:+.1f}%" if theirs else "-"
                parts.append(f"{key} {ours:,} vs {theirs:,} ({pct})")
        calls = f", {r['calls']} calls" if "calls" in r else ""
        print(f"  {r['model']} [{r['tokenizer']}, {r['kind']}{calls}]: " + "; ".join(parts))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_option(ap)
    ap.add_argument("--json", action="store_true", help="JSON lines per call, then the summary")
    ap.add_argument("--sessions", action="store_true", help="also a line per session")
    args = ap.parse_args(argv)
    if not args.corpus.exists():
        print(f"error: corpus not found: {args.corpus}", file=sys.stderr)
        return 1
    return run(args.corpus, as_json=args.json, per_session=args.sessions)


if __name__ == "__main__":
    sys.exit(main())
