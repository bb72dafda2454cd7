"""Ingest time against input size: each format grown to 1x, 2x, 4x and 8x, with the ratio per
doubling measured in the same run (reading that stays linear in the input gives ~2).

    python bench/ingest_scaling.py                  # every format below, 8x up to ~5 MB
    python bench/ingest_scaling.py --format cline   # one format (repeatable)
    python bench/ingest_scaling.py --scale 4        # 4x the base size (inputs up to ~20 MB)

Issue 31's fuzzer found a 5.5 MB trajectory that took 28 s and Cline folders of 0.5-1.6 MB
that took 5-8 s. Each row here is one input built from a real log of the corpus (its records
repeated, ids made unique per copy and chained so the copies are one conversation), or, for
the shapes the fuzzer found slow, from a generator (Cline calls whose deleted ranges grow,
Roo condense summaries). Time is the CPU time of ``ingest_paths`` into a fresh store in this
process (what a busy machine does to wall time does not count), best of ``--repeat``; the
first ingest of the run, which imports the importers, is not measured.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from _common import CORPUS, print_table  # first: puts this checkout's package on sys.path

from context_forensics.store.db import Store
from context_forensics.store.ingest import ingest_paths

ID_KEYS = {"uuid", "parentUuid", "logicalParentUuid", "id", "parentId", "leafUuid", "sessionId"}


# ---------------------------------------------------------------- growing a corpus file

def _largest_list(doc: Any) -> list[Any] | None:
    """The list of ``doc`` with the most JSON text (the records of a log)."""
    best: tuple[int, list[Any] | None] = (0, None)

    def walk(v: Any) -> None:
        nonlocal best
        if isinstance(v, list):
            size = len(json.dumps(v))
            if size > best[0]:
                best = (size, v)
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(doc)
    return best[1]


def grow_json(src: Path, k: int, dest: Path) -> Path:
    """A JSON log whose largest list holds its records ``k`` times."""
    doc = json.loads(src.read_bytes())
    records = _largest_list(doc)
    if records is not None:
        records[:] = [copy.deepcopy(r) for _ in range(k) for r in records]
    out = dest / src.name
    out.write_text(json.dumps(doc, separators=(",", ":")))
    return out


def _suffixed(v: Any, tag: str) -> Any:
    """``v`` with every id (``ID_KEYS``) suffixed by ``tag``, so a copy's records are new records."""
    if isinstance(v, dict):
        return {key: (f"{x}{tag}" if key in ID_KEYS and isinstance(x,
                                                                   str) and key != "sessionId" else _suffixed(x, tag))
                for key, x in v.items()}
    if isinstance(v, list):
        return [_suffixed(x, tag) for x in v]
    return v


def grow_jsonl(src: Path, k: int, dest: Path) -> Path:
    """A JSONL log of its records ``k`` times: ids made unique per copy, and each copy's first
    record chained to the last record of the copy before (``parentUuid`` / ``parentId``), so the
    copies are one conversation of k times the length, not k branches."""
    lines = []
    for x in src.read_text().split("\n"):
        try:
            lines.append(json.loads(x))
        except ValueError:  # a blank or broken line (the corpus' Pi session has one): left out
            continue
    head = [r for r in lines[:1] if r.get("type") in ("session", "session_meta")]  # a header, once
    body = lines[len(head):]
    out: list[Any] = list(head)
    last: str | None = None
    for c in range(k):
        copy_ = [_suffixed(r, f"-{c}" if c else "") for r in body]
        roots = [(r, parent) for r in copy_ for parent, own in (("parentUuid", "uuid"), ("parentId", "id"))
                 if own in r and parent in r and r[parent] is None]
        if roots and last is not None:
            roots[0][0][roots[0][1]] = last  # the copy's first record continues the copy before
        for r in reversed(copy_):
            own = r.get("uuid") or r.get("id")
            if isinstance(own, str):
                last = own
                break
        out += copy_
    path = dest / src.name
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in out))
    return path


def grow_folder(src: Path, k: int, dest: Path) -> Path:
    """A task folder whose JSON lists (Cline's ui_messages.json and api_conversation_history.json)
    hold their entries ``k`` times."""
    out = dest / src.name
    shutil.copytree(src, out)
    for f in out.glob("*.json"):
        doc = json.loads(f.read_bytes())
        if isinstance(doc, list):
            f.write_text(json.dumps([copy.deepcopy(r) for _ in range(k) for r in doc]))
    return out


