"""Run the oracle over generated inputs in worker processes with a time and a memory limit.

The parent collects the seeds, then forks ``jobs`` workers and hands each one
``(importer, index)`` at a time. A worker builds input ``index`` of that importer from
``random.Random(f"{seed}:{importer}:{index}")`` (so any input can be rebuilt alone with
``--only INDEX``), writes it to its own scratch folder, and runs ``oracle.check`` with its
address space limited (``RLIMIT_AS`` at what the worker holds plus ``mem_mb``, so ``MemoryError``
instead of the machine running out, whatever inputs came before) and a
``faulthandler`` watchdog that writes the stack every timeout-1 s. A worker that has spent over the
timeout in CPU seconds on its input (counted from when the input is built; or over ``WALL_FACTOR``
times it in wall time, for a process stuck without working) is killed and counted as a hang, at
the place its watchdog wrote last; one that dies is a crash. Each escaping input is copied to ``out/`` with a
``repro.txt`` (the command that replays it, the mutations that made it, the traceback).
"""

from __future__ import annotations

import faulthandler
import json
import multiprocessing as mp
import os
import random
import re
import resource
import shutil
import signal
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from . import seeds as seedmod
from .containers import SQLITE_MAGIC, ZIP_MAGIC, mutate_folder, mutate_sqlite, mutate_yaml, mutate_zip
from .mutate import mutate_bytes, mutate_document, parse_document

OUT = Path(__file__).resolve().parent / "out"
BUILD_TIMEOUT = 120.0  # seconds a worker may take to build one input (the harness's own time)
# A hang is an input whose reading takes over ``timeout`` seconds of CPU: on a busy machine (the
# suite, other jobs) wall time stretches while the work does not, and a wall-clock limit counted
# a tokenizer loading in 4 s of CPU as a 20 s hang. A process stuck without using the CPU (a
# lock, a blocked read) is a hang after WALL_FACTOR times the timeout of wall time.
WALL_FACTOR = 6.0
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) process ``pid`` has used so far; -1 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return -1.0
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def over_time(cpu: float, wall: float, timeout: float) -> bool:
    """Whether an input that has taken ``cpu`` CPU and ``wall`` wall seconds is a hang."""
    return cpu > timeout or wall > timeout * WALL_FACTOR


@dataclass
class Options:
    seed: int = 0
    minutes: float | None = None  # stop after this long (None: only per_importer stops)
    per_importer: int | None = None  # inputs per importer (None: until the deadline)
    importers: list[str] | None = None
    corpus: Path | None = None
    jobs: int = 2
    timeout: float = 20.0  # seconds per input before it counts as a hang
    mem_mb: int = 1536  # address space an input may take beyond what its worker holds (RLIMIT_AS)
    out: Path = OUT
    window_bytes: int = 512 << 10  # a longer JSONL seed is cut to a window of lines this big
    string_cap: int = 5 << 20  # the longest string a mutation writes
    max_hangs: int | None = None  # stop an importer after this many hangs (the bounded test)
    save_per_signature: int = 2
    store_every: int = 150  # a fresh store after this many inputs
    # A fresh worker process after this many: what a long-lived one has mapped (arenas kept
    # after a 5 MB string, caches) counts against its RLIMIT_AS, so an input's MemoryError
    # would depend on the inputs before it.
    worker_every: int = 300
    only: int | None = None  # rebuild and check only this index
    rss_mb: int = 500  # an input whose reading peaks above this resident memory is reported
    cli: bool = False  # also run ``ctxf ingest`` on each input as a subprocess (exit code, stderr)


