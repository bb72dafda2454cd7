"""What the store tests share: a store's content without its timestamps (to compare two stores),
its consistency (no partial file), the bytes of its file, and small generated logs."""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
from pathlib import Path

# Every column but the ingest timestamps, which differ between two ingests of the same files.
_SESSION_COLUMNS = ("id, external_id, format, source, source_hash, title, model, models, started_at, task, "
                    "outcome, parent_id, message_count, step_count, usage_count, content_hash, metadata")
_FILE_COLUMNS = "hash, path, format, size, sessions, message_count, warnings, skipped"


def content(db: Path | str) -> dict[str, list[tuple]]:
    """The store's sessions, messages and file records, in a fixed order, without timestamps."""
    with sqlite3.connect(f"file:{Path(db).resolve()}?mode=ro", uri=True) as c:
        return {
            "sessions": c.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY id").fetchall(),
            "messages": c.execute("SELECT * FROM messages ORDER BY session_id, seq").fetchall(),
            "files": c.execute(f"SELECT {_FILE_COLUMNS} FROM files ORDER BY hash").fetchall(),
        }


def restricted(full: dict[str, list[tuple]], file_hashes: set[str]) -> dict[str, list[tuple]]:
    """The part of a store's ``content`` that the files with these hashes produced."""
    files = [f for f in full["files"] if f[0] in file_hashes]
    ids = {sid for f in files for sid in json.loads(f[4])}
    return {
        "sessions": [s for s in full["sessions"] if s[0] in ids],
        "messages": [m for m in full["messages"] if m[0] in ids],
        "files": files,
    }


def integrity(db: Path | str) -> list[str]:
    """``PRAGMA integrity_check``'s lines (``["ok"]`` for a sound file)."""
    try:
        with sqlite3.connect(f"file:{Path(db).resolve()}?mode=ro", uri=True) as c:
            return [r[0] for r in c.execute("PRAGMA integrity_check").fetchall()]
    except sqlite3.DatabaseError as e:
        return [str(e)]


def file_bytes(db: Path | str) -> str:
    """A digest of the database file itself (a store left as it was keeps it)."""
    return hashlib.blake2b(Path(db).read_bytes(), digest_size=16).hexdigest()


def write_sharegpt(path: Path, n_sessions: int, seed: int) -> None:
    """A ShareGPT JSON file of ``n_sessions`` short conversations, distinct per seed."""
    rng = random.Random(seed)
    words = "window token budget replay drift fact tool result summary constraint".split()
    convs = []
    for i in range(n_sessions):
        turns = [{"from": "human" if t % 2 == 0 else "gpt",
                  "value": f"{seed}-{i}-{t} " + " ".join(rng.choice(words) for _ in range(rng.randint(3, 30)))}
                 for t in range(rng.randint(2, 12))]
        convs.append({"id": f"s{seed}-{i}", "conversations": turns})
    path.write_text(json.dumps(convs))


def write_claude_code(path: Path, records: int, seed: int) -> None:
    """A linear Claude Code session of ``records`` records (user, assistant tool call, tool result)."""
    rng = random.Random(seed)
    words = "context window token eviction compaction summary tool result assistant user".split()
    sid = f"00000000-0000-4000-8000-{seed:012d}"
    parent = None
    with open(path, "w") as f:
        for n in range(1, records + 1):
            base = {"parentUuid": parent, "isSidechain": False, "type": "user", "sessionId": sid,
                    "timestamp": f"2026-01-01T00:{(n // 60) % 60:02d}:{n % 60:02d}.000Z",
                    "uuid": f"{seed:08d}-0000-4000-8000-{n:012d}"}
            if n % 3 == 1:
                rec = {**base, "message": {"role": "user", "content": " ".join(rng.choices(words, k=20))}}
            elif n % 3 == 2:
                rec = {**base, "type": "assistant", "message": {
                    "model": "claude-opus-4-6", "id": f"msg_{seed}_{n}", "role": "assistant",
                    "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "Bash",
                                 "input": {"command": "grep -rn " + rng.choice(words)}}],
                    "usage": {"input_tokens": 3, "output_tokens": 40, "cache_read_input_tokens": 10 * n}}}
            else:
                out = "\n".join(" ".join(rng.choices(words, k=12)) for _ in range(rng.randint(5, 30)))
                rec = {**base, "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{n - 1}", "content": out}]}}
            parent = base["uuid"]
            f.write(json.dumps(rec) + "\n")


# ---------------------------------------------------------------- process targets
# In this light module (the test modules import the CLI): a worker process imports it to find
# the function it runs.


def open_store_at_once(path: str, barrier, results) -> None:
    """Wait for the others at ``barrier``, open the store at ``path``, put "ok" or the error."""
    from context_forensics.store.db import Store

    barrier.wait()
    try:
        Store.open(path).close()
        results.put("ok")
    except BaseException as e:  # noqa: BLE001 - every failure is what the test counts
        results.put(f"{type(e).__name__}: {e}")


def ingest_into(db: str, paths: list[str], results) -> None:
    """Ingest ``paths`` into the store at ``db``; put the errors of the files that failed."""
    from context_forensics.store.db import Store
    from context_forensics.store.ingest import ingest_paths

    try:
        with Store.open(db) as store:
            report = ingest_paths(store, paths)
        results.put([f.error for f in report.files if f.status == "failed"])
    except BaseException as e:  # noqa: BLE001
        results.put([f"{type(e).__name__}: {e}"])
