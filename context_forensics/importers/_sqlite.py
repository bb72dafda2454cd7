"""SQLite logs opened read-only and bounded: the file's magic bytes, a read-only (or immutable)
connection whose work is capped, its tables, and a sniff that opens, asks and closes.

An SQLite file is a program as much as data: a view can be an endless recursive CTE, a virtual
table or a virtual generated column computes what it returns. So every SQLite input is read
through ``open_sqlite_readonly``, which

- opens it read-only (``mode=ro``; ``immutable=1`` when a WAL file in a read-only folder refuses
  that), so nothing is ever written to it;
- caps the work: a progress handler counts SQLite's virtual-machine steps and stops the reading
  after ``WORK_PER_BYTE`` steps per byte of the file (``WORK_FLOOR`` at least); reading a real log
  takes far less (each row is a few dozen steps), so only a file that computes without end
  reaches it, and it ends as the file's clear error (``SQLiteBudgetError``);
- caps a single value at the file's size (``SQLITE_LIMIT_LENGTH``): a stored value cannot be
  larger, only a computed one can;
- honours Ctrl-C: SQLite runs in C, where Python's SIGINT handler cannot run, but the progress
  handler is Python and runs it; the statement stops and ``KeyboardInterrupt`` is raised again
  to the caller (the CLI's "interrupted", exit 130; the store's transaction is rolled back);

and ``sqlite_tables`` lists stored tables only: views, virtual tables and tables with virtual
generated columns (``sqlite_computed``) are never read as logs. An importer whose layout matches
only through such an object claims the file and fails it with ``computed_error`` ("X is a view;
ctxf reads stored tables only"), so a view-only store is neither read nor passed over silently.
Temporary storage stays bounded by what ctxf's own queries sort: at most the rows of one stored
table, so a multiple of the file's size.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

from ..errors import InputError

SQLITE_MAGIC = b"SQLite format 3\x00"
# What reading an SQLite log can raise: SQLite's errors, and a corrupt file's error message that
# is not UTF-8 (the sqlite3 module fails to decode the message itself).
SQLITE_ERRORS = (sqlite3.Error, UnicodeDecodeError)

# The work budget of one SQLite input, in SQLite virtual-machine steps (sorting's comparisons are
# not steps). Reading a log costs well under 1 step per byte of the file (measured: the test
# fixtures, a 15 MB table of 100,000 rows 0.1, a 3.9 MB Agents SDK store of 2,000 sessions 0.2),
# and up to ~60 where a reader looks rows up by key in a table without an index; 500 per byte
# leaves a margin for that, and the floor lets a small file's schema queries run. A query that
# computes (1.4 M steps/s for rows of 1,000 characters, ~100 M for simple ones) ends in a few
# seconds on a small file.
WORK_PER_BYTE = 500
WORK_FLOOR = 5_000_000
TICK = 10_000  # steps between two calls of the progress handler
LENGTH_SLACK = 65_536  # bytes a value may exceed the file by (record headers)


class SQLiteBudgetError(InputError):
    """An SQLite input used up its work budget (a view or table that computes without end)."""


class _Guard:
    __slots__ = ("path", "size", "budget", "used", "exhausted")

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size
        self.budget = max(WORK_FLOOR, WORK_PER_BYTE * size)
        self.used = 0
        self.exhausted = False

    def tick(self) -> int:
        # Python's SIGINT handler runs on entry to this function: a Ctrl-C raises here, the
        # callback fails, and SQLite stops the statement ("interrupted"); _translate re-raises it.
        self.used += TICK
        if self.used > self.budget:
            self.exhausted = True
            return 1
        return 0

    def translate(self, e: BaseException) -> BaseException:
        if self.exhausted:
            return SQLiteBudgetError(
                f"reading stopped after {self.used:,} SQLite steps, the budget of a {self.size:,}-byte "
                f"file ({WORK_PER_BYTE:,} per byte, {WORK_FLOOR:,} at least): a query computes far more "
                f"than the file stores",
                where=str(self.path),
                hint="the file is not a log ctxf reads (a view or computed table that never ends?)",
            )
        if isinstance(e, sqlite3.OperationalError) and str(e) == "interrupted":
            return KeyboardInterrupt()
        return e


class _Cursor(sqlite3.Cursor):
    """A cursor whose SQLite "interrupted" becomes the budget's error or the Ctrl-C it was."""

    def _guard(self) -> _Guard:
        conn = self.connection
        assert isinstance(conn, _Connection)  # open_sqlite_readonly's connection makes every _Cursor
        return conn.guard

    def execute(self, sql: str, parameters: Any = (), /) -> _Cursor:
        try:
            return super().execute(sql, parameters)
        except sqlite3.OperationalError as e:
            raise self._guard().translate(e) from None

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except sqlite3.OperationalError as e:
            raise self._guard().translate(e) from None

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.OperationalError as e:
            raise self._guard().translate(e) from None

    def fetchmany(self, size: int | None = None) -> list[Any]:
        try:
            return super().fetchmany(self.arraysize if size is None else size)
        except sqlite3.OperationalError as e:
            raise self._guard().translate(e) from None

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.OperationalError as e:
            raise self._guard().translate(e) from None