@dataclass
class Stats:
    inputs: int = 0
    escaping: int = 0  # inputs with at least one escape
    escapes: Counter = field(default_factory=Counter)  # by type
    hangs: int = 0
    oom: int = 0
    crashes: int = 0
    harness_errors: int = 0  # inputs the harness itself failed to build or check (its own bugs)
    stopped: str = ""
    peak_rss_mb: int = 0  # the highest peak resident memory of reading one input (VmHWM, MB)
    over_rss: int = 0  # inputs whose peak passed ``Options.rss_mb`` (in a fresh process, when confirmed)
    confirmed: int = 0  # inputs whose worker peak passed it, re-run in a fresh ``ctxf ingest`` to decide
    layout: int = 0  # files failed whole for their layout ("its layout has an unexpected type or shape")
    cli_runs: int = 0  # inputs also run through ``ctxf ingest`` as a subprocess (``--cli``)
    cli_peak_rss_mb: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "escaping": self.escaping, "escapes": dict(self.escapes),
                "hangs": self.hangs, "oom": self.oom, "crashes": self.crashes,
                "harness_errors": self.harness_errors, "stopped": self.stopped, "peak_rss_mb": self.peak_rss_mb,
                "over_rss": self.over_rss, "confirmed": self.confirmed, "layout": self.layout,
                "cli_runs": self.cli_runs,
                "cli_peak_rss_mb": self.cli_peak_rss_mb}


# ---------------------------------------------------------------- building an input


class Material:
    """What a worker builds inputs from: the seeds, and other formats' values for grafting."""

    def __init__(self, seeds: dict[str, list[seedmod.Seed]], unknown: list[Path], opts: Options) -> None:
        self.seeds = seeds
        self.opts = opts
        self._donor_files = sorted({s.path for ss in seeds.values() for s in ss if s.kind == "file"} | set(unknown))
        self._donors: list[Any] | None = None
        self._cache: dict[Path, bytes] = {}

    def donors(self) -> list[Any]:
        if self._donors is None:
            out: list[Any] = []
            for p in self._donor_files:
                if p.stat().st_size > 64 << 10:
                    continue
                doc = parse_document(p.read_bytes())
                if doc is not None:
                    out.extend(v for v in doc.lines[:5] if isinstance(v, (dict, list)))
            self._donors = out
        return self._donors

    def read(self, p: Path) -> bytes:
        if p not in self._cache:
            self._cache[p] = p.read_bytes()
        return self._cache[p]


def window(data: bytes, rng: random.Random, log: list[str], limit: int) -> bytes:
    """A long JSONL seed cut to its first line and a random run of lines (``limit`` bytes)."""
    if len(data) <= limit or data.count(b"\n") < 10:
        return data
    lines = data.split(b"\n")
    start = rng.randrange(1, len(lines))
    out, size, i = [lines[0]], len(lines[0]), start
    while i < len(lines) and size + len(lines[i]) < limit:
        out.append(lines[i])
        size += len(lines[i]) + 1
        i += 1
    log.append(f"lines 1 and {start + 1}-{i} of {len(lines)}")
    return b"\n".join(out) + b"\n"


def mutate_file(mat: Material, path: Path, data: bytes, rng: random.Random, log: list[str]) -> bytes:
    opts = mat.opts
    if data.startswith(ZIP_MAGIC):
        return mutate_zip(data, rng, log, cap=opts.string_cap, donors=mat.donors())
    if data.startswith(SQLITE_MAGIC):
        return mutate_sqlite(data, rng, log, cap=opts.string_cap)
    data = window(data, rng, log, opts.window_bytes)
    if path.suffix in (".yaml", ".yml"):
        return mutate_yaml(data, rng, log, cap=opts.string_cap, donors=mat.donors())
    if rng.random() < 0.15:  # on the file's own bytes and layout, not a re-serialised tree
        return mutate_bytes(data, rng, log)
    return mutate_document(data, rng, log, cap=opts.string_cap, donors=mat.donors())


def build_input(mat: Material, importer: str, index: int, dest: Path) -> tuple[Path, seedmod.Seed, list[str]]:
    rng = random.Random(f"{mat.opts.seed}:{importer}:{index}")
    pool = mat.seeds[importer]
    folders = [s for s in pool if s.kind == "folder"]
    files = [s for s in pool if s.kind == "file"]
    seed = rng.choice(folders) if folders and (not files or rng.random() < 0.2) else rng.choice(files)
    log: list[str] = []
    target = dest / seed.path.name
    if seed.kind == "folder":
        imp = importer

        def prefer(p: Path) -> bool:
            return p.suffix in {s.path.suffix for s in files if s.path.parent == seed.path} or imp == "openhands"

        mutate_folder(seed.path, target, rng, log,
                      lambda p, data, r, lg: mutate_file(mat, p, data, r, lg), prefer)
    else:
        # in a folder named as the seed's (a Gemini CLI ``checkpoints/`` file is one by its folder)
        target = dest / seed.path.parent.name / seed.path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(mutate_file(mat, seed.path, mat.read(seed.path), rng, log))
    return target, seed, log


