"""SWE-bench verdicts found next to an agent trajectory: which instance it is, and whether the
harness resolved it.

Read from ``report.json`` (the harness's per-instance report, or mini-swe-agent's flat one),
eval logs (``eval_instance_<id>.log``, ``instance_<id>.log``, ``run_instance.log``) and run
summaries (``results.json``, ``results_summary.json``, ``summary.json``); shared by the
``swe_agent``, ``mini_swe_agent`` and ``openhands`` importers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ._json import parse_json

# owner__repo-123 (SWE-bench), also owner__repo-i1 (SWE-agent's test instance)
SWEBENCH_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*__[A-Za-z0-9_.-]+-[A-Za-z0-9]+$")


_MAX_SIDECAR_BYTES = 50 * 1024 * 1024
_RESULT_LINE = re.compile(r"Result for (\S+): resolved: (True|False)")
_RESOLVED_FLAG = re.compile(r"resolved['\"]?:\s*(True|False|true|false)")
_SUMMARY_NAMES = ("results.json", "results_summary.json", "summary.json")
_FAILED_ID_KEYS = ("unresolved_ids", "error_ids", "empty_patch_ids", "unresolved", "errors")


@dataclass(frozen=True)
class Verdict:
    """A SWE-bench harness verdict: the instance it is about, the outcome, the file it came from."""

    task: str | None
    outcome: str  # "success" | "failure"
    source: Path


def looks_like_instance_id(name: str | None) -> bool:
    """Whether ``name`` has the shape of a SWE-bench instance id (``owner__repo-123``)."""
    return bool(name) and bool(SWEBENCH_ID.match(name))  # type: ignore[arg-type]


def load_small_json(path: Path) -> Any:
    """A sidecar JSON document, or None. Cached: a run folder shares one report for many trajs."""
    try:
        st = path.stat()
    except OSError:
        return None
    if not path.is_file() or st.st_size > _MAX_SIDECAR_BYTES:
        return None
    return _load_cached(str(path), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=16)
def _load_cached(path: str, mtime_ns: int, size: int) -> Any:
    try:
        with open(path, "rb") as f:
            return parse_json(f.read())
    except (OSError, ValueError):  # nested too deep too (a ValueError): no verdict from it
        return None


def _outcome(flag: Any) -> str | None:
    if isinstance(flag, bool):
        return "success" if flag else "failure"
    if isinstance(flag, str) and flag.lower() in ("true", "false"):
        return "success" if flag.lower() == "true" else "failure"
    return None


def _verdict_from_json(data: Any, instance_id: str | None, source: Path) -> Verdict | None:
    """Read the SWE-bench report shapes: per-instance, flat, and run summaries."""
    if not isinstance(data, dict):
        return None
    # flat per-instance report (mini-swe-agent logs/<id>/report.json)
    if "resolved" in data and _outcome(data["resolved"]) is not None:
        return Verdict(instance_id, _outcome(data["resolved"]), source)  # type: ignore[arg-type]
    # official harness report.json: {instance_id: {"resolved": bool, ...}}
    if instance_id and isinstance(data.get(instance_id), dict):
        out = _outcome(data[instance_id].get("resolved"))
        if out:
            return Verdict(instance_id, out, source)
    per_instance = {k: v for k, v in data.items() if isinstance(v, dict) and "resolved" in v}
    if not instance_id and len(per_instance) == 1:
        key, value = next(iter(per_instance.items()))
        out = _outcome(value.get("resolved"))
        if out:
            return Verdict(key, out, source)
    if not instance_id:
        return None
    # run summaries: {"resolved_ids": [...], "unresolved_ids": [...]} (harness, sb-cli),
    # {"resolved": [...]} (older SWE-agent results.json), {"instances": [{instance_id, resolved}]}
    resolved = data.get("resolved_ids", data.get("resolved"))
    if isinstance(resolved, list):
        if instance_id in resolved:
            return Verdict(instance_id, "success", source)
        for key in _FAILED_ID_KEYS:
            if isinstance(data.get(key), list) and instance_id in data[key]:
                return Verdict(instance_id, "failure", source)
        for key in ("completed_ids", "submitted_ids"):
            if isinstance(data.get(key), list) and instance_id in data[key]:
                return Verdict(instance_id, "failure", source)
    instances = data.get("instances")
    if isinstance(instances, list):
        for item in instances:
            if isinstance(item, dict) and item.get("instance_id") == instance_id:
                out = _outcome(item.get("resolved"))
                if out:
                    return Verdict(instance_id, out, source)
    return None


def _verdict_from_log(path: Path, instance_id: str | None) -> Verdict | None:
    """The last ``resolved: True/False`` of a SWE-bench eval log (OpenHands, harness)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            if size > 4 * 1024 * 1024:
                f.seek(size - 1024 * 1024)
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    results = _RESULT_LINE.findall(text)
    if results:
        iid, flag = results[-1]
        if instance_id and iid != instance_id:
            return None
        return Verdict(iid, _outcome(flag), path)  # type: ignore[arg-type]
    flags = _RESOLVED_FLAG.findall(text)
    if not flags:
        return None
    name_id = None
    for prefix in ("eval_instance_", "instance_"):
        if path.name.startswith(prefix) and path.suffix == ".log":
            name_id = path.name[len(prefix) : -len(".log")]
    if instance_id and name_id and name_id != instance_id:
        return None
    return Verdict(instance_id or name_id, _outcome(flags[-1]), path)  # type: ignore[arg-type]


