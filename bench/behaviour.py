"""Behaviour snapshot: the `--json` of every analysis over the corpus and sample_logs/.

    python bench/behaviour.py record snapshot/      # write one JSON file per command and session
    python bench/behaviour.py check snapshot/       # run again, compare byte for byte

A refactor must not move behaviour: record before it, check after. Per session (every session
of ../shared/corpus and sample_logs/): `replay --json` (the log's ground truth), `replay --model
gemma-7b --json` (a small-window what-if, so evictions happen), `drift --json`, `facts --json`
with the session's own suggested facts (`facts suggest --json`, at most 3), and
`show --json`; over the store: `sessions --json`, `diverge --all-tasks --json`, one `diverge
A B --json` per task pair and `audit --json`. Commands run in-process through the CLI (typer's
CliRunner), against a fresh store in a temporary folder; the embedding cache of the first run
is reused by `check` only through the store it builds itself, so both runs compute everything.
Output names are ``<command>__<session>.json`` holding the exit code and the parsed stdout, in
which wall-clock figures (keys ending in ``seconds``) are masked; `check` lists every file that
differs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from typer.testing import CliRunner

from _common import SAMPLES, add_corpus_option  # first: puts this checkout's package on sys.path

from context_forensics.cli import app


def _listing(value, key: str) -> list:
    """A listing command's rows: ``{"version": 1, key: [...]}``, or a bare list (a checkout before
    every JSON document carried a version)."""
    return value[key] if isinstance(value, dict) else value

def _scrub(value):
    """Wall-clock figures (``…seconds``) are the only part of a report allowed to move."""
    if isinstance(value, dict):
        return {k: ("<seconds>" if k.endswith("seconds") else _scrub(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _run(db: Path, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(app, [*args, "--db", str(db)], env={"COLUMNS": "120", "NO_COLOR": "1"})
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout


def snapshot(out: Path, corpus: Path, quick: bool = False) -> int:
    """Write every snapshot file into ``out``; return how many."""
    out.mkdir(parents=True, exist_ok=True)
    written = 0

    def put(name: str, code: int, text: str) -> None:
        nonlocal written
        try:
            body = _scrub(json.loads(text))
        except ValueError:
            body = text
        (out / f"{name}.json").write_text(json.dumps({"exit_code": code, "stdout": body}, indent=1) + "\n")
        written += 1

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "store.db"
        roots = [SAMPLES] + ([] if quick or not corpus.exists() else [corpus])
        code, _ = _run(db, "ingest", *map(str, roots), "--recursive", "--json")
        code, text = _run(db, "sessions", "--json")
        put("sessions", code, text)
        sessions = _listing(json.loads(text), "sessions")
        for i, s in enumerate(sessions):
            sid = s["id"]
            for name, args in (("show", ["show", sid, "--json"]),
                               ("replay", ["replay", sid, "--json"]),
                               ("replay-gemma-7b", ["replay", sid, "--model", "gemma-7b", "--json"]),
                               ("drift", ["drift", sid, "--json"])):
                put(f"{name}__{sid}", *_run(db, *args))
            code, text = _run(db, "facts", "suggest", sid, "--json", "--limit", "3")
            put(f"facts-suggest__{sid}", code, text)
            facts = [f["text"] for f in _listing(json.loads(text), "suggestions")] if code == 0 else []
            if facts:
                put(f"facts__{sid}", *_run(db, "facts", sid, *[a for f in facts for a in ("--fact", f)], "--json"))
            print(f"\r{i + 1}/{len(sessions)} sessions", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        code, text = _run(db, "diverge", "--all-tasks", "--json")
        put("diverge-all-tasks", code, text)
        for pair in json.loads(text).get("pairs", []) if code == 0 else []:
            if pair.get("a") and pair.get("b"):
                put(f"diverge__{pair['a']}__{pair['b']}", *_run(db, "diverge", pair["a"], pair["b"], "--json"))
        put("audit", *_run(db, "audit", "--json"))
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("record", "check"))
    ap.add_argument("folder", type=Path)
    add_corpus_option(ap)
    ap.add_argument("--quick", action="store_true", help="sample_logs/ only")
    a = ap.parse_args()
    t0 = time.perf_counter()
    if a.mode == "record":
        n = snapshot(a.folder, a.corpus, a.quick)
        print(f"recorded {n} files in {a.folder} ({time.perf_counter() - t0:.0f} s)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        now = Path(tmp)
        n = snapshot(now, a.corpus, a.quick)
        before = {p.name for p in a.folder.glob("*.json")}
        after = {p.name for p in now.glob("*.json")}
        differ = sorted(n for n in before & after if (a.folder / n).read_bytes() != (now / n).read_bytes())
        missing, extra = sorted(before - after), sorted(after - before)
        print(f"{n} files compared in {time.perf_counter() - t0:.0f} s: {len(differ)} differ, "
              f"{len(missing)} missing, {len(extra)} new")
        for name in differ[:50]:
            print(f"  differs  {name}")
        for name in missing[:20]:
            print(f"  missing  {name}")
        for name in extra[:20]:
            print(f"  new      {name}")
        sys.exit(1 if differ or missing or extra else 0)


if __name__ == "__main__":
    main()