# ---------------------------------------------------------------- the worker


def _worker(conn: Connection, wid: int, mat: Material, scratch: Path) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles ^C
    opts = mat.opts
    import context_forensics as ctxf

    from . import oracle

    home = scratch / f"w{wid}"
    home.mkdir(parents=True, exist_ok=True)
    watchdog = open(home / "stack.txt", "w")  # noqa: SIM115 - faulthandler writes to it while we run
    db = home / "store.db"
    ws = None
    done = 0
    while True:
        task = conn.recv()
        if task is None:
            break
        if ws is None or done % opts.store_every == 0:
            if ws is not None:
                ws.close()
            for p in home.glob("store.db*"):
                p.unlink()
            ws = ctxf.open_store(db, config={})
        done += 1
        inputs = home / "in"
        shutil.rmtree(inputs, ignore_errors=True)
        here = inputs / f"{task['importer']}-{task['index']}"
        here.mkdir(parents=True)
        watchdog.seek(0)
        watchdog.truncate()
        started, cpu, vm_before = time.perf_counter(), time.process_time(), _vm_mb()
        _reset_peak_rss()
        # Each input gets mem_mb of address space beyond what the worker holds (a soft limit,
        # reset per input): its MemoryError then depends on its own need, not on the history.
        resource.setrlimit(resource.RLIMIT_AS, ((max(vm_before, 0) + opts.mem_mb) << 20, resource.RLIM_INFINITY))
        result: dict[str, Any] = dict(task, log=[], escapes=[], seed="")
        cli_cpu = 0.0
        built = False
        try:
            if task.get("replay"):
                src = Path(task["replay"])
                path = here / src.name
                (shutil.copytree(src, path, symlinks=True) if src.is_dir() else shutil.copy(src, path))
                result["seed"] = str(src)
            else:
                path, seed, log = build_input(mat, task["importer"], task["index"], here)
                result["seed"], result["log"] = seed.label(), log
            built = True
            result["input"] = str(path)
            conn.send({"started": True})  # the timeout runs from here: building is the harness's time
            # every timeout-1 s of wall time: the parent reads the last stack when it stops the worker
            faulthandler.dump_traceback_later(max(1.0, opts.timeout - 1.0), repeat=True, file=watchdog)
            escapes, info = oracle.check(path, task["importer"], ws, db)
            result["rss_mb"] = _peak_rss_mb()
            result["escapes"] = [e.to_dict() for e in escapes]
            result.update(info)
            if result["rss_mb"] > opts.rss_mb and not opts.cli:
                # The worker's peak counts what it holds from earlier inputs (tokenizers, caches):
                # the verdict is a fresh `ctxf ingest` of this input, as a user runs it.
                faulthandler.cancel_dump_traceback_later()
                conn.send({"started": True})
                fmt = None if path.is_dir() else task["importer"]
                confirm, result["confirm_rss_mb"], cli_cpu = check_cli(path, home, opts.timeout - 1.0, fmt=fmt)
                result["escapes"] += confirm
            if opts.cli:
                faulthandler.cancel_dump_traceback_later()
                conn.send({"started": True})  # the subprocess gets a timeout of its own
                cli_escapes, result["cli_rss_mb"], cli_cpu = check_cli(path, home, opts.timeout - 1.0)
                result["escapes"] += cli_escapes
        except MemoryError as e:  # one the oracle did not catch (while reporting another, say)
            where = oracle.innermost(traceback.extract_tb(e.__traceback__))
            del e
            result["escapes"] = [{"via": "ingest" if built else "build", "type": "MemoryError", "where": where,
                                  "message": "", "file": "", "traceback": ""}]
            if not built:
                result["harness_error"] = f"MemoryError building the input at {where}"
        except Exception:  # noqa: BLE001 - a bug of the harness itself: report it, keep going
            result["harness_error"] = traceback.format_exc(limit=-8)
        finally:
            faulthandler.cancel_dump_traceback_later()
        result["elapsed"] = time.perf_counter() - started
        result["cpu"] = time.process_time() - cpu + cli_cpu  # the subprocess's CPU counts too
        result["vm_mb_before"] = vm_before
        oom = any(e["type"] == "MemoryError" for e in result["escapes"])
        # a process that ran out of memory may be in any state: start afresh (and now and then)
        result["retire"] = oom or done >= opts.worker_every
        conn.send(result)
        if result["retire"]:
            break
    if ws is not None:
        ws.close()