# ---------------------------------------------------------------- generated shapes

def cline_growing_ranges(n: int, dest: Path) -> Path:
    """A Cline 3.x task folder of ``n`` calls, each after the third made with a deleted range one
    round longer than the last ([2, 2k - 3]): what a task that overflows at every call records
    (issue 31's Cline folders that took 5-8 s)."""
    folder = dest / "task"
    folder.mkdir()
    ui: list[dict[str, Any]] = [{"ts": 1000, "type": "say", "say": "task", "text": "do it"}]
    api: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "<task>do it</task>"}]}]
    for k in range(n):
        request = f"[read_file for 'src/module_{k}.py'] Result:\n\n" + f"line {k} of the file\n" * 8
        entry: dict[str, Any] = {"ts": 2000 + 2 * k, "type": "say", "say": "api_req_started",
                                 "text": json.dumps({"request": request, "tokensIn": 1000 + k, "tokensOut": 50}),
                                 "conversationHistoryIndex": 2 * k - 1 if k else -1}
        if k > 2:
            entry["conversationHistoryDeletedRange"] = [2, 2 * k - 3]
        ui += [entry, {"ts": 2001 + 2 * k, "type": "say", "say": "text", "text": f"Reading module {k} next."}]
        if k:
            api.append({"role": "user", "content": [{"type": "text", "text": request}]})
        api.append({"role": "assistant", "content": [{"type": "text", "text": f"Reading module {k} next."}]})
    (folder / "ui_messages.json").write_text(json.dumps(ui))
    (folder / "api_conversation_history.json").write_text(json.dumps(api))
    return folder


def roo_condenses(n: int, dest: Path) -> Path:
    """A Roo-Code 3.2x task folder of ``n`` rounds, each a question and answer that a condense
    summary then replaced (``condenseParent`` / ``isSummary`` + ``condenseId``, ``ts`` on each)."""
    folder = dest / "tasks" / "t1"
    folder.mkdir(parents=True)
    api: list[dict[str, Any]] = []
    ui: list[dict[str, Any]] = [{"ts": 1, "type": "say", "say": "text", "text": "task"}]
    for k in range(n):
        cid = f"c{k}"
        api += [{"role": "user", "content": [{"type": "text", "text": f"question {k}"}], "ts": 10 * k,
                 "condenseParent": cid},
                {"role": "assistant", "content": [{"type": "text", "text": f"answer {k}"}], "ts": 10 * k + 1,
                 "condenseParent": cid},
                {"role": "assistant", "content": [{"type": "text", "text": f"summary of round {k}"}],
                 "ts": 10 * k + 2, "isSummary": True, "condenseId": cid}]
        ui += [{"ts": 10 * k + 2, "type": "say", "say": "condense_context",
                "contextCondense": {"condenseId": cid, "prevContextTokens": 1000, "newContextTokens": 100}},
               {"ts": 10 * k + 3, "type": "say", "say": "api_req_started",
                "text": json.dumps({"apiProtocol": "anthropic", "tokensIn": 100, "tokensOut": 10})}]
    api.append({"role": "user", "content": [{"type": "text", "text": "go on"}], "ts": 10 * n})
    (folder / "api_conversation_history.json").write_text(json.dumps(api))
    (folder / "ui_messages.json").write_text(json.dumps(ui))
    return folder


# ---------------------------------------------------------------- the formats

Builder = Callable[[int, Path], Path]  # (multiple of the base size, a scratch folder) -> input


def _corpus(rel: str, grow: Callable[[Path, int, Path], Path], times: int) -> Callable[[Path], Builder | None]:
    def make(corpus: Path) -> Builder | None:
        src = corpus / rel
        return (lambda k, dest: grow(src, k * times, dest)) if src.exists() else None
    return make


def _generated(gen: Callable[[int, Path], Path], n: int) -> Callable[[Path], Builder]:
    return lambda corpus: (lambda k, dest: gen(k * n, dest))


