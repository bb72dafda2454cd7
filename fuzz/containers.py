"""Mutations that keep a container readable and corrupt what it holds.

- zip (an Inspect ``.eval``): a member's JSON mutated, its deflate stream corrupted, its
  compression method or CRC patched, its encrypted flag set, a member dropped or duplicated, a
  small member that inflates to hundreds of MB;
- SQLite (an ``llm`` logs.db, a table of messages): a cell of the wrong type (a blob, invalid
  UTF-8 text, an integer past 64 bits, inf), parent links made into cycles, dangling
  references, rows, columns or tables removed, pages flipped or cut;
- YAML (a VCR cassette): the tree mutated (JSON bodies inside it too), a ``!!binary`` gzip body
  corrupted or made a bomb (64 MB - 1 GB), an alias bomb, deep flow nesting;
- folders (Claude Code, Codex, SWE-agent, OpenHands runs): one member mutated by its kind, a
  symlink back up (``loop -> ..``), a dangling link, a FIFO, a directory in a file's place.
"""

from __future__ import annotations

import gzip
import io
import os
import random
import shutil
import sqlite3
import struct
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any, Callable

from .mutate import (
    Mutant,
    apply_one,
    gzip_bomb,
    log_uniform,
    long_string,
    mutate_bytes,
    mutate_document,
    tree_mutations,
)

SQLITE_MAGIC = b"SQLite format 3\x00"
ZIP_MAGIC = b"PK\x03\x04"

# ---------------------------------------------------------------- zip


