"""The ``llm_logs`` importer: sniffs an llm ``logs.db`` and yields its sessions, both layouts."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ...errors import InputError
from ...records import Session
from .._sqlite import SQLITE_ERRORS, computed_error, open_sqlite_readonly, sniff_sqlite, sqlite_names, sqlite_tables
from ..base import ImportContext, Importer, register
from .database import LLM_TABLES, LogsDB, is_llm_logs
from .responses import legacy_sessions
from .threads import thread_session


@register
class LLMLogs(Importer):
    """simonw ``llm`` logs.db: one session per thread and per legacy conversation."""

    name = "llm_logs"
    description = "simonw llm logs.db (SQLite: conversations/responses, or threads/turns/messages)"
    extensions = (".db", ".sqlite", ".sqlite3")
    priority = 15

    def sniff(self, path: Path, head: bytes) -> bool:
        return sniff_sqlite(path, head, lambda conn: is_llm_logs(set(sqlite_names(conn))))

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        try:
            conn = open_sqlite_readonly(path)
            tables = set(sqlite_tables(conn))
            refused = computed_error(conn, sorted(LLM_TABLES), path, "an llm logs.db")
        except SQLITE_ERRORS as e:
            raise InputError(f"cannot open SQLite database: {e}", where=str(path)) from None
        if refused:
            conn.close()
            raise refused
        try:
            yield from sessions(LogsDB(conn, tables, self.name, ctx))
        except SQLITE_ERRORS as e:
            raise InputError(
                f"cannot read llm logs.db: {e}",
                where=str(path),
                hint="the database may be corrupt or from an unknown llm version",
            ) from None
        except IndexError as e:  # sqlite3.Row: "No item with that key", a column llm writes is missing
            raise InputError(
                f"cannot read llm logs.db: a table lacks a column llm writes ({e})",
                where=str(path),
                hint="the database may be corrupt or from an unknown llm version",
            ) from None
        finally:
            conn.close()


def sessions(db: LogsDB) -> Iterator[Session]:
    """Every session of the database: the threads first, then the legacy conversations no thread
    continues."""
    thread_ids: set[str] = set()
    if db.has("threads", "turns", "messages", "parts"):
        for t in db.q("select * from threads order by datetime_utc, id"):
            thread_ids.add(t["id"])
            session = None
            with db.ctx.record("thread", index=t["id"]):
                session = thread_session(db, t)
            if session is not None:
                yield session
    if db.has("responses", "conversations"):
        yield from legacy_sessions(db, thread_ids)
