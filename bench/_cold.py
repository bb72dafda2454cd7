"""Cold runs of ``ctxf`` as subprocesses of a checkout (issue 17's targets): wall seconds, the
child's peak RSS, its exit code and the JSON it printed.

``--checkout PATH`` lets one bench measure another tree (a ``git worktree`` of an older commit:
the "today" figures) with the same interpreter: the child gets ``PYTHONPATH=PATH`` and
``check_checkout`` makes sure ``import context_forensics`` really resolves there. Every run
starts in an empty temporary folder (no ``forensics_config.yaml`` picked up by accident) and is
given its own fresh ``--db`` by the caller, so the embedding cache is cold. Peak RSS is the
child's own ``ru_maxrss`` from ``os.wait4`` (its largest resident set, KB on Linux; Linux keeps
it across the child's execve, so it is at least this bench's own resident set at the fork,
recorded as ``parent_rss_mb``: a floor well below the figures measured), wall time
is from spawn to exit: interpreter start, imports, ingest, model load and encoding all count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT


def add_checkout_option(ap: Any) -> None:
    ap.add_argument("--checkout", type=Path, default=ROOT,
                    help=f"the tree whose ctxf is measured, run with this interpreter (default: {ROOT})")


def env_for(checkout: Path) -> dict[str, str]:
    return dict(os.environ, NO_COLOR="1", COLUMNS="120", PYTHONPATH=str(checkout.resolve()))


def check_checkout(checkout: Path) -> str:
    """The package file the children import; exits with a clear message when it is not ``checkout``'s."""
    out = subprocess.run([sys.executable, "-c", "import context_forensics; print(context_forensics.__file__)"],
                         capture_output=True, text=True, env=env_for(checkout), cwd=tempfile.gettempdir())
    got = out.stdout.strip()
    if out.returncode or not Path(got).resolve().is_relative_to(checkout.resolve()):
        sys.exit(f"--checkout {checkout}: `import context_forensics` resolves to {got or out.stderr.strip()!r}, "
                 "not inside that tree; give the root of a ctxf checkout")
    return got


def commit_of(checkout: Path) -> str:
    out = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (out.stdout.strip() or "?") + (" + uncommitted edits" if dirty else "")


def has_option(checkout: Path, command: list[str], option: str) -> bool:
    """Whether ``ctxf COMMAND --help`` of that checkout lists ``option``."""
    out = subprocess.run([sys.executable, "-m", "context_forensics", *command, "--help"], capture_output=True,
                         text=True, env=env_for(checkout), cwd=tempfile.gettempdir())
    return option in out.stdout


def ctxf(checkout: Path, args: list[str], *, timeout: float = 3600, entry: list[str] | None = None) -> dict[str, Any]:
    """One ``ctxf ARGS`` subprocess: ``wall_s``, ``peak_rss_mb``, ``rc``, ``json`` (parsed stdout, or
    None) and the tail of stderr. ``entry``: what runs instead of ``-m context_forensics`` (a script
    taking ctxf's arguments, such as bench/_free_encoder.py)."""
    cmd = [sys.executable, *(entry or ["-m", "context_forensics"]), *args]
    parent_rss = round(_status_kb("VmRSS") / 1024, 1)
    with tempfile.TemporaryDirectory() as cwd, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env_for(checkout), cwd=cwd)
        deadline = t + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.02)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    try:
        data = json.loads(stdout) if stdout.strip() else None
    except ValueError:
        data = None
    return {"wall_s": round(wall, 2), "peak_rss_mb": round(ru.ru_maxrss / 1024, 1), "parent_rss_mb": parent_rss,
            "rc": p.returncode,
            "json": data, "stderr_tail": stderr.strip().splitlines()[-3:]}


def _status_kb(key: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "NOT met")
