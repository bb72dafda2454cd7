"""The bounded fuzz run: mutated real logs through every importer's sniff and the ingest API.

``fuzz/run.py`` is the harness (README, Development); this runs it for a fixed number of inputs
per importer with seed 0, two workers and the small-input setting, on the repo's fixtures and
samples plus the corpus when it is present, and requires that nothing escaped: no exception out
of a sniff or ``ingest``, no catch-all error in a failed file's row, no partial write, no hang
(10 s per input), no worker out of its 1.5 GB or crashed. The harness's own rules (what counts
as an escape, inputs rebuilt alike from their index) are checked first, without a worker.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from context_forensics import importers
from helpers import CORPUS

ROOT = Path(__file__).resolve().parent.parent
PER_IMPORTER = 150

sys.path.insert(0, str(ROOT))
from fuzz import engine, oracle  # noqa: E402


@pytest.mark.parametrize("error, kind", [
    ("x.jsonl: unexpected content for format codex: TypeError: unhashable type: 'dict'", "TypeError"),
    ("x.json: internal error: RecursionError: maximum recursion depth exceeded", "RecursionError"),
    ("x.json: store write failed: Error binding parameter 3: type 'list' is not supported",
     "sqlite3.Error (store write failed)"),
    ("x.json: cannot read: 'utf-8' codec can't encode character '\\ud800'", "UnicodeError (cannot read)"),
    ("x.eval: cannot read: Error -3 while decompressing data: invalid block type", "zlib.error (cannot read)"),
    ("x.eval: KeyError: 'samples'", "KeyError"),
    ("x.json: out of memory", "MemoryError"),
    # issue 31: a message naming a Python type, not the place and the field in the log's words
    ("x.json: cannot read this file as codex: its layout has an unexpected type or shape (TypeError: "
     "ToolCall.name must be a string, not NoneType)", "Python's words in the error (TypeError)"),
    ("x.json: cannot read this file as codex: its layout has an unexpected type or shape (ValueError: Exceeds "
     "the limit (4300 digits) for integer string conversion)", "Python's words in the error (ValueError)"),
    ("x.json: no record could be read: record 2: a field has an unexpected type or value (TypeError: x)",
     "Python's words in the error (TypeError)"),
    ("x.eval: internal error reading this file (RuntimeError: File 'samples/1.json' is encrypted); nothing of "
     "it was stored", "RuntimeError"),
])
def test_catch_all_errors_count_as_escapes(error, kind):
    assert oracle.classify(error) == kind


@pytest.mark.parametrize("error", [
    "x.json:3:9: malformed JSON: Expecting ',' delimiter at column 9\n  hint: the file must be valid JSON",
    "x.json:1:2: cannot read: JSON nested deeper than 200 levels",
    "x.jsonl: cannot read: [Errno 13] Permission denied: 'x.jsonl'",
    "x.json: nothing in this file could be read: 2 record(s) of unexpected shape, all skipped; the first: "
    "message 0: a tool call's name is null, not text",
    "x.db: cannot read llm logs.db: database disk image is malformed",
])
def test_ctxf_errors_are_not_escapes(error):
    assert oracle.classify(error) is None


def test_an_input_is_rebuilt_alike_from_its_index(tmp_path):
    opts = engine.Options(corpus=None, window_bytes=128 << 10, string_cap=1 << 20)
    built = []
    for attempt in ("a", "b"):  # seeds collected and containers built afresh each time
        mat, names = engine.prepare(opts, tmp_path / f"scratch-{attempt}")
        assert set(names) == set(importers.format_names())  # every importer has a seed without the corpus
        out = []
        for name in ("claude_code", "vcr_cassette", "inspect", "codex", "llm_logs", "sqlite_table"):
            for index in range(6):
                dest = tmp_path / attempt / f"{name}-{index}"
                dest.mkdir(parents=True)
                path, seed, log = engine.build_input(mat, name, index, dest)
                files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
                out.append((seed.label(), log, [(p.relative_to(dest), p.read_bytes()) for p in files]))
        built.append(out)
    assert built[0] == built[1]
    assert len({repr(b[2]) for b in built[0]}) > 20  # and they differ from each other


def test_bounded_fuzz_run_has_no_escapes(tmp_path):
    summary = tmp_path / "summary.json"
    cmd = [sys.executable, str(ROOT / "fuzz" / "run.py"), "--inputs", str(PER_IMPORTER), "--seed", "0", "--quick",
           "--jobs", "2", "--timeout", "10", "--max-hangs", "2", "--out", str(tmp_path / "out"),
           "--json", str(summary), "--corpus", str(CORPUS) if CORPUS.is_dir() else "none"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, cwd=ROOT)
    assert summary.exists(), proc.stdout[-2000:] + proc.stderr[-4000:]
    data = json.loads(summary.read_text())
    runs = data["importers"]
    assert set(runs) == set(importers.format_names())
    for name, st in runs.items():  # an importer stopped by its hangs is reported below
        assert st["inputs"] >= PER_IMPORTER or st["stopped"], (name, st)
    assert not data["harness_errors"], data["harness_errors"]  # the harness's own bugs would hide inputs
    escaping = {name: st for name, st in runs.items() if st["escaping"]}
    lines = [f"{f['importer']}: {f['type']} x{f['count']} via {f['via']} at {f['where']}"
             + (f"\n    {f['examples'][0]['message'][:200]}\n    mutations: {'; '.join(f['examples'][0]['mutations'])[:200]}"
                if f["examples"] else "")
             for f in data["findings"]]
    assert not escaping, f"{sum(st['escaping'] for st in escaping.values())} of {data['inputs']} inputs escaped " \
                         f"(rerun: .venv/bin/python fuzz/run.py --inputs {PER_IMPORTER} --quick):\n" + "\n".join(lines)
