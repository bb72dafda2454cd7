"""The token-count cache: token sums by (content hash, scheme key), in memory and in the store.

What is cached is the sum of a message's tokenized strings under one scheme
(``<tokenizer>/<chat format>/v<formula>``, see ``counter.py``), in the store's
``token_counts`` table, so a session is tokenized once whatever replays it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:  # pragma: no cover
    from ..store.db import Store


def _has_json_each() -> bool:
    """Whether this process's SQLite has ``json_each`` (built in from 3.38; optional before)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("SELECT count(*) FROM json_each('[]')").fetchone()
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    return True


_JSON_EACH = _has_json_each()


class TokenCache:
    """Token sums by (content hash, scheme key): in memory, and in the store when there is one.

    Reads and writes go in batches, one query per batch of hashes, never one per message.
    """

    CHUNK = 500

    def __init__(self, store: Store | None = None) -> None:
        self.store = store
        self.memory: dict[tuple[str, str], int] = {}

    def get_many(self, hashes: Iterable[str], key: str) -> dict[str, int]:
        want = list(dict.fromkeys(hashes))
        memory = self.memory
        found = {h: memory[(h, key)] for h in want if (h, key) in memory} if memory else {}
        missing = [h for h in want if h not in found] if found else want
        if missing and self.store is not None:
            conn = self.store.db.conn
            for i in range(0, len(missing), self.CHUNK):
                chunk = missing[i : i + self.CHUNK]
                rows = conn.execute(
                    f"SELECT hash, count FROM token_counts WHERE tokenizer = ? "
                    f"AND hash IN ({','.join('?' * len(chunk))})",
                    [key, *chunk],
                ).fetchall()
                for h, c in rows:
                    found[h] = int(c)
                    self.memory[(h, key)] = int(c)
        return found

    def put_many(self, counts: Mapping[str, int], key: str) -> None:
        if not counts:
            return
        counts = {h: int(c) for h, c in counts.items()}
        memory = self.memory
        for h, c in counts.items():
            memory[(h, key)] = c
        if self.store is None:
            return
        # A read-only or busy store only loses the persistent cache, never the count.
        if _JSON_EACH:  # one statement over a JSON object: about twice as fast as a row per hash
            self.store.write_rows("INSERT OR REPLACE INTO token_counts (hash, tokenizer, count) "
                                  "SELECT key, ?, value FROM json_each(?)", [(key, orjson.dumps(counts).decode())])
            return
        rows = [(h, key, c) for h, c in counts.items()]
        self.store.write_rows("INSERT OR REPLACE INTO token_counts (hash, tokenizer, count) VALUES (?, ?, ?)", rows)
