"""What the benchmark scripts share: where things are, the import path, the ``--corpus`` option,
best-of-N timing, and printing an aligned table.

Each script is run as ``python bench/NAME.py`` from anywhere; importing this module first puts
this checkout's package ahead of any installed copy, so a benchmark measures the code beside it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]  # the repository
CORPUS = ROOT.parent / "shared" / "corpus"  # the real logs, beside the checkout
SAMPLES = ROOT / "sample_logs"
FIXTURES = ROOT / "tests" / "fixtures"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

T = TypeVar("T")


def add_corpus_option(ap: argparse.ArgumentParser, help: str = "the corpus folder") -> None:
    """``--corpus PATH`` (a ``Path``), by default ``../shared/corpus``."""
    ap.add_argument("--corpus", type=Path, default=CORPUS, help=f"{help} (default: {CORPUS})")


def best(fn: Callable[[], T], repeat: int = 3) -> tuple[float, T]:
    """The fastest of ``repeat`` runs of ``fn`` in seconds, and the last run's result."""
    times: list[float] = []
    out: T
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def print_table(head: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1) -> None:
    """An aligned table on stdout: each column as wide as its widest cell, two spaces apart, a
    rule under the header. The first ``left`` columns (names) are left-aligned, the others
    (figures) right-aligned, their headers with them."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(head)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    print(line(head))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