class _Connection(sqlite3.Connection):
    guard: _Guard

    def cursor(self, factory: Any = _Cursor) -> Any:
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        return self.cursor().execute(sql, parameters)


def _input_size(path: Path) -> int:
    size = 0
    for p in (path, path.with_name(path.name + "-wal")):  # a WAL database's rows may be in its -wal
        try:
            size += p.stat().st_size
        except OSError:
            pass
    return size


def open_sqlite_readonly(path: Path) -> sqlite3.Connection:
    """Open an SQLite log read-only and bounded (see the module docstring); a WAL database in a
    read-only directory needs ``immutable=1``."""
    uri = path.resolve().as_uri()
    try:
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, factory=_Connection)
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except SQLITE_ERRORS:
        conn = sqlite3.connect(f"{uri}?immutable=1", uri=True, factory=_Connection)
    guard = _Guard(path, _input_size(path))
    conn.guard = guard
    conn.set_progress_handler(guard.tick, TICK)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, guard.size + LENGTH_SLACK)
    conn.row_factory = sqlite3.Row
    # Text that is not UTF-8 reads as U+FFFD, as in every other log, instead of failing the
    # whole database ("Could not decode to UTF-8 column").
    conn.text_factory = _text
    return conn


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def sniff_sqlite(path: Path, head: bytes, accept: Callable[[sqlite3.Connection], bool]) -> bool:
    """Whether ``path`` is an SQLite database that ``accept`` takes (opened read-only, closed after)."""
    if not head.startswith(SQLITE_MAGIC):
        return False
    try:
        conn = open_sqlite_readonly(path)
        try:
            return accept(conn)
        finally:
            conn.close()
    except (*SQLITE_ERRORS, SQLiteBudgetError):
        return False