def _vm_mb() -> int:
    """This process's mapped address space (VmSize, what RLIMIT_AS limits), in MB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return -1


def _reset_peak_rss() -> None:
    """Reset this process's peak resident memory (VmHWM) to its current size (Linux 4.0+)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _peak_rss_mb() -> int:
    """This process's peak resident memory since the last reset (VmHWM), in MB; -1 unknown."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return -1


CLI_MEMORY = 4 << 30  # address space the ``ctxf ingest`` subprocess may map (its own RLIMIT_AS)


# ``python -c`` code that runs ``python -m context_forensics ARGS`` and, at exit, writes its own
# peak resident memory (VmHWM, kB) to the file named first. A forked child's ru_maxrss counts the
# parent's memory at the fork (Linux keeps the old image's high-water mark across exec): under a
# test suite that holds 3 GB, every child "peaked" at 3 GB. The child's own VmHWM is its new image's.
MEASURED = ("import atexit, runpy, sys\n"
            "def _hwm(path=sys.argv[1]):\n"
            "    for line in open('/proc/self/status'):\n"
            "        if line.startswith('VmHWM:'):\n"
            "            open(path, 'w').write(line.split()[1])\n"
            "atexit.register(_hwm)\n"
            "sys.argv = ['ctxf'] + sys.argv[2:]\n"
            "runpy.run_module('context_forensics', run_name='__main__', alter_sys=True)\n")


def measured_argv(report: Path, *args: str) -> list[str]:
    """The command line of ``ctxf ARGS`` that writes its own peak RSS to ``report`` (``MEASURED``)."""
    import sys

    return [sys.executable, "-c", MEASURED, str(report), *args]


def measured_peak_mb(report: Path, fallback_kb: int) -> int:
    """The peak RSS in MB a ``measured_argv`` child wrote; a child that died before its exit
    handlers ran wrote none: then ``fallback_kb`` (its ru_maxrss, an upper bound)."""
    try:
        return int(report.read_text()) // 1024
    except (OSError, ValueError):
        return fallback_kb // 1024


def check_cli(path: Path, home: Path, timeout: float,
              fmt: str | None = None) -> tuple[list[dict[str, Any]], int, float]:
    """``ctxf ingest`` (this checkout's, ``python -m context_forensics``) on the input as a user
    runs it, in a fresh process with a fresh store: (escapes, its peak RSS in MB, its CPU seconds). An escape is
    an exit code other than 0, 1 (a file failed) or 2 (an unknown format named), a traceback or
    ``internal error`` on its stderr, or no answer within ``timeout`` (a hang, the process killed)."""
    import subprocess

    db = home / "cli.db"
    for p in home.glob("cli.db*"):
        p.unlink()
    root = Path(__file__).resolve().parent.parent
    err_path = home / "cli.err"
    report = home / "cli.hwm"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CLI_MEMORY, resource.RLIM_INFINITY))

    with open(err_path, "wb") as err:
        report.unlink(missing_ok=True)
        proc = subprocess.Popen(measured_argv(report, "ingest", str(path), "--recursive", "--db", str(db),
                                              *(["--format", fmt] if fmt else [])), cwd=root,
                                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err, preexec_fn=limit, start_new_session=True,
                                env=dict(os.environ, COLUMNS="80", NO_COLOR="1"))
        started = time.monotonic()
        status, usage = 0, None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            cpu, wall = cpu_seconds(proc.pid), time.monotonic() - started
            if over_time(cpu, wall, timeout):
                os.killpg(proc.pid, signal.SIGKILL)
                os.wait4(proc.pid, 0)
                proc.returncode = -9
                return [{"via": "cli", "type": "hang", "where": "ctxf ingest (subprocess)",
                         "message": f"no answer after {cpu:.1f} s of CPU ({wall:.1f} s of wall time)", "file": "",
                         "traceback": ""}], -1, max(cpu, 0.0)
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
    rss = measured_peak_mb(report, usage.ru_maxrss) if usage is not None else -1
    cpu = usage.ru_utime + usage.ru_stime if usage is not None else 0.0
    stderr = _read(err_path)
    code = proc.returncode
    out: list[dict[str, Any]] = []
    if code not in (0, 1, 2):
        out.append({"via": "cli", "type": f"exit {code}", "where": "ctxf ingest (subprocess)",
                    "message": stderr[-300:], "file": "", "traceback": stderr[-4000:]})
    for marker in ("Traceback (most recent call last)", "internal error"):
        if marker in stderr:
            line = next((ln for ln in stderr.splitlines() if marker in ln), marker)
            out.append({"via": "cli", "type": f"stderr: {marker.split(' (')[0]}", "where": "ctxf ingest (subprocess)",
                        "message": line[:300], "file": "", "traceback": stderr[-4000:]})
    return out, rss, cpu


class Pool:
    def __init__(self, mat: Material, scratch: Path, jobs: int) -> None:
        self.mat, self.scratch = mat, scratch
        self.ctx = mp.get_context("fork")
        self.workers: list[dict[str, Any]] = [self._start(i) for i in range(jobs)]

    def _start(self, wid: int) -> dict[str, Any]:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker, args=(child, wid, self.mat, self.scratch), daemon=True)
        proc.start()
        child.close()
        return {"id": wid, "proc": proc, "conn": parent, "task": None, "since": 0.0, "checking": False}

    def restart(self, w: dict[str, Any]) -> None:
        if w["proc"].is_alive():
            os.kill(w["proc"].pid, signal.SIGKILL)
        w["proc"].join(5)
        w["conn"].close()
        w.update(self._start(w["id"]))

    def close(self) -> None:
        for w in self.workers:
            try:
                w["conn"].send(None)
            except OSError:
                pass
        for w in self.workers:
            w["proc"].join(5)
            if w["proc"].is_alive():
                os.kill(w["proc"].pid, signal.SIGKILL)
                w["proc"].join(5)


# ---------------------------------------------------------------- the run


def _stack_location(text: str) -> str:
    for line in text.splitlines():
        m = re.search(r'File "([^"]*context_forensics/[^"]+)", line (\d+) in (\S+)', line)
        if m:
            return f"{m.group(1).split('context_forensics/', 1)[1]}:{m.group(2)} {m.group(3)}"
    return "?"


class Run:
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.stats: dict[str, Stats] = {}
        self.findings: dict[tuple[str, ...], dict[str, Any]] = {}
        self.saved: Counter = Counter()
        self.inputs = 0
        self.elapsed = 0.0
        self.mat: Material | None = None
        self.interrupted = False
        self.harness_errors: list[str] = []
        self.cpu = 0.0  # CPU seconds the workers spent on the inputs

    def record(self, r: dict[str, Any], home: Path) -> None:
        st = self.stats[r["importer"]]
        st.inputs += 1
        self.inputs += 1
        self.cpu += r.get("cpu", self.opts.timeout)  # a killed worker: its input took the timeout
        st.layout += r.get("layout", 0)
        rss = r.get("rss_mb", -1)
        st.peak_rss_mb = max(st.peak_rss_mb, rss)
        if "cli_rss_mb" in r:
            st.cli_runs += 1
            st.cli_peak_rss_mb = max(st.cli_peak_rss_mb, r["cli_rss_mb"])
        if "confirm_rss_mb" in r:  # the worker's peak passed the bound: a fresh process decides
            st.confirmed += 1
            over = [m for m in (r["confirm_rss_mb"],) if m > self.opts.rss_mb]
            said = (f"peak resident memory {r['confirm_rss_mb']} MB in a fresh `ctxf ingest` of this input "
                    f"({rss} MB in the worker)")
        else:
            over = [m for m in (rss, r.get("cli_rss_mb", -1)) if m > self.opts.rss_mb]
            said = f"peak resident memory {max(over, default=-1)} MB reading this input"
        if over:
            st.over_rss += 1
            r = dict(r, escapes=r["escapes"] + [{
                "via": "ingest", "type": f"peak RSS over {self.opts.rss_mb} MB", "where": "?",
                "message": said, "file": "", "traceback": ""}])
        if r.get("harness_error"):
            st.harness_errors += 1
            if len(self.harness_errors) < 20:
                self.harness_errors.append(f"{r['importer']} input {r['index']}: {r['harness_error']}")
        escapes = [e for e in r["escapes"] if e["via"] != "build"]
        if not escapes:
            return
        st.escaping += 1
        for e in escapes:
            if e["type"] == "MemoryError":
                st.oom += 1
            elif e["type"] == "hang":
                st.hangs += 1
            elif e["type"].startswith("crash"):
                st.crashes += 1
            elif e["type"].startswith("peak RSS over"):
                pass  # counted as over_rss above
            else:
                st.escapes[e["type"]] += 1
        for e in escapes:
            if e["type"] == "MemoryError" and r.get("vm_mb_before") is not None:
                e["message"] = (f"needed more than {self.opts.mem_mb} MB beyond the {r['vm_mb_before']} MB its worker "
                                f"held: {e['message']}").strip()
        try:
            saved = self._save(dict(r, escapes=escapes), home)
        except OSError as e:  # a full disk, say: the run goes on, the input is not kept
            saved = None
            if len(self.harness_errors) < 20:
                self.harness_errors.append(f"{r['importer']} input {r['index']}: not saved: {e}")
        for e in escapes:
            sig = (r["importer"], e["via"].split(":")[0].split(" ")[0], e["type"], e["where"])
            f = self.findings.setdefault(sig, {"importer": r["importer"], "via": e["via"], "type": e["type"],
                                               "where": e["where"], "count": 0, "examples": []})
            f["count"] += 1
            if saved and len(f["examples"]) < self.opts.save_per_signature:
                f["examples"].append({"input": saved, "message": e["message"], "file": e["file"],
                                      "mutations": r["log"], "seed": r["seed"], "index": r["index"],
                                      "repro": self.repro(r, saved)})

    def repro(self, r: dict[str, Any], saved: str) -> str:
        return f".venv/bin/python fuzz/run.py --replay {saved} --importer {r['importer']}"

    def _save(self, r: dict[str, Any], home: Path) -> str | None:
        sigs = [(r["importer"], e["type"], e["where"]) for e in r["escapes"]]
        if all(self.saved[s] >= self.opts.save_per_signature for s in sigs) or not r.get("input"):
            return None
        src = Path(r["input"])
        if not src.exists() and not src.is_symlink():
            return None
        kind = re.sub(r"[^\w.]+", "_", r["escapes"][0]["type"])[:40]
        dest = self.opts.out / r["importer"] / f"{r['index']}-{kind}"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        target = dest / src.name
        if src.is_dir():
            shutil.copytree(src, target, symlinks=True,
                            ignore=lambda d, names: [n for n in names if _special(Path(d) / n)])
        else:
            shutil.copy(src, target)
        for s in sigs:
            self.saved[s] += 1
        rel = os.path.relpath(target, Path.cwd()) if str(target).startswith(str(Path.cwd())) else str(target)
        lines = [f"repro: {self.repro(r, rel)}"]
        if not r.get("replay"):
            lines.append(f"rebuild: .venv/bin/python fuzz/run.py --importer {r['importer']} --seed {self.opts.seed} "
                         f"--only {r['index']}"
                         + (f" --corpus {self.opts.corpus}" if self.opts.corpus else " --corpus none"))
        lines += [f"seed file: {r['seed']}", "mutations: " + "; ".join(r["log"]), ""]
        for e in r["escapes"]:
            lines += [f"{e['via']}: {e['type']} at {e['where']}" + (f" ({e['file']})" if e["file"] else ""),
                      f"  {e['message']}", e.get("traceback", ""), ""]
        (dest / "repro.txt").write_text("\n".join(lines))
        return rel

    def tasks(self, names: list[str], deadline: float | None) -> Any:
        opts = self.opts
        if opts.only is not None:
            for n in names:
                yield {"importer": n, "index": opts.only}
            return
        i = 0
        while True:
            live = [n for n in names if not self.stats[n].stopped]
            if not live or (opts.per_importer is not None and i >= opts.per_importer):
                return
            for n in live:
                if deadline is not None and time.monotonic() > deadline:
                    return
                if not self.stats[n].stopped:
                    yield {"importer": n, "index": i}
            i += 1


def prepare(opts: Options, scratch: Path) -> tuple[Material, list[str]]:
    roots = list(seedmod.REPO_ROOTS) + [seedmod.build_synthetic(scratch)]
    if opts.corpus is not None and opts.corpus.is_dir():
        roots.append(opts.corpus)
    found, unknown = seedmod.collect(roots)
    names = [n for n in found if found[n] and (opts.importers is None or n in opts.importers)]
    return Material(found, unknown, opts), names


def run(opts: Options, progress: Any = None, replay: Path | None = None) -> Run:
    """Fuzz until ``opts.minutes`` or ``opts.per_importer`` inputs per importer; or, given
    ``replay``, check that one saved input (with ``opts.importers[0]`` as its importer)."""
    scratch = Path(tempfile.mkdtemp(prefix="ctxf-fuzz-"))
    res = Run(opts)
    try:
        mat, names = prepare(opts, scratch)
        res.mat = mat
        if replay is not None:
            names = (opts.importers or ["?"])[:1]
        res.stats = {n: Stats() for n in names}
        started = time.monotonic()
        deadline = started + opts.minutes * 60 if opts.minutes else None
        if replay is not None:
            tasks: Any = iter([{"importer": names[0], "index": 0, "replay": str(replay.resolve())}])
        else:
            tasks = res.tasks(names, deadline)
        pool = Pool(mat, scratch, max(1, opts.jobs))
        try:
            _drive(res, pool, tasks, scratch, progress)
        except KeyboardInterrupt:
            res.interrupted = True  # report what ran so far
        finally:
            pool.close()
        res.elapsed = time.monotonic() - started
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return res


def _drive(res: Run, pool: Pool, tasks: Any, scratch: Path, progress: Any) -> None:
    opts = res.opts
    exhausted = False

    def feed(w: dict[str, Any]) -> None:
        nonlocal exhausted
        while not exhausted:
            task = next(tasks, None)
            if task is None:
                exhausted = True
                return
            if res.stats[task["importer"]].stopped:
                continue
            w["conn"].send(task)
            w["task"], w["since"], w["checking"] = task, time.monotonic(), False
            return

    for w in pool.workers:
        feed(w)
    while any(w["task"] is not None for w in pool.workers):
        busy = [w for w in pool.workers if w["task"] is not None]
        ready = wait([w["conn"] for w in busy], timeout=0.5)
        now = time.monotonic()
        for w in busy:
            task = w["task"]
            home = scratch / f"w{w['id']}"
            if w["conn"] in ready:
                try:
                    r = w["conn"].recv()
                except (EOFError, OSError):
                    code = w["proc"].exitcode if not w["proc"].is_alive() else None
                    r = dict(task, log=[], seed="", input=_current_input(home, task),
                             escapes=[_engine_escape(f"crash (exit {code})",
                                                     _stack_location(_read(home / "stack.txt")))])
                    r["log"], r["seed"] = _rebuild_log(res, task)
                    res.record(r, home)
                    pool.restart(w)
                else:
                    if "started" in r:  # built: the oracle runs now, and the timeout with it
                        w["since"], w["checking"], w["cpu0"] = now, True, cpu_seconds(w["proc"].pid)
                        continue
                    res.record(r, home)
                    if r.get("retire"):
                        w["proc"].join(5)
                        pool.restart(w)
            elif w["checking"] and now - w["since"] > opts.timeout and over_time(
                    cpu_seconds(w["proc"].pid) - w["cpu0"], now - w["since"], opts.timeout):
                stack = _last_dump(_read(home / "stack.txt"))
                r = dict(task, log=[], seed="", input=_current_input(home, task),
                         escapes=[_engine_escape("hang", _stack_location(stack), stack)])
                os.kill(w["proc"].pid, signal.SIGKILL)  # stop it before copying what it was reading
                w["proc"].join(5)
                r["log"], r["seed"] = _rebuild_log(res, task)
                res.record(r, home)
                pool.restart(w)
                st = res.stats[task["importer"]]
                if opts.max_hangs is not None and st.hangs >= opts.max_hangs:
                    st.stopped = f"stopped after {st.hangs} hangs"
            elif not w["checking"] and now - w["since"] > BUILD_TIMEOUT:
                res.record(dict(task, log=[], seed="", escapes=[],
                                harness_error=f"building the input took over {BUILD_TIMEOUT} s"), home)
                pool.restart(w)
            else:
                continue
            w["task"] = None
            if progress is not None:
                progress(res)
            feed(w)


def _last_dump(text: str) -> str:
    """The last stack the worker's watchdog wrote (it writes one every timeout-1 s)."""
    at = text.rfind("Timeout (")
    return text[at:] if at > 0 else text


def _engine_escape(kind: str, where: str, tb: str = "") -> dict[str, Any]:
    return {"via": "ingest", "type": kind, "where": where, "message": "", "file": "", "traceback": tb}


def _current_input(home: Path, task: dict[str, Any]) -> str | None:
    here = home / "in" / f"{task['importer']}-{task['index']}"
    found = sorted(here.iterdir()) if here.is_dir() else []
    # a file input sits in a folder named as its seed's (``build_input``): the file is the input
    inner = sorted(found[0].iterdir()) if found and found[0].is_dir() and not found[0].is_symlink() else []
    if len(found) == 1 and len(inner) == 1 and inner[0].is_file() and not inner[0].is_symlink():
        return str(inner[0])
    return str(found[0]) if found else None


def _rebuild_log(res: Run, task: dict[str, Any]) -> tuple[list[str], str]:
    """The mutations of an input whose worker was killed (rebuilt here: the same rng)."""
    if task.get("replay") or res.mat is None:
        return [], task.get("replay", "")
    with tempfile.TemporaryDirectory(prefix="ctxf-fuzz-rebuild-") as d:
        _, seed, log = build_input(res.mat, task["importer"], task["index"], Path(d))
    return log, seed.label()


def _read(p: Path) -> str:
    try:
        return p.read_text(errors="replace")
    except OSError:
        return ""


def _special(p: Path) -> bool:
    import stat

    try:
        mode = os.lstat(p).st_mode
    except OSError:
        return True
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode))


def summary(res: Run) -> dict[str, Any]:
    return {
        "seed": res.opts.seed, "jobs": res.opts.jobs, "elapsed_s": round(res.elapsed, 1), "inputs": res.inputs,
        "inputs_per_s": round(res.inputs / res.elapsed, 1) if res.elapsed else None,
        "cpu_s": round(res.cpu, 1), "cpu_ms_per_input": round(1000 * res.cpu / res.inputs, 1) if res.inputs else None,
        "importers": {n: s.to_dict() for n, s in res.stats.items()},
        "harness_errors": res.harness_errors,
        "findings": sorted(res.findings.values(), key=lambda f: (f["importer"], -f["count"])),
    }


def write_json(res: Run, path: Path) -> None:
    path.write_text(json.dumps(summary(res), indent=2))