def _info(name: str) -> zipfile.ZipInfo:
    """A member header with a fixed date, so the same input is the same bytes on every run."""
    info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def _rebuild(members: list[tuple[zipfile.ZipInfo, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for info, data in members:
            z.writestr(_info(info.filename), data)
    return buf.getvalue()


def _member_spans(data: bytes) -> dict[str, tuple[int, int, int]]:
    """Per member: (local header offset, data offset, compressed size), and the central
    directory entry offset under key ``"cd:" + name``."""
    spans: dict[str, tuple[int, int, int]] = {}
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for info in z.infolist():
            off = info.header_offset
            n, e = struct.unpack("<HH", data[off + 26:off + 30])
            spans[info.filename] = (off, off + 30 + n + e, info.compress_size)
    i = data.find(b"PK\x01\x02")
    while i >= 0:
        n = struct.unpack("<H", data[i + 28:i + 30])[0]
        name = data[i + 46:i + 46 + n].decode("utf-8", "replace")
        spans["cd:" + name] = (i, 0, 0)
        i = data.find(b"PK\x01\x02", i + 4)
    return spans


_STREAMS: dict[int, tuple[bytes, int, int]] = {}


def _bomb_stream(mb: int) -> tuple[bytes, int, int]:
    """A raw deflate stream of a sample JSON holding an ``mb`` MB string: (stream, CRC, size).

    Built in well under a second: after a full flush the compressor starts afresh, so each 1 MB
    run of ``A`` compresses to the same ~1 KB and is repeated rather than compressed again.
    """
    if mb not in _STREAMS:
        head, tail = b'{"id": 1, "epoch": 1, "input": "', b'", "messages": [], "target": ""}'
        chunk = b"A" * (1 << 20)
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        start = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
        block = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
        end = c.compress(tail) + c.flush()
        crc = zlib.crc32(head)
        for _ in range(mb):
            crc = zlib.crc32(chunk, crc)
        crc = zlib.crc32(tail, crc)
        _STREAMS[mb] = (start + block * mb + end, crc, len(head) + mb * len(chunk) + len(tail))
    return _STREAMS[mb]


def _bomb(members: list[tuple[zipfile.ZipInfo, bytes]], mb: int) -> bytes:
    """The zip with its samples replaced by one member that inflates to ``mb`` MB: written
    stored (its deflate stream as the bytes), then its headers patched to say deflated."""
    stream, crc, size = _bomb_stream(mb)
    name = "samples/1_epoch_1.json"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for info, data in members:
            if not info.filename.startswith("samples/"):
                z.writestr(_info(info.filename), data)
        stored = _info(name)
        stored.compress_type = zipfile.ZIP_STORED
        z.writestr(stored, stream)
    out = bytearray(buf.getvalue())
    local = _member_spans(bytes(out))[name][0]
    central = _member_spans(bytes(out))["cd:" + name][0]
    struct.pack_into("<HHHI", out, local + 8, zipfile.ZIP_DEFLATED, 0, 0, crc)
    struct.pack_into("<I", out, local + 22, size)
    struct.pack_into("<H", out, central + 10, zipfile.ZIP_DEFLATED)
    struct.pack_into("<I", out, central + 16, crc)
    struct.pack_into("<I", out, central + 24, size)
    return bytes(out)


def mutate_zip(data: bytes, rng: random.Random, log: list[str], *, cap: int, donors: list[Any]) -> bytes:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            members = [(info, z.read(info)) for info in z.infolist()]
    except (zipfile.BadZipFile, OSError, zlib.error, EOFError):
        return mutate_bytes(data, rng, log)
    if not members:
        return mutate_bytes(data, rng, log)
    ops = ["member", "member", "member", "member", "deflate", "deflate", "method", "crc", "drop", "dup",
           "zero_tail", "bytes", "bomb", "encrypted", "encrypted"]
    op = rng.choice(ops)
    names = [i.filename for i, _ in members]
    jsons = [i for i, (info, _) in enumerate(members) if info.filename.endswith(".json")] or list(range(len(members)))
    target = rng.choice(jsons)
    name = names[target]
    if op == "member":
        info, raw = members[target]
        sub: list[str] = []
        members[target] = (info, mutate_document(raw, rng, sub, cap=cap, donors=donors))
        log.append(f"zip member {name}: " + "; ".join(sub))
        return _rebuild(members)
    if op == "drop" and len(members) > 1:
        del members[target]
        log.append(f"zip member {name} removed")
        return _rebuild(members)
    if op == "dup":
        info, raw = members[target]
        sub = []
        members.append((info, mutate_document(raw, rng, sub, cap=cap, donors=donors)))
        log.append(f"zip member {name} twice (the second: {'; '.join(sub)})")
        with_dups = _rebuild_allow_dups(members)
        return with_dups
    if op == "bytes":
        return mutate_bytes(_rebuild(members), rng, log)
    if op == "bomb":
        mb = rng.choice([300, 700])
        log.append(f"samples/1_epoch_1.json inflates to {mb} MB (a zip bomb)")
        return _bomb(members, mb)
    out = bytearray(_rebuild(members))
    spans = _member_spans(bytes(out))
    local, start, size = spans[name]
    central = spans.get("cd:" + name, (None, 0, 0))[0]
    if op == "deflate" and size > 2:
        n = rng.choice([1, 3, 8])
        for _ in range(n):
            i = start + rng.randrange(size)
            out[i] ^= 1 << rng.randrange(8)
        log.append(f"zip member {name}: {n} bit(s) flipped in its deflate stream")
    elif op == "zero_tail" and size > 2:
        cut = rng.randrange(1, size)
        out[start + cut:start + size] = b"\x00" * (size - cut)
        log.append(f"zip member {name}: deflate stream zeroed after byte {cut} of {size}")
    elif op == "encrypted":  # issue 31: zipfile's RuntimeError "... is encrypted, password required"
        out[local + 6] |= 1
        if central is not None:
            out[central + 8] |= 1
        log.append(f"zip member {name}: encrypted flag set")
    elif op == "method":
        method = rng.choice([1, 9, 12, 14, 99, 0])
        struct.pack_into("<H", out, local + 8, method)
        if central is not None:
            struct.pack_into("<H", out, central + 10, method)
        log.append(f"zip member {name}: compression method set to {method}")
    else:
        crc = rng.getrandbits(32)
        struct.pack_into("<I", out, local + 14, crc)
        if central is not None:
            struct.pack_into("<I", out, central + 16, crc)
        log.append(f"zip member {name}: CRC set to {crc:#010x}")
    return bytes(out)


def _rebuild_allow_dups(members: list[tuple[zipfile.ZipInfo, bytes]]) -> bytes:
    import warnings

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name": the point of this input
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for info, data in members:
                z.writestr(_info(info.filename), data)
    return buf.getvalue()


# ---------------------------------------------------------------- SQLite

WRONG_SQL = ["x'ff00fe'", "CAST(x'ff80c3' AS TEXT)", "CAST(x'eda080' AS TEXT)", "9223372036854775807",
             "-9223372036854775808", "1e308", "9e999", "-9e999", "NULL", "''", "'[]'", "'{}'", "'not json'",
             "'{\"a\":'", "0", "-1", "1.5", "'2024-99-99 99:99:99'", "'null'", "'{\"type\": 5, \"text\": []}'",
             "'[{\"type\": null}]'", "x''", "'\x1b]52;c;aGk=\x07'"]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _tables(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND name NOT LIKE '%_fts%' ORDER BY name")]


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({_q(table)})")]


def _rowids(conn: sqlite3.Connection, table: str) -> list[int]:
    try:
        return [r[0] for r in conn.execute(f"SELECT rowid FROM {_q(table)} LIMIT 5000")]
    except sqlite3.Error:
        return []


PARENTISH = ("parent", "forked_from", "previous", "reply_to")
KEYISH = ("hash", "id", "uuid")


def _sql_wrong_value(rng: random.Random, cap: int) -> str:
    r = rng.random()
    if r < 0.08:
        depth = log_uniform(rng, 1_000, 100_000)
        return "'" + "[" * depth + "]" * depth + "'"
    if r < 0.14:
        return "'" + long_string(rng, log_uniform(rng, 10_000, cap)).replace("'", "''").replace("\x00", " ") + "'"
    return rng.choice(WRONG_SQL)


def mutate_sqlite(data: bytes, rng: random.Random, log: list[str], *, cap: int) -> bytes:
    if rng.random() < 0.15:
        return _sqlite_pages(data, rng, log)
    with tempfile.TemporaryDirectory(prefix="ctxf-fuzz-db-") as tmp:
        path = Path(tmp) / "x.db"
        path.write_bytes(data)
        try:
            conn = sqlite3.connect(str(path), isolation_level=None)
            conn.execute("PRAGMA journal_mode = DELETE")
            conn.execute("PRAGMA foreign_keys = OFF")
            for _ in range(rng.choice([1, 1, 2, 3])):
                _sqlite_op(conn, rng, log, cap)
            conn.close()
        except sqlite3.Error as e:
            log.append(f"(sqlite mutation stopped: {e})")
        return path.read_bytes()


def _sqlite_op(conn: sqlite3.Connection, rng: random.Random, log: list[str], cap: int) -> None:
    tables = _tables(conn)
    if not tables:
        return
    with_rows = [t for t in tables if _rowids(conn, t)] or tables
    table = rng.choice(with_rows)
    cols = _columns(conn, table)
    rows = _rowids(conn, table)
    op = rng.choices(["type", "cycle", "dangling", "delete", "drop_table", "drop_column", "dup_rows"],
                     [8, 4, 1.5, 1, 0.5, 1, 1])[0]
    parent_cols = [c for c in cols if any(p in c.lower() for p in PARENTISH)]
    if op == "cycle" and not parent_cols:
        # a table with parent links, if the database has one
        linked = [(t, c) for t in tables for c in _columns(conn, t) if any(p in c.lower() for p in PARENTISH)]
        if linked:
            table, _ = rng.choice(linked)
            cols, rows = _columns(conn, table), _rowids(conn, table)
            parent_cols = [c for c in cols if any(p in c.lower() for p in PARENTISH)]
        else:
            op = "type"
    try:
        if op == "type" and rows:
            weights = [3 if any(k in c.lower() for k in ("json", "hash", "id", "role", "content", "type", "token",
                                                         "date", "text", "payload", "prompt", "response")) else 1
                       for c in cols]
            col = rng.choices(cols, weights)[0]
            value = _sql_wrong_value(rng, cap)
            rid = rng.choice(rows)
            every = rng.random() < 0.2
            conn.execute(f"UPDATE {_q(table)} SET {_q(col)} = {value}" + ("" if every else f" WHERE rowid = {rid}"))
            log.append(f"sqlite {table}.{col} = {value[:40]}" + (" in every row" if every else f" (rowid {rid})"))
        elif op == "cycle" and rows and parent_cols:
            col = rng.choice(parent_cols)
            keycol = next((k for k in KEYISH if k in cols), "rowid")
            a, b = rng.choice(rows), rng.choice(rows)
            conn.execute(f"UPDATE {_q(table)} SET {_q(col)} = (SELECT {_q(keycol) if keycol != 'rowid' else 'rowid'} "
                         f"FROM {_q(table)} WHERE rowid = {b}) WHERE rowid = {a}")
            conn.execute(f"UPDATE {_q(table)} SET {_q(col)} = (SELECT {_q(keycol) if keycol != 'rowid' else 'rowid'} "
                         f"FROM {_q(table)} WHERE rowid = {a}) WHERE rowid = {b}")
            log.append(f"sqlite parent cycle: {table}.{col} of rowids {a} and {b} point at each other ({keycol})")
        elif op == "dangling" and rows:
            refs = [c for c in cols if c.lower().endswith(("_id", "_hash", "_uuid"))] or cols
            col = rng.choice(refs)
            conn.execute(f"UPDATE {_q(table)} SET {_q(col)} = 'fz-missing' WHERE rowid = {rng.choice(rows)}")
            log.append(f"sqlite {table}.{col} points at nothing")
        elif op == "delete" and rows:
            if rng.random() < 0.3:
                conn.execute(f"DELETE FROM {_q(table)}")
                log.append(f"sqlite all rows of {table} deleted")
            else:
                gone = rng.sample(rows, max(1, len(rows) // 3))
                conn.execute(f"DELETE FROM {_q(table)} WHERE rowid IN ({','.join(map(str, gone))})")
                log.append(f"sqlite {len(gone)} rows of {table} deleted")
        elif op == "drop_table":
            conn.execute(f"DROP TABLE {_q(table)}")
            log.append(f"sqlite table {table} dropped")
        elif op == "drop_column" and len(cols) > 1:
            col = rng.choice(cols)
            try:
                conn.execute(f"ALTER TABLE {_q(table)} DROP COLUMN {_q(col)}")
                log.append(f"sqlite column {table}.{col} dropped")
            except sqlite3.Error:
                conn.execute(f"ALTER TABLE {_q(table)} RENAME COLUMN {_q(col)} TO {_q(col + '_renamed')}")
                log.append(f"sqlite column {table}.{col} renamed")
        elif op == "dup_rows" and rows:
            conn.execute(f"INSERT INTO {_q(table)} SELECT * FROM {_q(table)} LIMIT 3")
            log.append(f"sqlite rows of {table} duplicated")
    except sqlite3.Error as e:
        log.append(f"(sqlite {op} on {table} refused: {e})")


def _sqlite_pages(data: bytes, rng: random.Random, log: list[str]) -> bytes:
    page = struct.unpack(">H", data[16:18])[0] if len(data) > 18 else 4096
    page = 65536 if page == 1 else page or 4096
    pages = max(1, len(data) // page)
    if rng.random() < 0.4:
        keep = rng.randrange(1, pages + 1) if pages > 1 else 1
        log.append(f"sqlite file cut to {keep} of {pages} pages")
        return data[:keep * page - (rng.randrange(page) if rng.random() < 0.3 else 0)]
    buf = bytearray(data)
    p = rng.randrange(pages)
    n = rng.choice([1, 8, 64])
    for _ in range(n):
        i = p * page + rng.randrange(100 if p == 0 else 0, page)
        if i < len(buf):
            buf[i] ^= 1 << rng.randrange(8)
    log.append(f"sqlite page {p + 1}: {n} bit(s) flipped")
    return bytes(buf)


# ---------------------------------------------------------------- YAML


def _yaml_loader() -> type:
    import yaml

    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        pass

    def python_tag(loader: Any, suffix: str, node: Any) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return loader.construct_scalar(node)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_mapping(node, deep=True)

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", python_tag)
    return Loader


def _alias_bomb(levels: int) -> bytes:
    parts = ["&b0 [" + ",".join(["fz"] * 10) + "]"]
    for i in range(1, levels):
        parts.append(f"&b{i} [" + ",".join([f"*b{i - 1}"] * 10) + "]")
    return ("[" + ", ".join(parts) + "]").encode()


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _gzip_damage(raw: bytes, rng: random.Random, log: list[str], cap: int, donors: list[Any]) -> bytes:
    if raw[:2] != b"\x1f\x8b":
        op = rng.choice(["gzip_garbage", "random"])
        log.append(f"binary body: {op}")
        return _gz(b"\xff\xfe garbage") if op == "gzip_garbage" else rng.randbytes(rng.randrange(1, 64))
    op = rng.choice(["truncate", "flip", "crc", "inner", "double", "trailing", "bomb"])
    if op == "bomb":  # issue 31: a 1.5 MB cassette whose gzip body inflates to 1 GiB
        mb = rng.choice([64, 256, 1024])
        log.append(f"gzip body inflating to {mb} MB (a decompression bomb)")
        return gzip_bomb(mb)
    if op == "inner":
        try:
            inner = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            inner = b"{}"
        sub: list[str] = []
        out = _gz(mutate_document(inner, rng, sub, cap=cap, donors=donors))
        log.append("gzip body: " + "; ".join(sub))
        return out
    log.append(f"gzip body: {op}")
    if op == "truncate":
        return raw[:rng.randrange(2, max(3, len(raw)))]
    if op == "flip":
        buf = bytearray(raw)
        for _ in range(rng.choice([1, 4])):
            i = rng.randrange(10, max(11, len(buf) - 8)) if len(buf) > 18 else rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        return bytes(buf)
    if op == "crc":
        return raw[:-8] + rng.randbytes(4) + raw[-4:] if len(raw) > 8 else raw
    if op == "double":
        return raw + _gz(b"\xc3(")
    return raw + b"\x00garbage"


def mutate_yaml(data: bytes, rng: random.Random, log: list[str], *, cap: int, donors: list[Any]) -> bytes:
    import yaml

    try:
        doc = yaml.load(data.decode("utf-8"), Loader=_yaml_loader())  # noqa: S506 (a safe loader)
    except (yaml.YAMLError, UnicodeError, ValueError, RecursionError):
        doc = None
    if not isinstance(doc, (dict, list)) or rng.random() < 0.15:
        return mutate_bytes(data, rng, log)
    m = Mutant("json", [doc])
    op = rng.choices(["tree", "binary", "bomb", "nest", "tag"], [6, 3, 0.7, 0.7, 0.5])[0]
    from .mutate import pick

    binary = pick(m, rng, want=lambda v: isinstance(v, bytes)) if op == "binary" else None
    if op == "binary" and binary is not None:
        cont, key, path = binary
        sub: list[str] = []
        cont[key] = _gzip_damage(cont[key], rng, sub, cap, donors)
        m.log.append(f"at {path}: " + "; ".join(sub))
    elif op in ("bomb", "nest", "tag"):
        s = pick(m, rng)
        if s is None:
            return mutate_bytes(data, rng, log)
        cont, key, path = s
        if op == "bomb":
            levels = rng.choice([6, 8, 9])
            cont[key] = m.sentinel(_alias_bomb(levels))
            m.log.append(f"alias bomb (10^{levels} leaves) at {path}")
        elif op == "nest":
            depth = log_uniform(rng, 1_000, 100_000)
            cont[key] = m.sentinel(b"[" * depth + b"]" * depth)
            m.log.append(f"deep flow nesting at {path}: {depth} levels")
        else:
            tag = rng.choice([b"!!python/object:os.system {}", b"!!binary '%%%'", b"!!int 'x'", b"!!timestamp 'x'",
                              b"!unknown 1", b"!!float '1e999'"])
            cont[key] = m.sentinel(tag)
            m.log.append(f"tag {tag.decode()} at {path}")
    else:
        for _ in range(rng.choice([1, 1, 2])):
            apply_one(m, rng, tree_mutations(cap, donors))
    log.extend(m.log)
    try:
        text = yaml.safe_dump(doc, allow_unicode=True, sort_keys=False, width=1 << 30)
    except (yaml.YAMLError, RecursionError, ValueError):
        return mutate_bytes(data, rng, log)
    out = text.encode("utf-8", "surrogatepass")
    for k in reversed(list(m.raw)):
        token = ('"\\0' + k[1:-1] + '\\0"').encode()
        out = out.replace(token, m.raw[k])
    if rng.random() < 0.2:
        out = mutate_bytes(out, rng, log)
    return out


# ---------------------------------------------------------------- folders

FileMutator = Callable[[Path, bytes, random.Random, list[str]], bytes]


def mutate_folder(src: Path, dest: Path, rng: random.Random, log: list[str], mutate_file: FileMutator,
                  prefer: Callable[[Path], bool]) -> None:
    """Copy the folder ``src`` to ``dest`` and damage one thing in it."""
    shutil.copytree(src, dest, symlinks=False, ignore=shutil.ignore_patterns(".*", "__pycache__", "*.py"))
    files = sorted(p for p in dest.rglob("*") if p.is_file())
    dirs = [dest] + sorted(p for p in dest.rglob("*") if p.is_dir())
    if not files:
        return
    preferred = [f for f in files if prefer(f)] or files
    target = rng.choice(preferred if rng.random() < 0.75 else files)
    rel = target.relative_to(dest)
    op = rng.choices(["member", "loop", "dangling", "fifo", "dir", "copy", "empty", "remove"],
                     [10, 1.5, 0.5, 0.7, 0.5, 0.7, 0.7, 0.7])[0]
    if op == "member":
        sub: list[str] = []
        target.write_bytes(mutate_file(target, target.read_bytes(), rng, sub))
        log.append(f"member {rel}: " + "; ".join(sub))
    elif op == "loop":
        for name in ("loop", "loop2")[:rng.choice([1, 1, 2])]:  # two links back up: 2^40 paths
            link = rng.choice(dirs) / name
            # relative, so the saved copy of the input loops the same way
            link.symlink_to(rng.choice(["..", ".", os.path.relpath(dest, link.parent)]))
            log.append(f"symlink {link.relative_to(dest)} -> {os.readlink(link)}")
    elif op == "dangling":
        link = target.with_name("gone" + target.suffix)
        link.symlink_to(target.with_name("does-not-exist" + target.suffix))
        log.append(f"dangling symlink {link.relative_to(dest)}")
    elif op == "fifo":
        fifo = target.with_name("stream" + target.suffix)
        os.mkfifo(fifo)
        log.append(f"FIFO {fifo.relative_to(dest)}")
    elif op == "dir":
        target.unlink()
        target.mkdir()
        log.append(f"directory in place of {rel}")
    elif op == "copy":
        shutil.copy(target, target.with_name("copy-" + target.name))
        log.append(f"copy of {rel}")
    elif op == "empty":
        target.write_bytes(b"")
        log.append(f"{rel} emptied")
    else:
        target.unlink()
        log.append(f"{rel} removed")