def _objects(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    return [(r[0], r[1], r[2] or "") for r in conn.execute(
        "SELECT name, type, sql FROM sqlite_master WHERE type IN ('table', 'view') "
        "AND name NOT LIKE 'sqlite_%' ORDER BY name"
    )]


def sqlite_computed(conn: sqlite3.Connection) -> dict[str, str]:
    """Objects that look like tables but compute their rows, by name: what each is ("a view",
    "a virtual table", "a table with a virtual generated column 'x'"). ctxf never reads them."""
    out: dict[str, str] = {}
    for name, kind, sql in _objects(conn):
        if kind == "view":
            out[name] = "a view"
        elif sql.lstrip()[:14].upper() == "CREATE VIRTUAL":
            out[name] = "a virtual table"
        else:
            try:
                cols = conn.execute(f"PRAGMA table_xinfo({quote_name(name)})").fetchall()
            except SQLITE_ERRORS:
                continue
            generated = [c[1] for c in cols if c[6] == 2]  # hidden = 2: VIRTUAL generated (3: STORED)
            if generated:
                out[name] = f"a table with a virtual generated column {generated[0]!r}"
    return out


def sqlite_tables(conn: sqlite3.Connection) -> list[str]:
    """User tables that store their rows, by name (SQLite's own ``sqlite_*`` tables, views,
    virtual tables and tables with virtual generated columns left out)."""
    computed = sqlite_computed(conn)
    return [name for name, kind, _ in _objects(conn) if kind == "table" and name not in computed]


def sqlite_names(conn: sqlite3.Connection) -> list[str]:
    """Every user table and view by name, computed or not: what a sniffer matches a layout on,
    so that a layout made of views is claimed and refused by ``computed_error``."""
    return [name for name, _, _ in _objects(conn)]


def computed_error(conn: sqlite3.Connection, names: Iterable[str], path: Path, layout: str) -> InputError | None:
    """The file's error when one of ``names`` (the layout ``layout`` needs) is computed."""
    computed = sqlite_computed(conn)
    for name in names:
        if name in computed:
            return InputError(
                f"{name!r} is {computed[name]}; ctxf reads stored tables only, so this is not read "
                f"as {layout}",
                where=str(path),
                hint="a view or computed table can run without end; export its rows into a table "
                     "(CREATE TABLE t AS SELECT ... with a LIMIT) and ingest that",
            )
    return None


def table_columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """The column names of ``table``."""
    return {r[1] for r in conn.execute(f"PRAGMA table_info({quote_name(table)})")}


def quote_name(name: str) -> str:
    """An SQL identifier, quoted."""
    return '"' + name.replace('"', '""') + '"'


class SessionRows:
    """Rows ordered by their first column (a session id), taken one session at a time in id order: an
    importer walks a store's sessions and their rows side by side in one scan of each table, where a
    query per session would scan a table without an index again each time (the work budget)."""

    def __init__(self, rows: Iterable[Any]) -> None:
        self.rows = iter(rows)
        self.head: Any = next(self.rows, None)

    def take(self, key: str, ctx: Any, orphan: str) -> list[Any]:
        out = []
        while self.head is not None and str(self.head[0]) <= key:
            if str(self.head[0]) == key:
                out.append(self.head)
            else:
                ctx.skip(orphan)  # a row whose session is not in the session table
            self.head = next(self.rows, None)
        return out

    def rest(self, ctx: Any, orphan: str) -> None:
        while self.head is not None:
            ctx.skip(orphan)
            self.head = next(self.rows, None)


T = TypeVar("T")


def read_store(path: Path, tables: Iterable[str], layout: str, read: Callable[[sqlite3.Connection], Iterator[T]],
               agent: str) -> Iterator[T]:
    """What ``read`` yields from the SQLite store at ``path`` (opened read-only and bounded, closed
    after), once ``tables`` are stored tables: a layout made of views is refused (``computed_error``),
    a missing table and SQLite's own errors are the file's clear ``InputError``."""
    try:
        conn = open_sqlite_readonly(path)
    except SQLITE_ERRORS as e:
        raise InputError(f"cannot open SQLite database: {e}", where=str(path)) from None
    try:
        names = list(tables)
        refused = computed_error(conn, names, path, layout)
        if refused:
            raise refused
        stored = set(sqlite_tables(conn))
        missing = [t for t in names if t not in stored]
        if missing:
            raise InputError(f"no {missing[0]!r} table", where=str(path), hint=f"not {layout}")
        yield from read(conn)
    except SQLITE_ERRORS as e:
        raise InputError(f"cannot read {layout}: {e}", where=str(path),
                         hint=f"the database may be corrupt or not written by {agent}") from None
    finally:
        conn.close()
