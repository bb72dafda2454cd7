"""Ingest throughput and peak memory: the real corpus, and a generated large JSONL.

    python bench/ingest.py                 # corpus + a generated ~1 GB Claude Code JSONL
    python bench/ingest.py --size-mb 100   # a smaller generated file
    python bench/ingest.py --corpus PATH   # another corpus folder
    python bench/ingest.py --files 20      # also the generated data as 20 files

Each measurement runs `ctxf ingest` in a fresh child process against a fresh store, so the
peak RSS is that of one ingest (ru_maxrss of the child), not of this script.
Targets (issues 2 and 11): >= 20,000 messages/s, peak RSS < 300 MB. The table also gives the
child's CPU time and the load average (the machine may be shared: a loaded run shows in both),
and what `PRAGMA quick_check` and `integrity_check` cost on the store just written (ctxf runs
quick_check once before it first writes data into a store).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _common import ROOT, add_corpus_option, print_table  # first: puts this checkout's package on sys.path

_CHILD = """
import json, os, resource, sqlite3, sys, time
from context_forensics.store.db import Store
from context_forensics.store.ingest import ingest_paths
u0 = resource.getrusage(resource.RUSAGE_SELF)
t = time.perf_counter()
with Store.open(sys.argv[1]) as store:
    report = ingest_paths(store, sys.argv[2:], recursive=True)
elapsed = time.perf_counter() - t
use = resource.getrusage(resource.RUSAGE_SELF)
cpu = use.ru_utime + use.ru_stime - u0.ru_utime - u0.ru_stime
tot = report.totals()
checks = {}
conn = sqlite3.connect(sys.argv[1])
for pragma in ("quick_check", "integrity_check"):  # what opening for a write costs (page cache hot)
    t = time.perf_counter()
    ok = conn.execute(f"PRAGMA {pragma}").fetchall() == [("ok",)]
    checks[pragma] = time.perf_counter() - t if ok else None
conn.close()
print(json.dumps({"elapsed": elapsed, "cpu": cpu, "totals": tot,
                  "rss_mb": use.ru_maxrss / 1024, "store_mb": os.path.getsize(sys.argv[1]) / 1e6, **checks}))