# name -> (what it is, builder); base sizes chosen so that 8x is ~5 MB (the trajectory of the issue)
FORMATS: dict[str, tuple[str, Callable[[Path], Builder | None]]] = {
    "swe_agent": ("SWE-agent .traj (corpus pydicom-1458), history repeated",
                  _corpus("swe-agent-traj/sweagent-testdata/pydicom__pydicom-1458.traj", grow_json, 6)),
    "mini_swe_agent": ("mini-swe-agent traj.json (corpus django-11206), messages repeated",
                       _corpus("swebench-pairs/django__django-11206/mini-swe-agent_gemini-3-pro/"
                               "django__django-11206.traj.json", grow_json, 5)),
    "claude_code": ("Claude Code JSONL (corpus spotter subagent.jsonl), records chained",
                    _corpus("claude-code-jsonl/spotter/subagent.jsonl", grow_jsonl, 3)),
    "pi": ("Pi JSONL (corpus pi-mono session.jsonl), records chained",
           _corpus("pi/pi-mono/session.jsonl", grow_jsonl, 1)),
    "cline": ("Cline task folder (corpus Online-Card exported_task), entries repeated",
              _corpus("cline/Online-Card-Architecture/exported_task_1769064454592", grow_folder, 1)),
    "cline_ui_only": ("Cline ui_messages.json only (corpus Cline-Xray 94013f8), entries repeated",
                      _corpus("cline/Cline-Xray/94013f8", grow_folder, 1)),
    "cline_ranges": ("Cline folder, generated: every call with a longer deleted range",
                     _generated(cline_growing_ranges, 500)),
    "roo_condense": ("Roo folder, generated: a condense summary every round", _generated(roo_condenses, 1000)),
}


def measure(build: Builder, k: int, repeat: int) -> tuple[int, float, int]:
    """(input bytes, best CPU seconds of ``repeat`` ingests into fresh stores, messages)."""
    with tempfile.TemporaryDirectory() as d:
        src = build(k, Path(d))
        size = sum(f.stat().st_size for f in ([src] if src.is_file() else src.rglob("*")) if f.is_file())
        best, msgs = float("inf"), 0
        for r in range(repeat):
            db = Path(d) / f"store{r}.db"
            t0 = time.process_time()
            with Store.open(db) as store:
                report = ingest_paths(store, [str(src)], recursive=True)
            best = min(best, time.process_time() - t0)
            totals = report.totals()
            if totals["failed"]:
                raise SystemExit(f"{src}: ingest failed: {report.files[0].error}")
            msgs = totals["messages"]
        return size, best, msgs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--format", action="append", choices=sorted(FORMATS), help="only this format (repeatable)")
    ap.add_argument("--scale", type=int, default=1, help="multiply every size by this (default 1)")
    ap.add_argument("--repeat", type=int, default=2, help="ingests per size, the fastest counted (default 2)")
    ap.add_argument("--corpus", type=Path, default=CORPUS, help=f"the corpus folder (default: {CORPUS})")
    args = ap.parse_args()
    names = args.format or list(FORMATS)
    with tempfile.TemporaryDirectory() as d:  # import every importer before the first timing
        (Path(d) / "warm.jsonl").write_text('{"role": "user", "content": "hi"}\n')
        with Store.open(Path(d) / "warm.db") as store:
            ingest_paths(store, [str(Path(d) / "warm.jsonl")])
    rows, worst = [], 0.0
    for name in names:
        make = FORMATS[name][1]
        build = make(args.corpus)
        if build is None:
            rows.append([name, "-", "-", "-", "-", "corpus file missing"])
            continue
        prev: float | None = None
        for k in (1, 2, 4, 8):
            size, t, msgs = measure(build, k * args.scale, args.repeat)
            ratio = t / prev if prev else None
            if ratio is not None and k > 2:  # 1x -> 2x is mostly fixed cost on small inputs
                worst = max(worst, ratio)
            rows.append([name if k == 1 else "", f"{k}x", f"{size / 1e6:.2f}", f"{msgs:,}", f"{t:.3f}",
                         f"{ratio:.2f}" if ratio else ""])
            prev = t
    print_table(["format", "size", "MB", "messages", "CPU s", "x per doubling"], rows, left=2)
    print()
    for name in names:
        print(f"{name}: {FORMATS[name][0]}")
    print(f"\nlargest ratio per doubling (2x->4x, 4x->8x): {worst:.2f} (linear: ~2, quadratic: ~4)")


if __name__ == "__main__":
    main()
