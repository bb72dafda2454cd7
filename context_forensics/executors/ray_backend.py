"""The Ray executor: each job a Ray task, on a local Ray or on the cluster at ``--ray-address``.

``ray`` is an optional extra (``pip install "context-forensics[ray]"``), imported only when this
executor is chosen. It talks only to the Ray cluster the user names (a local one listens on
loopback); Ray's usage-stats report, its only call home, is switched off before it starts.

A task whose worker process dies is retried by Ray (``max_retries``); each task returns the
attempt it ran as (Ray's own count), so the report can say how many retries there were. A task
never waits on another Ray call while it runs: a task blocked in ``ray.get`` gives its CPU back,
and Ray starts another worker process to fill it (on 2 CPUs, 49 extra workers in a 10,000-session
run, 56 s of their start-up, when each task asked a counting actor for its attempt). At most
``4 * CPUs`` tasks are in flight, so a run of a million sessions never holds a million results
in the object store.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..environ import handed, kept, scoped
from ..errors import UsageError
from .base import Executor, Outcome, TaskError, call, worker_setup

RAY_INSTALL = 'pip install "context-forensics[ray]"'


# What a local Ray is started with so that every socket of it stays on loopback: its node
# address (Ray otherwise takes this machine's outward address, found by a UDP connect to
# 8.8.8.8), and a proxy that refuses at once (the discard port of 127.0.0.1) for the one HTTP
# request its processes make on their own: the cloud-provider probe of its usage-stats module
# (169.254.169.254, metadata.google.internal), made even when usage stats are off.
_LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
                 # the workers at the priority of the rest: Ray starts them at nice 15, which on a
                 # machine whose cores they fill hands their time to Ray's own agents
                 "RAY_worker_niceness": "0",
                 **{k: "http://127.0.0.1:9" for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")},
                 "NO_PROXY": "", "no_proxy": ""}


def _driver_env(local: bool) -> dict[str, str]:
    """The switches Ray reads from this process's environment while it is imported and started,
    as defaults (a setting the user made stands): no usage report sent anywhere, its log lines
    not deduplicated, and, for a local Ray, loopback allowed as the node's address (read when
    ``ray`` is imported). A cluster started with `ray start` uses token authentication when a
    token exists; a driver joins it only in token mode: take that mode when the token is there,
    as `ray start` does."""
    from pathlib import Path

    env = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DEDUP_LOGS": "0"}
    if local:
        env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    if "RAY_AUTH_MODE" not in os.environ and (
            os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")
            or (Path.home() / ".ray" / "auth_token").is_file()):
        env["RAY_AUTH_MODE"] = "token"
    return env


def import_ray(*, local: bool = True) -> Any:
    """The ``ray`` module, or a ``UsageError`` naming the install command. ``local``: a local
    Ray will be started (its node on loopback). Ray's switches (``_driver_env``) are set for the
    import only, and what Ray itself sets then is undone: the host's environment is left as it was."""
    try:
        with kept(), scoped(default=_driver_env(local)):
            import ray
    except ImportError:
        raise UsageError("--executor ray needs Ray, which is not installed",
                         hint=f"install the extra: {RAY_INSTALL}, or use --executor process") from None
    return ray


def offers_token_auth() -> bool:
    """Whether the installed Ray has token authentication (``RAY_AUTH_MODE=token``; Ray 2.52+)."""
    import importlib.util

    try:
        return importlib.util.find_spec("ray._private.authentication.authentication_token_setup") is not None
    except (ImportError, ValueError):
        return False


def start_local_ray(ray: Any, num_cpus: int, **opts: Any) -> None:
    """``ray.init`` of a Ray on this machine whose processes listen and connect on loopback only
    (``_LOOPBACK_ENV``, in the environment they inherit; this process's is restored after), and
    that admits only callers holding a token made for this run, where the installed Ray offers
    token authentication (held in the environment of its processes: never written to disk,
    where Ray's own default would save a lasting one in ``~/.ray/auth_token``).

    Ray decides whether loopback may be a node's address from ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``
    as it stood when ``ray`` was imported (``ray_constants.ENABLE_RAY_CLUSTER``): imported before
    this module could set it, the driver swapped 127.0.0.1 for the machine's address and every
    process listened on all interfaces. The constant is set for the start, whatever the import order."""
    import secrets

    env = dict(_LOOPBACK_ENV)
    if offers_token_auth():
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
        env.pop("RAY_AUTH_TOKEN_PATH", None)
    saved = {k: os.environ.get(k) for k in (*env, "RAY_AUTH_TOKEN_PATH")}
    os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
    os.environ.update(env)
    constants: Any = getattr(getattr(ray, "_private", None), "ray_constants", None)
    cluster = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    try:
        if cluster is not None:
            constants.ENABLE_RAY_CLUSTER = False
        if "RAY_AUTH_MODE" in env:
            _refresh_ray_config()
        # address="local": a new Ray, never one found running on this machine (`ray start`)
        ray.init(address="local", num_cpus=num_cpus, _node_ip_address="127.0.0.1", **opts)
    finally:
        if cluster is not None:
            constants.ENABLE_RAY_CLUSTER = cluster
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _refresh_ray_config() -> None:
    """Make this process's Ray read ``RAY_AUTH_MODE`` again (its config is read once, maybe at an
    earlier import), as Ray's own ``_enable_token_auth`` does."""
    try:
        from ray._raylet import Config  # type: ignore[attr-defined]

        Config.initialize("")
    except (ImportError, AttributeError):
        pass


