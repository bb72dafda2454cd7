"""Crash safety of ingest: kill -9 an ingest at a random moment, then check the store.

    python bench/sigkill.py                 # 50 trials over ~50 MB of generated logs
    python bench/sigkill.py --trials 200 --size-mb 100

Each trial starts `ingest` of the same files into a fresh store in a child process and sends
it SIGKILL at a uniformly random moment of 1.25 times a clean ingest's duration (measured first;
counted from when the child has opened the store), so that some kills land on the last commit,
the final checkpoint or the close. Then, on the killed store:

- `PRAGMA integrity_check` is ok;
- no partial file: the store holds exactly what a clean ingest stores for the files it has a
  record of (sessions, messages, file records; timestamps aside), and nothing else;
- recovery: ingesting the same files again gives exactly the clean ingest's store.

Background checkpoints run at their default threshold, so kills also land mid-checkpoint. The
comparisons are those of tests/test_store_concurrency.py (tests/store_checks.py), which runs a
few such trials in the suite.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, print_table  # first: puts this checkout's package on sys.path

sys.path.insert(0, str(ROOT / "tests"))
from context_forensics.store.db import Store  # noqa: E402
from context_forensics.store.ingest import ingest_paths  # noqa: E402
from store_checks import content, integrity, restricted, write_claude_code, write_sharegpt  # noqa: E402

_CHILD = """
import sys
from context_forensics.store.db import Store
from context_forensics.store.ingest import ingest_paths
with Store.open(sys.argv[1]) as store:
    print("open", flush=True)
    ingest_paths(store, sys.argv[2:])
"""


def make_logs(folder: Path, size_mb: float) -> list[str]:
    """Four Claude Code sessions sharing ``size_mb`` and eight small ShareGPT files."""
    records = max(300, int(size_mb * 1e6 / 4 / 1000))  # about 1 KB a record
    for i in range(4):
        write_claude_code(folder / f"cc{i}.jsonl", records=records, seed=i)
    for i in range(8):
        write_sharegpt(folder / f"c{i}.json", n_sessions=1 + i % 3, seed=i)
    return sorted(str(p) for p in folder.iterdir())


def killed_ingest(db: Path, files: list[str], delay: float) -> None:
    import signal
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    p = subprocess.Popen([sys.executable, "-c", _CHILD, str(db), *files], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, env=env)
    assert p.stdout is not None and p.stdout.readline().strip() == "open"
    time.sleep(delay)
    p.send_signal(signal.SIGKILL)
    p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--size-mb", type=float, default=50.0, help="generated logs in all")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "logs").mkdir()
        files = make_logs(tmp / "logs", args.size_mb)
        size = sum(Path(f).stat().st_size for f in files)
        t = time.perf_counter()
        with Store.open(tmp / "clean.db") as store:
            assert ingest_paths(store, files).exit_code == 0
        took = time.perf_counter() - t
        clean = content(tmp / "clean.db")
        print(f"{len(files)} files, {size / 1e6:,.1f} MB; clean ingest {took:.2f} s; load {os.getloadavg()[0]:.2f}",
              file=sys.stderr)
        tally = {"trials": 0, "mid-ingest": 0, "integrity ok": 0, "no partial file": 0, "recovered": 0}
        recorded_counts: list[int] = []
        for trial in range(args.trials):
            db = tmp / f"k{trial}.db"
            killed_ingest(db, files, rng.uniform(0, 1.25 * took))  # some land on the final checkpoint
            tally["trials"] += 1
            tally["integrity ok"] += integrity(db) == ["ok"]
            killed = content(db)
            recorded = {f[0] for f in killed["files"]}
            recorded_counts.append(len(recorded))
            tally["mid-ingest"] += len(recorded) < len(files)
            tally["no partial file"] += killed == restricted(clean, recorded)
            with Store.open(db) as store:
                ingest_paths(store, files)
            tally["recovered"] += content(db) == clean
            for p in tmp.glob(f"k{trial}.db*"):
                p.unlink()
            print(f"\rtrial {trial + 1}/{args.trials}", end="", file=sys.stderr)
        print(file=sys.stderr)
    print_table(list(tally), [[str(v) for v in tally.values()]], left=0)
    hist = {n: recorded_counts.count(n) for n in sorted(set(recorded_counts))}
    print("\nfiles recorded when killed (of %d): " % len(files)
          + ", ".join(f"{n}: {c} trial(s)" for n, c in hist.items()))


if __name__ == "__main__":
    main()
