"""The store's SQLite connection: opening it (read-only stores), the write lock and its wait,
the notes said once, checkpoints off the writer's path (``base.StoreFile`` uses them).

- Busy: a write waits for another process's lock quietly for a moment (``QUIET_WAIT``:
  contention between audit workers resolves in milliseconds), then says on stderr that it is
  waiting, up to the busy timeout (``$CTXF_BUSY_TIMEOUT`` seconds, default 30, or
  ``Store.open(busy_timeout=)``), then fails with ``StoreBusyError`` (exit 1). A cache write
  waits at most ``CACHE_WAIT`` and is then skipped: a cache never costs a result.
- Read-only: a store whose file or folder is not writable is opened with ``mode=ro`` (or
  ``immutable=1`` when SQLite cannot create its ``-shm`` file and no ``-wal`` is pending):
  reading commands work without caching and say so once; writing ones fail with
  ``StoreReadOnlyError``.
- Durability: WAL with ``synchronous=NORMAL``. A commit is atomic and survives the writer's
  process being killed at any point (SIGKILL trials: ``bench/sigkill.py``); only a power loss
  or OS crash may lose the last commits before a checkpoint, never the file's consistency.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from ..environ import hand_down, handed_down
from ..errors import UsageError

DEFAULT_BUSY_TIMEOUT = 30.0
BUSY_ENV = "CTXF_BUSY_TIMEOUT"
QUIET_WAIT = 1.0  # seconds a write waits for a lock before saying so (at most a quarter of the timeout)
CACHE_WAIT = 1.0  # seconds a cache write waits for a lock before it is skipped
CACHE_BACKOFF = 10.0  # after a skipped cache write, the next ones are skipped without waiting for this long
CHECKPOINT_BYTES = 16 << 20  # a WAL past this after a commit is checkpointed in the background
PAGE_SIZE = 16384  # of a new store (SQLite's default is 4096)

# SQLite's primary result codes (the low byte of an extended code).
_BUSY, _LOCKED, _READONLY, _CORRUPT, _CANTOPEN, _NOTADB = 5, 6, 8, 11, 14, 26

Notice = Callable[[str], None]
# The notes said, handed down to the workers the executors start (audit --workers): said once per
# run. Not an environment variable: a library leaves its host's environment as it found it.
_SHOWN = "notices-shown"
_SEP = "\x1f"  # between the keys in the value


def stderr_notice(text: str) -> None:
    """Say ``text`` on stderr as a note (the default ``Store.open(notice=)``)."""
    print(f"note: {text}", file=sys.stderr, flush=True)


def notice_once(notice: Notice, key: str, text: str) -> None:
    """Call ``notice(text)`` unless this process (or the one that started it as a worker) already
    did for ``key``."""
    shown = (handed_down(_SHOWN) or "").split(_SEP)
    if key in shown:
        return
    hand_down(_SHOWN, _SEP.join(filter(None, [*shown, key])))
    notice(text)


def busy_timeout_from_env() -> float:
    raw = os.environ.get(BUSY_ENV)
    if raw is None or raw.strip() == "":
        return DEFAULT_BUSY_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise UsageError(f"${BUSY_ENV} is {raw!r}, not a number of seconds",
                         hint=f"e.g. {BUSY_ENV}=60, or unset it for the default ({DEFAULT_BUSY_TIMEOUT:g} s)")
    return value


def _code(e: sqlite3.Error) -> int:
    return (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF


def is_busy(e: sqlite3.Error) -> bool:
    return _code(e) in (_BUSY, _LOCKED) or "database is locked" in str(e)


def is_read_only(e: sqlite3.Error) -> bool:
    return _code(e) == _READONLY or "readonly database" in str(e)


def is_corrupt(e: sqlite3.Error) -> bool:
    return _code(e) in (_CORRUPT, _NOTADB) or "malformed" in str(e)


def _wal(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def writable(path: Path) -> bool:
    """Whether the store at ``path`` (existing) can be written: the file, and its folder for the
    ``-wal`` and ``-shm`` files. (Root passes any permission check: a read-only mount still fails.)"""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    """An autocommit connection (transactions are explicit: see ``Store.transaction``)."""
    if not read_only:
        return sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    uri = path.resolve().as_uri()
    wal, shm = _wal(path), path.with_name(path.name + "-shm")
    if not writable(path) and not shm.exists() and not (wal.exists() and wal.stat().st_size > 0):
        # A store nobody may write (but root) that no connection has open in WAL mode (it would
        # hold a -shm file), with nothing pending: read it as immutable. ``mode=ro`` would create the -shm and
        # -wal files (in a folder the user may write, beside a 0444 store), with the store's 0444 mode: a
        # change on disk, and one that later refuses the owner's own writes to the store.
        return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, isolation_level=None, check_same_thread=False)
    conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as e:
        conn.close()
        # SQLite could not open or create the -shm file (a read-only folder: SQLITE_CANTOPEN,
        # or SQLITE_READONLY_DIRECTORY / _CANTINIT, which SQLite 3.22+ says, as a user who is
        # not root meets it): with nothing pending in a -wal file, nobody can be writing it,
        # and it can be read as immutable.
        if _code(e) not in (_CANTOPEN, _READONLY) or (wal.exists() and wal.stat().st_size > 0):
            raise
    return sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None, check_same_thread=False)


def take_lock(conn: sqlite3.Connection, *, timeout: float, quiet: float, restore: float,
              on_wait: Callable[[], None] | None = None) -> bool:
    """``BEGIN IMMEDIATE``, waiting up to ``timeout`` seconds for another process's write lock;
    ``on_wait()`` once it has waited ``quiet`` seconds. False when the store is still locked.

    The wait is a loop of short tries (SQLite's busy handler polls the same way), so Ctrl-C
    interrupts it at once instead of after the whole timeout. The connection's busy timeout is
    ``restore`` seconds after.
    """
    start = time.monotonic()
    deadline, said = start + timeout, False
    try:
        while True:
            left = deadline - time.monotonic()
            conn.execute(f"PRAGMA busy_timeout = {int(max(0.0, min(_TRY, left)) * 1000)}")
            try:
                conn.execute("BEGIN IMMEDIATE")
                return True
            except sqlite3.OperationalError as e:
                if not is_busy(e):
                    raise
            now = time.monotonic()
            if now >= deadline:
                return False
            if not said and on_wait is not None and now - start >= quiet:
                on_wait()
                said = True
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(restore * 1000)}")


_TRY = 0.1  # seconds of one try of take_lock


def enable_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """``journal_mode = wal``, retried while another process holds the file: SQLite answers
    this switch with SQLITE_BUSY at once rather than through the busy handler (processes
    opening a new store at once race for it)."""
    deadline, pause = time.monotonic() + timeout, 0.002
    while True:
        try:
            conn.execute("PRAGMA journal_mode = wal").fetchall()
            return
        except sqlite3.OperationalError as e:
            if not is_busy(e) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(2 * pause, 0.1)


class Checkpointer:
    """Passive checkpoints off the writer's path.

    The writing connection runs with ``wal_autocheckpoint = 0``, so a commit returns as soon as
    its frames are in the WAL instead of copying them into the database first. After a commit
    leaves the WAL past ``threshold`` bytes, a thread with its own connection runs a passive
    checkpoint (it never waits for a lock, and a writer is never blocked by it) while the
    writer goes on with the next file. ``wait()`` joins it; closing the last connection folds
    in what is left, as SQLite always does.
    """

    def __init__(self, path: Path, threshold: int | None = None) -> None:
        self.path = path
        self.threshold = CHECKPOINT_BYTES if threshold is None else threshold
        self._thread: threading.Thread | None = None
        self.runs = 0
        self.seconds = 0.0

    def after_commit(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return  # the running checkpoint takes what it can; the next commit asks again
        try:
            size = _wal(self.path).stat().st_size
        except OSError:
            return
        if size < self.threshold:
            return
        self._thread = threading.Thread(target=self._run, name="ctxf-checkpoint", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        t = time.perf_counter()
        try:
            conn = sqlite3.connect(str(self.path), isolation_level=None, timeout=0)
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                conn.close()
        except sqlite3.Error:
            return  # an optimization only: the next commit, or the last close, checkpoints
        self.runs += 1
        self.seconds += time.perf_counter() - t

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