def _attempt() -> int:
    """Which run of the current task this is (1: the first; 2: the first retry after its worker
    died), from Ray's own count; 1 where this Ray does not say."""
    try:
        import ray

        return int(ray._private.worker.global_worker.core_worker.get_current_task_attempt_number()) + 1
    except Exception:  # noqa: BLE001 - a Ray without the call: the retry goes uncounted, the result stands
        return 1


def _task(fn: Callable[[Any], Any], job: Any, handed: dict[str, str]) -> tuple[Any, TaskError | None, int]:
    worker_setup(handed)
    attempt = _attempt()
    value, error = call(fn, job)
    return value, error, attempt


class RayExecutor(Executor):
    """Jobs as Ray tasks (one CPU each). ``address`` joins a running cluster (``auto``: the one
    this job runs in); without it a local Ray starts with ``workers`` CPUs (default: this
    machine's) and stops at ``close``. A Ray already started in this process is used as it is."""

    name = "ray"

    def __init__(self, *, workers: int | None = None, address: str | None = None, max_retries: int = 3) -> None:
        super().__init__()
        # a cluster on this machine's loopback (ray start --head --node-ip-address 127.0.0.1) is
        # joined as a local one: Ray would otherwise swap 127.0.0.1 for the machine's address
        local = address is None or _loopback(address)
        self.ray = ray = import_ray(local=local)
        self.address = address
        self.max_retries = max_retries
        self._started = False
        self._pending: dict[Any, int] = {}
        if not ray.is_initialized():
            self._start(ray, address, workers, local)
        self.workers = int(ray.cluster_resources().get("CPU", 0)) or (workers or 1)

    def _start(self, ray: Any, address: str | None, workers: int | None, local: bool) -> None:
        """Start a local Ray or join the cluster at ``address``, Ray's switches (``_driver_env``)
        set for the start only (the processes of a local Ray take them at their start), and what
        ``ray.init`` sets in this process undone (its ``PYTHONBREAKPOINT`` hook: the host's own
        ``breakpoint()`` stays as it was)."""
        with kept(), scoped(default=_driver_env(local)):
            import logging

            opts: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                    "logging_level": logging.ERROR, "configure_logging": True}
            try:
                if address:
                    _reachable(address)
                    if local:  # this machine's node is the cluster's loopback one
                        opts["_node_ip_address"] = "127.0.0.1"
                    ray.init(address=address, **opts)
                else:
                    start_local_ray(ray, workers or os.cpu_count() or 1, **opts)
            except (ConnectionError, RuntimeError, ValueError) as e:
                where = f"the Ray cluster at {address}" if address else "a local Ray"
                raise UsageError(f"cannot start or join {where}: {e}",
                                 hint="check --ray-address (host:port of the head node, or auto inside a Ray "
                                      "job); without it a local Ray starts on this machine") from None
        self._started = True

    def run(self, fn: Callable[[Any], Any], jobs: Sequence[Any]) -> Iterator[Outcome]:
        ray = self.ray
        remote = ray.remote(num_cpus=1, max_retries=self.max_retries, retry_exceptions=False)(_task)
        fn_ref = ray.put(fn)
        handed_ref = ray.put(handed())  # what the workers take over (the notes said): not the environment
        limit = 4 * max(1, self.workers)
        nxt = 0
        pending = self._pending
        while nxt < len(jobs) or pending:
            while nxt < len(jobs) and len(pending) < limit:
                pending[remote.remote(fn_ref, jobs[nxt], handed_ref)] = nxt
                nxt += 1
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                i = pending.pop(ref)
                try:
                    value, error, attempt = ray.get(ref)
                except ray.exceptions.RayError as e:  # the worker died past its retries, or OOM
                    self.retries += self.max_retries
                    yield Outcome(i, None, TaskError("WorkerDied", _ray_why(e)), self.max_retries + 1)
                    continue
                self.retries += attempt - 1
                yield Outcome(i, value, error, attempt)

    def cancel(self) -> None:
        for ref in list(self._pending):
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - already finished or gone
                pass
        self._pending.clear()

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()
            self._started = False


def _loopback(address: str) -> bool:
    host = address.rpartition(":")[0].strip("[]") if ":" in address else address
    return host in ("localhost", "::1") or host.startswith("127.")


def _reachable(address: str, timeout: float = 5.0) -> None:
    """A ``host:port`` address answers a TCP connect within ``timeout`` s, or ``UsageError``:
    ``ray.init`` itself would retry a wrong address for minutes. ``auto`` and ``ray://``
    addresses are left to Ray."""
    import socket

    if address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(f"--ray-address {address!r} is not HOST:PORT",
                         hint="give the head node's GCS address (e.g. 10.0.0.5:6379), or auto inside a Ray job")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise UsageError(f"no Ray cluster answers at {address} ({e.strerror or type(e).__name__})",
                         hint="check the head node's address and port (ray status on the head node), "
                              "or drop --ray-address to start a local Ray") from None


def _ray_why(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return f"{type(e).__name__}: {first[:300]}"