"""


def measure(paths: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as d:
        load = os.getloadavg()[0]
        out = subprocess.run(  # the child imports this checkout's package, as this script does
            [sys.executable, "-c", _CHILD, str(Path(d) / "bench.db"), *paths],
            check=True, capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))},
        )
        size = sum(_size(Path(p)) for p in paths)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    data["bytes"] = size
    data["load"] = (load + os.getloadavg()[0]) / 2
    return data


def _size(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def generate_claude_code(path: Path, target_bytes: int, seed: int = 1) -> int:
    """A linear Claude Code session: prompt, assistant text + tool_use, tool_result, ..."""
    rng = random.Random(seed)
    sid = str(uuid.UUID(int=rng.getrandbits(128)))
    words = ("context window token eviction compaction summary tool result assistant user "
             "function argument budget constraint pipeline replay fact drift divergence").split()
    parent = None
    n = 0
    written = 0
    with open(path, "w") as f:
        while written < target_bytes:
            n += 1
            base = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/repo",
                    "sessionId": sid, "version": "2.1.39", "gitBranch": "main",
                    "timestamp": f"2026-01-01T00:{(n // 60) % 60:02d}:{n % 60:02d}.000Z"}
            if n % 3 == 1:
                text = " ".join(rng.choice(words) for _ in range(rng.randint(10, 60)))
                rec = {**base, "type": "user", "message": {"role": "user", "content": text}}
            elif n % 3 == 2:
                rec = {**base, "type": "assistant", "requestId": f"req_{n}",
                       "message": {"model": "claude-opus-4-6", "id": f"msg_{n}", "type": "message",
                                   "role": "assistant",
                                   "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "Bash",
                                                "input": {"command": f"grep -rn {rng.choice(words)} ."}}],
                                   "usage": {"input_tokens": 3, "cache_creation_input_tokens": 100 + n,
                                             "cache_read_input_tokens": 1000 + 10 * n, "output_tokens": 40}}}
            else:
                out = "\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(rng.randint(5, 40)))
                rec = {**base, "type": "user",
                       "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n - 1}",
                                                                "content": out}]}}
            rec["uuid"] = str(uuid.UUID(int=rng.getrandbits(128)))
            parent = rec["uuid"]
            line = json.dumps(rec) + "\n"
            f.write(line)
            written += len(line)
    return n


def row(name: str, r: dict) -> list[str]:
    t = r["totals"]
    msgs = t["messages"]

    def secs(key: str) -> str:
        return "failed" if r.get(key) is None else f"{r[key]:.2f}"

    return [name, f"{r['bytes'] / 1e6:,.1f}", str(t["files"]), str(t["sessions"]), f"{msgs:,}",
            f"{r['elapsed']:.2f}", f"{r['cpu']:.2f}", f"{msgs / r['elapsed']:,.0f}",
            f"{r['bytes'] / 1e6 / r['elapsed']:.1f}", f"{r['rss_mb']:.0f}", f"{r['store_mb']:,.0f}",
            secs("quick_check"), secs("integrity_check"), f"{r['load']:.1f}"]


def split(path: Path, parts: int) -> list[str]:
    """The generated session as ``parts`` files of whole records (each its own session)."""
    lines = path.read_text().splitlines(keepends=True)
    step = -(-len(lines) // parts)
    out = []
    for i in range(parts):
        p = path.with_name(f"{path.stem}.part{i}.jsonl")
        chunk = lines[i * step:(i + 1) * step]
        # another session id per part: each file is a session of its own
        p.write_text("".join(chunk).replace('"sessionId": "', f'"sessionId": "{i:02d}'))
        out.append(str(p))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_option(ap)
    ap.add_argument("--size-mb", type=float, default=1000.0, help="size of the generated JSONL")
    ap.add_argument("--skip-generated", action="store_true")
    ap.add_argument("--cache", help="keep the generated JSONL at this path and reuse it when present")
    ap.add_argument("--files", type=int, default=1,
                    help="also ingest the generated data split into this many files (one session each)")
    args = ap.parse_args()

    rows = []
    if args.corpus.exists():
        rows.append(row("corpus (all formats)", measure([str(args.corpus)])))
    else:
        print(f"corpus not found at {args.corpus}; skipped", file=sys.stderr)
    if not args.skip_generated:
        with tempfile.TemporaryDirectory() as d:
            p = Path(args.cache) if args.cache else Path(d) / "generated.jsonl"
            if not (args.cache and p.exists()):
                t = time.perf_counter()
                records = generate_claude_code(p, int(args.size_mb * 1e6))
                print(f"generated {p.stat().st_size / 1e6:,.0f} MB ({records:,} records) in "
                      f"{time.perf_counter() - t:.0f} s", file=sys.stderr)
            rows.append(row("generated Claude Code JSONL", measure([str(p)])))
            if args.files > 1:
                with tempfile.TemporaryDirectory() as parts_dir:
                    copy = Path(parts_dir) / p.name
                    copy.symlink_to(p.resolve())
                    rows.append(row(f"the same in {args.files} files", measure(split(copy, args.files))))

    header = ["input", "MB", "files", "sessions", "messages", "seconds", "CPU s", "msg/s", "MB/s",
              "peak RSS MB", "store MB", "quick_check s", "integrity_check s", "load"]
    print_table(header, rows)
    print("\nseconds: wall time of the ingest, from opening the store to closing it (checkpoint "
          "included); CPU s: the child's user + system time; quick_check / integrity_check: on the "
          "store just written (page cache hot); load: the 1-minute load average around the run "
          f"({os.cpu_count()} CPUs).")


if __name__ == "__main__":
    main()
