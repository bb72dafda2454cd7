"""``StoreFile``: the store's SQLite file opened, migrated, and written safely.

Data writes (an ingested file, ``ctxf rm``) go through ``transaction()``: refused on a
read-only store, on one that fails its integrity check, or after waiting out another process's
lock, each with a ``StoreError`` naming the store and the fix. Cache writes (token counts,
embeddings, replays) go through ``write_rows``: skipped, with a note said once, when the store
refuses them, so a cache never costs a result. ``db.Store`` adds the sessions and messages.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import sqlite_utils

from ..errors import StoreBusyError, StoreCorruptError, StoreError, StoreReadOnlyError
from . import connection as conn_
from .files import create_private_file, make_private_dir
from .migrations import check as check_schema, migrate, read_state

S = TypeVar("S", bound="StoreFile")

# Per store file: until when cache writes are skipped without waiting (a lock held by a long
# ingest would otherwise cost every cache write of an audit its wait).
_cache_skipped_until: dict[str, float] = {}


class StoreFile:
    """An open store: its connection (``db``), file (``path``) and write discipline."""

    def __init__(self, db: sqlite_utils.Database, path: Path | None, max_sessions: int | None = None, *,
                 read_only: bool = False, busy_timeout: float | None = None, notice: conn_.Notice | None = None):
        self.db = db
        db.conn.row_factory = sqlite3.Row  # the store reads rows by column name
        self.path = path
        self.max_sessions = max_sessions
        self.read_only = read_only
        self.busy_timeout = conn_.busy_timeout_from_env() if busy_timeout is None else float(busy_timeout)
        self.notice = notice or conn_.stderr_notice
        self._integrity: StoreCorruptError | bool | None = None  # checked before the first data write
        self._waited_out = False  # a write already waited the whole timeout: the next ones do not
        self._checkpointer: conn_.Checkpointer | None = None

    @classmethod
    def open(cls: type[S], path: str | Path, *, max_sessions: int | None = None, read_only: bool | None = None,
             busy_timeout: float | None = None, notice: conn_.Notice | None = None) -> S:
        """Open the store at ``path`` (``":memory:"`` for one in memory), creating and migrating it.

        ``read_only``: None opens read-only when the file or its folder is not writable; True
        always (SQLite ``mode=ro``). ``busy_timeout``: seconds a write waits for another
        process's lock (default ``$CTXF_BUSY_TIMEOUT``, else 30). ``notice``: where notes go
        (waiting for a lock, working without caching); default stderr.
        """
        timeout = conn_.busy_timeout_from_env() if busy_timeout is None else float(busy_timeout)
        if str(path) == ":memory:":
            store = cls(sqlite_utils.Database(sqlite3.connect(":memory:", isolation_level=None)), None,
                        max_sessions, busy_timeout=timeout, notice=notice)
            store._setup()
            return store
        p = Path(path)
        try:
            if not p.exists() and not read_only:
                make_private_dir(p.parent)  # 0700 for the folders it creates, 0600 for the file
                create_private_file(p)  # SQLite gives -wal and -shm the database's mode
            ro = not conn_.writable(p) if read_only is None else read_only
            store = cls._connect(p, ro, max_sessions, timeout, notice)
            if store._found_read_only:  # SQLite could not write it after all (a read-only mount)
                store.close()
                if read_only is False:
                    store._refuse_read_only()
                store = cls._connect(p, True, max_sessions, timeout, notice)
        except StoreError:
            raise
        except sqlite3.DatabaseError as e:
            if isinstance(e, sqlite3.OperationalError) and conn_.is_busy(e):
                raise StoreBusyError(
                    f"cannot open the store: it is locked by another process (waited {timeout:g} s)",
                    where=str(path),
                    hint=f"retry when the other ctxf has finished, or wait longer with ${conn_.BUSY_ENV}=SECONDS",
                ) from None
            raise StoreError(
                f"cannot open the store: {e}",
                where=str(path),
                hint="point --db (or storage.path in the config) at a ctxf SQLite file or a new path",
            ) from None
        except OSError as e:
            raise StoreError(f"cannot create the store: {e.strerror}", where=str(path)) from None
        return store

    @classmethod
    def _connect(cls: type[S], p: Path, ro: bool, max_sessions: int | None, timeout: float,
                 notice: conn_.Notice | None) -> S:
        store = cls(sqlite_utils.Database(conn_.connect(p, read_only=ro)), p, max_sessions, read_only=ro,
                    busy_timeout=timeout, notice=notice)
        try:
            store._setup()
        except BaseException:
            store.db.conn.close()
            raise
        return store

    _found_read_only = False  # setup met SQLITE_READONLY on a connection opened for writing

    def _setup(self) -> None:
        conn, where = self.db.conn, str(self.path or ":memory:")
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        if self.read_only:
            state = read_state(self.db)
            check_schema(state, where)
            if state.pending:
                raise StoreReadOnlyError(
                    f"this store is read-only and needs migrations {', '.join(state.pending)} "
                    "(it was written by an older ctxf), which write to it",
                    where=where,
                    hint="open it once with write access to upgrade it, or copy it somewhere writable",
                )
            self._say_read_only()
            return
        try:
            check_schema(read_state(self.db), where)  # before anything is written, WAL mode included
            if self.path is not None and conn.execute("PRAGMA page_count").fetchone()[0] == 0:
                # A new store: pages of 16 KiB rather than 4 KiB (bench/ingest.py: its part of an
                # ingest about a fifth faster, the file a seventh smaller, quick_check twice as fast).
                # Only before its first write; an existing store keeps its own.
                conn.execute(f"PRAGMA page_size = {conn_.PAGE_SIZE}")
            if self.path is not None and self.db.journal_mode != "wal":
                conn_.enable_wal(conn, self.busy_timeout)
            conn.execute("PRAGMA foreign_keys = ON")
            # WAL with synchronous=NORMAL: a commit is atomic and survives a killed process (the
            # module docstring of connection.py says what a power loss can do).
            conn.execute("PRAGMA synchronous = NORMAL")
            if self.path is not None:
                # Commits do not copy the WAL into the database: a thread does, off the writer's
                # path (connection.Checkpointer); a WAL reset past this size is truncated to it.
                conn.execute("PRAGMA wal_autocheckpoint = 0")
                conn.execute(f"PRAGMA journal_size_limit = {4 * conn_.CHECKPOINT_BYTES}")
                self._checkpointer = conn_.Checkpointer(self.path)
            migrate(self.db, where=where, begin=lambda: self._lock("migrate the store"))
        except sqlite3.OperationalError as e:
            if not conn_.is_read_only(e):
                raise
            self._found_read_only = True
            self.read_only = True

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.wait()
        self.db.conn.close()

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ writing

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One explicit transaction of data (an ingested file, ``ctxf rm``); rolled back on any
        exception (KeyboardInterrupt too).

        Refused with a ``StoreError`` naming the store and the fix when it is read-only
        (``StoreReadOnlyError``), fails SQLite's ``quick_check`` (``StoreCorruptError``: checked
        once, before the first data write) or stays locked by another process past the busy
        timeout (``StoreBusyError``, after a note on stderr saying it waits).
        """
        self._refuse_read_only()
        self._check_integrity()
        self._lock("write to the store")
        try:
            yield
        except BaseException as e:
            if self.db.conn.in_transaction:
                self.db.execute("ROLLBACK")
            if isinstance(e, sqlite3.OperationalError) and conn_.is_read_only(e):
                self.read_only = True
                self._refuse_read_only()
            raise
        self._commit()

    def _commit(self) -> None:
        self.db.execute("COMMIT")
        if self._checkpointer is not None:
            self._checkpointer.after_commit()

    def _lock(self, what: str) -> None:
        """Take the write lock (``BEGIN IMMEDIATE``), waiting for another process's, with a note."""
        timeout = 0.0 if self._waited_out else self.busy_timeout

        def waiting() -> None:
            self.notice(f"store is locked by another process; waiting… (up to {timeout:g} s, "
                        f"${conn_.BUSY_ENV} sets it): {self.path}")

        if conn_.take_lock(self.db.conn, timeout=timeout, quiet=min(conn_.QUIET_WAIT, timeout / 4),
                           restore=self.busy_timeout, on_wait=waiting):
            return
        self._waited_out = True
        raise StoreBusyError(
            f"cannot {what}: it is locked by another process"
            + (f" (waited {self.busy_timeout:g} s)" if timeout else " (still, after the wait of an earlier write)"),
            where=str(self.path),
            hint=f"retry when the other ctxf (an ingest?) has finished, or wait longer with "
            f"${conn_.BUSY_ENV}=SECONDS; `fuser {self.path}` shows which process holds it",
        )

    def _refuse_read_only(self) -> None:
        if self.read_only:
            raise StoreReadOnlyError(
                "the store is read-only: nothing can be written to it",
                where=str(self.path),
                hint="give write access to the file and its folder (SQLite writes -wal and -shm files "
                "beside it), or give another store with --db",
            )

    def _say_read_only(self) -> None:
        conn_.notice_once(self.notice, f"read-only:{self._key}",
                          f"the store is read-only: working without caching (nothing is written to it): {self.path}")

    @property
    def _key(self) -> str:
        return str(self.path.resolve()) if self.path is not None else f"memory:{id(self)}"

    def _check_integrity(self) -> None:
        """``PRAGMA quick_check`` once, before the first data write (0.4-0.5 s on a 0.9 GB
        store, page cache warm: see bench/ingest.py); a store that fails it is never written into."""
        if self._integrity is True or self.path is None:
            return
        if isinstance(self._integrity, StoreCorruptError):
            raise self._integrity
        try:
            problems = [r[0] for r in self.db.conn.execute("PRAGMA quick_check").fetchall() if r[0] != "ok"]
        except sqlite3.DatabaseError as e:
            problems = [str(e)]
        if not problems:
            self._integrity = True
            return
        self._integrity = StoreCorruptError(
            f"the store fails SQLite's integrity check ({problems[0]}"
            + (f"; {len(problems) - 1} more problem(s)" if len(problems) > 1 else "") + "); nothing was written to it",
            where=str(self.path),
            hint="restore it from a backup, or re-ingest the logs into a new store (--db NEW.db); "
            f"`sqlite3 {self.path} .recover` may salvage its rows",
        )
        raise self._integrity

    def _cache_write(self, fn: Callable[[], object]) -> bool:
        """Run ``fn`` (cache rows: token counts, embeddings, replays) inside the caller's
        transaction, or in one of its own. False when the store refuses it (read-only, locked
        past ``CACHE_WAIT``): a cache may lose persistence, never a result. Says why once."""
        conn = self.db.conn
        try:
            if conn.in_transaction:  # inside a caller's transaction: join it
                fn()
                return True
            if self.read_only or not self._may_cache():
                return False
            wait = min(self.busy_timeout, conn_.CACHE_WAIT)
            if not conn_.take_lock(conn, timeout=wait, quiet=wait, restore=self.busy_timeout):
                self._cache_busy()
                return False
            try:
                fn()
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            self._commit()
        except sqlite3.OperationalError as e:
            if conn_.is_read_only(e):
                self.read_only = True
                self._say_read_only()
            elif conn_.is_busy(e):
                self._cache_busy()
            return False
        except sqlite3.DatabaseError as e:
            if conn_.is_corrupt(e):
                self._integrity = None
                self._check_integrity()
            raise
        return True

    def _may_cache(self) -> bool:
        return time.monotonic() >= _cache_skipped_until.get(self._key, 0.0)

    def _cache_busy(self) -> None:
        _cache_skipped_until[self._key] = time.monotonic() + conn_.CACHE_BACKOFF
        conn_.notice_once(self.notice, f"busy-cache:{self._key}",
                          f"the store is locked by another process: results are not cached for now "
                          f"(they are computed as usual): {self.path}")

    def write_rows(self, sql: str, rows: list[tuple]) -> bool:
        """``executemany`` of cache rows inside the caller's transaction, or in one of its own.

        Returns False when the store refuses the write (read-only, locked): callers use this
        for caches, which may lose persistence but never a result.
        """
        return self._cache_write(lambda: self.db.conn.executemany(sql, rows))