def find_verdict(directory: Path, instance_id: str | None = None) -> Verdict | None:
    """The SWE-bench verdict in ``directory`` for ``instance_id`` (or the only one there).

    Looks at ``report.json`` (per-instance or flat), eval logs (``eval_instance_<id>.log``,
    ``instance_<id>.log``, ``run_instance.log``, ``output.swebench_eval.logs/instance_<id>.log``)
    and run summaries (``results.json``, ``results_summary.json``, ``summary.json``).
    """
    if not directory.is_dir():
        return None
    verdict = _verdict_from_json(load_small_json(directory / "report.json"), instance_id,
                                 directory / "report.json")
    if verdict:
        return verdict
    logs: list[Path] = []
    if instance_id:
        logs += [directory / f"eval_instance_{instance_id}.log", directory / f"instance_{instance_id}.log",
                 directory / "output.swebench_eval.logs" / f"instance_{instance_id}.log"]
    else:
        try:
            found = sorted(directory.glob("eval_instance_*.log"))
        except OSError:
            found = []
        if len(found) == 1:
            logs += found
    logs.append(directory / "run_instance.log")
    for log in logs:
        if log.is_file():
            verdict = _verdict_from_log(log, instance_id)
            if verdict:
                return verdict
    for name in _SUMMARY_NAMES:
        verdict = _verdict_from_json(load_small_json(directory / name), instance_id, directory / name)
        if verdict:
            return verdict
    return None


def verdict_near(path: Path, instance_id: str | None = None) -> Verdict | None:
    """The verdict next to a trajectory file, or one level up when the file sits in its own
    ``<instance_id>/`` folder (SWE-agent 1.x and mini-swe-agent batch layouts)."""
    verdict = find_verdict(path.parent, instance_id)
    if verdict is None and instance_id and path.parent.name == instance_id:
        verdict = find_verdict(path.parent.parent, instance_id)
    return verdict


def swebench_verdict(directory: Path, instance_id: str | None = None) -> tuple[str | None, str] | None:
    """``(task, outcome)`` from a SWE-bench verdict next to a trajectory, or None.

    ``task`` is the instance id the verdict names (``instance_id`` for a flat report that names
    none); ``outcome`` is ``"success"`` (resolved) or ``"failure"``.
    """
    verdict = find_verdict(Path(directory), instance_id)
    return (verdict.task, verdict.outcome) if verdict else None
