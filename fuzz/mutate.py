"""Structure-aware mutations of JSON and JSONL documents, and byte-level ones for any file.

A document is parsed into a tree; a mutation picks a random slot (a dict value or a list item,
reached by a path such as ``$.messages[3].content``) and replaces, removes or reorders it.
What JSON cannot hold as a Python value (100,000 levels of nesting, ``NaN``, ``1e400``, a lone
``\\ud800`` escape, a duplicated key, invalid UTF-8) is put in the tree as a sentinel string
and swapped for its raw bytes after serialising. Every mutation appends a short description
to ``Mutant.log``, which the harness prints with each escaping input.

All randomness comes from the ``random.Random`` passed in, so an input is a pure function of
(seed, importer, index).
"""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass, field
from typing import Any, Callable

# ---------------------------------------------------------------- the document model


@dataclass
class Raw:
    """A JSONL line that did not parse (kept byte for byte)."""

    data: bytes


@dataclass
class Mutant:
    """A parsed document being mutated: JSON (``lines`` holds one value) or JSONL."""

    kind: str  # "json" | "jsonl"
    lines: list[Any]
    raw: dict[str, bytes] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    indent: int | None = None

    def sentinel(self, data: bytes) -> str:
        key = f"\x00fz{len(self.raw)}\x00"
        self.raw[key] = data
        return key

    def serialize(self) -> bytes:
        out: list[bytes] = []
        for v in self.lines:
            if isinstance(v, Raw):
                out.append(v.data)
                continue
            text = json.dumps(v, ensure_ascii=False, indent=self.indent if self.kind == "json" else None)
            out.append(text.encode("utf-8", "surrogatepass"))
        data = b"\n".join(out) + (b"\n" if self.kind == "jsonl" else b"")
        # Raw values may hold other sentinels (a nested one): replace the newest first.
        for key in reversed(list(self.raw)):
            token = json.dumps(key).encode()
            if token in data:
                data = data.replace(token, self.raw[key])
        return data


def dumps(v: Any) -> str:
    """JSON text of a tree value; YAML trees may hold bytes and dates (written as their repr)."""
    return json.dumps(v, ensure_ascii=False, default=repr)


def parse_document(data: bytes) -> Mutant | None:
    """A JSON document, or JSONL (every non-blank line a value or kept raw); None for neither."""
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = body.decode("utf-8", "surrogateescape")
    try:
        value = json.loads(text)
        indent = 2 if "\n " in text[:2000] else None
        return Mutant("json", [value], indent=indent)
    except (ValueError, RecursionError):
        pass
    lines: list[Any] = []
    parsed = 0
    for raw in body.split(b"\n"):
        if not raw.strip():
            continue
        try:
            lines.append(json.loads(raw))
            parsed += 1
        except (ValueError, RecursionError):
            lines.append(Raw(raw))
    if parsed == 0:
        return None
    return Mutant("jsonl", lines)


# ---------------------------------------------------------------- slots


Slot = tuple[Any, Any, str]  # (container, key or index, path)


def slots(m: Mutant, rng: random.Random, *, limit: int = 4000,
          want: Callable[[Any], bool] | None = None) -> list[Slot]:
    """Up to ``limit`` slots of the document (reservoir-sampled), optionally filtered by value."""
    seen: list[Slot] = []
    n = 0
    stack: list[Slot] = [(m.lines, i, f"line{i + 1}" if m.kind == "jsonl" else "$")
                         for i in range(len(m.lines)) if not isinstance(m.lines[i], Raw)]
    while stack:
        slot = stack.pop()
        cont, key, path = slot
        v = cont[key]
        if want is None or want(v):
            n += 1
            if len(seen) < limit:
                seen.append(slot)
            else:
                j = rng.randrange(n)
                if j < limit:
                    seen[j] = slot
        if isinstance(v, dict):
            stack.extend((v, k, f"{path}.{k}") for k in v if isinstance(k, str) and not k.startswith("\x00fz"))
        elif isinstance(v, list):
            stack.extend((v, i, f"{path}[{i}]") for i in range(len(v)))
    return seen


def pick(m: Mutant, rng: random.Random, want: Callable[[Any], bool] | None = None) -> Slot | None:
    found = slots(m, rng, want=want)
    if not found:
        return None
    # Favour deep slots a little: the interesting fields sit inside records.
    found.sort(key=lambda s: s[2].count(".") + s[2].count("["))
    return found[min(len(found) - 1, int(len(found) * rng.random() ** 0.7))]


# ---------------------------------------------------------------- values


def log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    import math

    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


RAW_LITERALS = [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400", b"1e-400", b"-0", b"-0.0",
                b"18446744073709551616", b"-9223372036854775809", b"9223372036854775807",
                b"0.000000000000000000000000000000000000001", b"1E+2", b"1.0e309"]
PLAIN_VALUES: list[Any] = [[], {}, 0, -1, 1.5, -2.5, None, True, False, "", "x", "0", "null", "true",
                           2 ** 63, 2 ** 64, -(2 ** 63) - 1, 10 ** 40, "\u0000", "\u202e\u200b",
                           "\x1b]52;c;aGk=\x07\x1b[2J", "../../etc/passwd", "A" * 300, [None], [[]], [{}],
                           {"": None}, {"type": None}, "2024-13-45T99:99:99Z", "NaN"]
STRING_POOL = ["a", " ", "\n", "\t", "é", "€", "𝄞", "\u0000", "\x1b", "\u202e", "\ufeff", "\\", '"', "日本", "\r"]


def long_string(rng: random.Random, n: int) -> str:
    piece = "".join(rng.choice(STRING_POOL) for _ in range(64))
    return (piece * (n // 64 + 1))[:n]


def wrong_value(m: Mutant, rng: random.Random, old: Any) -> tuple[Any, str]:
    """A value of another JSON type than ``old`` (or an odd literal)."""
    r = rng.random()
    if r < 0.25:
        lit = rng.choice(RAW_LITERALS)
        return m.sentinel(lit), lit.decode()
    if r < 0.35 and not isinstance(old, (dict, list)):
        wrapped = rng.choice([[old], {"value": old}, {"text": old, "type": "text"}])
        return wrapped, f"wrapped {type(old).__name__} in {type(wrapped).__name__}"
    choices = [v for v in PLAIN_VALUES if type(v) is not type(old)] or PLAIN_VALUES
    v = copy.deepcopy(rng.choice(choices))
    return v, f"{type(old).__name__} -> {short(v)}"


def short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


def nested(rng: random.Random, inner: bytes, depth: int) -> bytes:
    kind = rng.random()
    if kind < 0.5:
        return b"[" * depth + inner + b"]" * depth
    if kind < 0.8:
        return b'{"a":' * depth + inner + b"}" * depth
    return b'[{"content":' * depth + inner + b"}]" * depth


# ---------------------------------------------------------------- tree mutations


def m_type(m: Mutant, rng: random.Random) -> bool:
    s = pick(m, rng)
    if s is None:
        return False
    cont, key, path = s
    cont[key], what = wrong_value(m, rng, cont[key])
    m.log.append(f"wrong type at {path}: {what}")
    return True


def m_nest(m: Mutant, rng: random.Random) -> bool:
    s = pick(m, rng)
    if s is None:
        return False
    cont, key, path = s
    depth = log_uniform(rng, 1_000, 100_000)
    inner = dumps(cont[key]).encode("utf-8", "surrogatepass")
    if len(inner) > 10_000:
        inner = b"1"
    cont[key] = m.sentinel(nested(rng, inner, depth))
    m.log.append(f"deep nesting at {path}: {depth} levels")
    return True


def m_number(m: Mutant, rng: random.Random) -> bool:
    s = pick(m, rng, want=lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)) or pick(m, rng)
    if s is None:
        return False
    cont, key, path = s
    r = rng.random()
    if r < 0.3:
        digits = log_uniform(rng, 20, 20_000)
        lit = ("-" if rng.random() < 0.3 else "") + "9" * digits
        what = f"{digits}-digit integer"
    elif r < 0.6:
        lit = rng.choice(["1e400", "-1e400", "1e999999999", "2e308", "NaN", "Infinity", "1e-999"])
        what = lit
    else:
        v = rng.choice([2 ** 63, 2 ** 63 - 1, 2 ** 64, -(2 ** 63) - 1, -1, -(10 ** 30), 10 ** 30, 0.5, 1e308])
        lit = repr(v) if isinstance(v, float) else str(v)
        what = lit
    cont[key] = m.sentinel(lit.encode())
    m.log.append(f"huge number at {path}: {what}")
    return True


def m_null_string(m: Mutant, rng: random.Random) -> bool:
    """None where a string is expected (a tool call's name, a role, an id): the issue-31 class
    that ended as ``ToolCall.name must be a string, not NoneType`` failing a whole file."""
    s = pick(m, rng, want=lambda v: isinstance(v, str))
    if s is None:
        return False
    cont, key, path = s
    cont[key] = None
    m.log.append(f"null for the string at {path}")
    return True


def m_digit_string(m: Mutant, rng: random.Random) -> bool:
    """A string of more digits than Python converts to an int (4,300): a count, an id or a
    timestamp an importer may ``int()`` (issue 31: "Exceeds the limit (4300 digits)")."""
    s = pick(m, rng, want=lambda v: isinstance(v, (str, int)) and not isinstance(v, bool)) or pick(m, rng)
    if s is None:
        return False
    cont, key, path = s
    digits = log_uniform(rng, 4_301, 50_000)
    cont[key] = ("-" if rng.random() < 0.2 else "") + "7" * digits
    m.log.append(f"{digits}-digit string at {path}")
    return True


def gzip_bomb(mb: int) -> bytes:
    """A gzip stream of a JSON body holding an ``mb`` MB string, built in well under a second
    (after a full flush each 1 MB run of ``A`` compresses to the same ~1 KB, repeated)."""
    import zlib

    if mb not in _GZIP_BOMBS:
        head, tail = b'{"id": "x", "content": [{"type": "text", "text": "', b'"}]}'
        chunk = b"A" * (1 << 20)
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        start = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
        block = c.compress(chunk) + c.flush(zlib.Z_FULL_FLUSH)
        # the trailer (CRC and size) of the whole: the one compressor above wrote a header only
        crc = zlib.crc32(head)
        for _ in range(mb):
            crc = zlib.crc32(chunk, crc)
        crc = zlib.crc32(tail, crc)
        raw = zlib.compressobj(9, zlib.DEFLATED, -15)
        end = raw.compress(tail) + raw.flush()
        size = (len(head) + mb * len(chunk) + len(tail)) & 0xFFFFFFFF
        _GZIP_BOMBS[mb] = start + block * mb + end + crc.to_bytes(4, "little") + size.to_bytes(4, "little")
    return _GZIP_BOMBS[mb]


_GZIP_BOMBS: dict[int, bytes] = {}


def m_gzip_body(m: Mutant, rng: random.Random) -> bool:
    """A recorded body (``{"base64_string": ...}``, as VCR's JSON cassettes store a binary one)
    replaced by base64 of a gzip body that inflates to 64 MB - 1 GB (issue 31: a 1.5 MB cassette
    whose body inflates to 1 GiB took 3.2 GB of memory)."""
    import base64

    s = pick(m, rng, want=lambda v: isinstance(v, dict) and ("base64_string" in v or "string" in v))
    if s is None:
        return False
    cont, key, path = s
    mb = rng.choice([64, 256, 1024])
    cont[key] = {"base64_string": base64.b64encode(gzip_bomb(mb)).decode("ascii")}
    m.log.append(f"gzip body at {path} inflating to {mb} MB (a decompression bomb)")
    return True


def m_long_string(m: Mutant, rng: random.Random, cap: int) -> bool:
    s = pick(m, rng, want=lambda v: isinstance(v, str)) or pick(m, rng)
    if s is None:
        return False
    cont, key, path = s
    n = log_uniform(rng, 10_000, cap)
    cont[key] = long_string(rng, n)
    m.log.append(f"long string at {path}: {n} chars")
    return True


def m_surrogate(m: Mutant, rng: random.Random) -> bool:
    s = pick(m, rng, want=lambda v: isinstance(v, str)) or pick(m, rng)
    if s is None:
        return False
    cont, key, path = s
    esc = rng.choice([b'"\\ud800"', b'"x\\udfffy"', b'"\\ud83d"', b'"\\ud83d\\u0041"', b'"\\udc00\\ud800"',
                      b'"ok \\ud800 ok"'])
    cont[key] = m.sentinel(esc)
    m.log.append(f"lone surrogate at {path}: {esc.decode()}")
    return True


def m_dup_key(m: Mutant, rng: random.Random) -> bool:
    s = pick(m, rng, want=lambda v: isinstance(v, dict) and bool(v))
    if s is None:
        return False
    cont, key, path = s
    d = cont[key]
    k = rng.choice([k for k in d if isinstance(k, str)] or [""])
    other, what = wrong_value(m, rng, d.get(k))
    pairs = [dumps(str(kk)) + ":" + dumps(vv) for kk, vv in d.items()]
    dup = dumps(k) + ":" + dumps(other)
    pairs.insert(rng.randrange(len(pairs) + 1), dup)
    cont[key] = m.sentinel(("{" + ",".join(pairs) + "}").encode("utf-8", "surrogatepass"))
    m.log.append(f"duplicated key {k!r} at {path} ({what})")
    return True


def m_remove_key(m: Mutant, rng: random.Random) -> bool:
    s = pick(m, rng, want=lambda v: isinstance(v, dict) and bool(v))
    if s is None:
        return False
    cont, key, path = s
    d = cont[key]
    k = rng.choice(list(d))
    del d[k]
    m.log.append(f"removed key {k!r} at {path}")
    return True


def m_shuffle(m: Mutant, rng: random.Random) -> bool:
    if m.kind == "jsonl" and rng.random() < 0.5 and len(m.lines) > 1:
        rng.shuffle(m.lines)
        m.log.append("shuffled the lines")
        return True
    s = pick(m, rng, want=lambda v: isinstance(v, list) and len(v) > 1)
    if s is None:
        return False
    cont, key, path = s
    rng.shuffle(cont[key])
    m.log.append(f"shuffled the list at {path}")
    return True


def m_duplicate(m: Mutant, rng: random.Random) -> bool:
    s = pick(m, rng, want=lambda v: isinstance(v, list) and bool(v))
    if s is None:
        return False
    cont, key, path = s
    lst = cont[key]
    times = rng.choice([1, 2, 50, 2000])
    item = lst[rng.randrange(len(lst))]
    text = dumps(item)
    # its size once written: a sentinel in it stands for raw bytes (100,000 brackets, say)
    size = len(text) + sum(len(raw) for k, raw in m.raw.items() if dumps(k) in text)
    times = max(1, min(times, 2_000_000 // max(size, 1)))
    at = rng.randrange(len(lst) + 1)
    # copies, not references: a later mutation of one copy must not change all of them
    lst[at:at] = [copy.deepcopy(item) for _ in range(times)]
    m.log.append(f"repeated an item of {path} {times} times")
    return True


def m_empty(m: Mutant, rng: random.Random) -> bool:
    s = pick(m, rng, want=lambda v: isinstance(v, (dict, list)) and bool(v))
    if s is None:
        return False
    cont, key, path = s
    cont[key] = type(cont[key])()
    m.log.append(f"emptied {path}")
    return True


def m_rename_key(m: Mutant, rng: random.Random) -> bool:
    s = pick(m, rng, want=lambda v: isinstance(v, dict) and bool(v))
    if s is None:
        return False
    cont, key, path = s
    d = cont[key]
    k = rng.choice(list(d))
    new = rng.choice([k.upper(), k + " ", "", "\u0000" + k, k.replace("a", "а"), "x" * 5000])
    d[new] = d.pop(k)
    m.log.append(f"renamed key {k!r} at {path}")
    return True


ID_KEYS = ("uuid", "id", "hash", "message_id", "node_id", "call_id", "tool_call_id")
PARENT_KEYS = ("parentUuid", "parent", "parent_id", "parentId", "parent_hash", "logicalParentUuid",
               "parent_message_id", "previous_response_id", "parentToolUseID")


def m_link_cycle(m: Mutant, rng: random.Random) -> bool:
    """Parent links that loop: a record its own parent, or two records each other's."""
    def linked(v: Any) -> bool:
        return isinstance(v, dict) and any(k in v for k in PARENT_KEYS)

    found = slots(m, rng, want=linked)
    if not found:
        # a ChatGPT-style mapping: {id: {parent, children}}; a child lists its ancestor
        maps = slots(m, rng, want=lambda v: isinstance(v, dict) and any(
            isinstance(x, dict) and "children" in x for x in v.values()))
        if not maps:
            return False
        cont, key, path = rng.choice(maps)
        nodes = [k for k, x in cont[key].items() if isinstance(x, dict) and "children" in x]
        a, b = rng.choice(nodes), rng.choice(nodes)
        cont[key][a]["parent"] = b
        if isinstance(cont[key][b].get("children"), list):
            cont[key][b]["children"].append(a)
        if isinstance(cont[key][a].get("children"), list):
            cont[key][a]["children"].append(b)
        m.log.append(f"cycle in the mapping at {path}: {a!r} <-> {b!r}")
        return True
    first = rng.choice(found)
    second = rng.choice(found)
    ra, rb = first[0][first[1]], second[0][second[1]]
    pa = next(k for k in PARENT_KEYS if k in ra)
    pb = next((k for k in PARENT_KEYS if k in rb), pa)
    ida = next((ra[k] for k in ID_KEYS if k in ra), None) or "fz-a"
    idb = next((rb[k] for k in ID_KEYS if k in rb), None) or "fz-b"
    ra[pa] = idb
    rb[pb] = ida
    m.log.append(f"parent cycle between {first[2]} and {second[2]} ({pa})")
    return True


def m_nested_json_string(m: Mutant, rng: random.Random, inner: Callable[[Mutant, random.Random], bool]) -> bool:
    """A string that holds JSON (tool arguments, a cassette body): mutate that document."""
    def holds_json(v: Any) -> bool:
        return isinstance(v, str) and len(v) > 1 and v.lstrip()[:1] in "{[" and v.rstrip()[-1:] in "}]"

    s = pick(m, rng, want=holds_json)
    if s is None:
        return False
    cont, key, path = s
    doc = parse_document(cont[key].encode("utf-8", "surrogatepass"))
    if doc is None or not inner(doc, rng):
        return False
    try:
        cont[key] = doc.serialize().decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # raw invalid UTF-8 cannot live in a string value
        return False
    m.log.append(f"inside the JSON string at {path}: " + "; ".join(doc.log))
    return True


def m_graft(m: Mutant, rng: random.Random, donors: list[Any]) -> bool:
    """Mixing formats: a subtree (or a JSONL line) of another format's log."""
    if not donors:
        return False
    donor = rng.choice(donors)
    dm = Mutant("json", [copy.deepcopy(donor)])
    ds = pick(dm, rng)
    if ds is None:
        return False
    value = ds[0][ds[1]]
    if m.kind == "jsonl" and rng.random() < 0.5 and isinstance(value, dict):
        at = rng.randrange(len(m.lines) + 1)
        m.lines.insert(at, value)
        m.log.append(f"inserted a record of another format as line {at + 1}")
        return True
    s = pick(m, rng)
    if s is None:
        return False
    cont, key, path = s
    cont[key] = value
    m.log.append(f"grafted another format's {ds[2]} at {path}")
    return True


def m_lines(m: Mutant, rng: random.Random) -> bool:
    """JSONL line damage: drop, duplicate, join, blank, non-JSON lines."""
    if m.kind != "jsonl" or not m.lines:
        return False
    i = rng.randrange(len(m.lines))
    op = rng.choice(["drop", "dup", "garbage", "join", "first_raw"])
    if op == "drop":
        del m.lines[i]
    elif op == "dup":
        m.lines.insert(i, copy.deepcopy(m.lines[i]))
    elif op == "garbage":
        m.lines.insert(i, Raw(rng.choice([b"not json", b"{", b"]", b"\x00\x00", b'{"a":1}{"b":2}', b"\xff\xfe{}"])))
    elif op == "join" and i + 1 < len(m.lines):
        m.lines[i:i + 2] = [Raw((dumps(m.lines[i]) + dumps(m.lines[i + 1])).encode("utf-8", "surrogatepass"))]
    else:
        m.lines[0] = Raw(b"# " + dumps(m.lines[0])[:80].encode("utf-8", "surrogatepass"))
    m.log.append(f"line damage: {op} at line {i + 1}")
    return True


# ---------------------------------------------------------------- byte mutations

INVALID_UTF8 = [b"\xff", b"\xfe\xff", b"\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80",
                b"\xe2\x82", b"\xf0\x9f\x98"]
BOMS = {"utf-8": b"\xef\xbb\xbf", "utf-16-le": b"\xff\xfe", "utf-16-be": b"\xfe\xff",
        "utf-32-le": b"\xff\xfe\x00\x00", "utf-32-be": b"\x00\x00\xfe\xff"}


def b_truncate(data: bytes, rng: random.Random, log: list[str]) -> bytes:
    if not data:
        return data
    at = rng.randrange(len(data))
    log.append(f"truncated at byte {at} of {len(data)}")
    return data[:at]


def b_flip(data: bytes, rng: random.Random, log: list[str]) -> bytes:
    if not data:
        return data
    buf = bytearray(data)
    n = rng.choice([1, 1, 2, 4, 16])
    for _ in range(n):
        i = rng.randrange(len(buf))
        buf[i] ^= 1 << rng.randrange(8)
    log.append(f"flipped {n} bit(s)")
    return bytes(buf)


def b_invalid_utf8(data: bytes, rng: random.Random, log: list[str]) -> bytes:
    quotes = [i for i in range(0, len(data), max(1, len(data) // 2000)) if data[i:i + 1] == b'"'] or [0]
    at = rng.choice(quotes) + 1 if rng.random() < 0.8 else rng.randrange(len(data) + 1)
    seq = rng.choice(INVALID_UTF8)
    log.append(f"invalid UTF-8 {seq!r} at byte {at}")
    return data[:at] + seq + data[at:]


def b_bom(data: bytes, rng: random.Random, log: list[str]) -> bytes:
    name = rng.choice(list(BOMS))
    body = data[3:] if data.startswith(BOMS["utf-8"]) else data
    if name != "utf-8" and rng.random() < 0.5:
        try:
            text = body.decode("utf-8")
            log.append(f"re-encoded as {name} with its BOM")
            return BOMS[name] + text.encode(name)
        except UnicodeError:
            pass
    log.append(f"{name} BOM prepended")
    return BOMS[name] + body


def b_nul(data: bytes, rng: random.Random, log: list[str]) -> bytes:
    at = rng.randrange(len(data) + 1)
    log.append(f"NUL bytes at {at}")
    return data[:at] + b"\x00" * rng.choice([1, 4, 4096]) + data[at:]


def b_newlines(data: bytes, rng: random.Random, log: list[str]) -> bytes:
    op = rng.choice(["crlf", "cr", "none"])
    log.append(f"line endings: {op}")
    if op == "crlf":
        return data.replace(b"\n", b"\r\n")
    if op == "cr":
        return data.replace(b"\n", b"\r")
    return data.replace(b"\n", b" ")


BYTE_MUTATIONS = [(b_truncate, 4), (b_flip, 4), (b_invalid_utf8, 3), (b_bom, 2), (b_nul, 1), (b_newlines, 1)]


def mutate_bytes(data: bytes, rng: random.Random, log: list[str]) -> bytes:
    fns, weights = zip(*BYTE_MUTATIONS)
    fn = rng.choices(fns, weights)[0]
    return fn(data, rng, log)


# ---------------------------------------------------------------- documents


def tree_mutations(cap: int, donors: list[Any]) -> list[tuple[Callable[[Mutant, random.Random], bool], float]]:
    base: list[tuple[Callable[[Mutant, random.Random], bool], float]] = [
        (m_type, 6), (m_nest, 3), (m_number, 2), (lambda m, r: m_long_string(m, r, cap), 1),
        (m_surrogate, 2), (m_dup_key, 1.5), (m_remove_key, 4), (m_shuffle, 1.5), (m_duplicate, 1),
        (m_empty, 1.5), (m_rename_key, 1), (m_link_cycle, 1.5), (lambda m, r: m_graft(m, r, donors), 2),
        (m_lines, 2), (m_null_string, 3), (m_digit_string, 1), (m_gzip_body, 0.5),
    ]
    simple = [(f, w) for f, w in base if f not in (m_nest,)]
    base.append((lambda m, r: m_nested_json_string(m, r, lambda d, rr: apply_one(d, rr, simple)), 2))
    return base


def apply_one(m: Mutant, rng: random.Random,
              table: list[tuple[Callable[[Mutant, random.Random], bool], float]]) -> bool:
    fns, weights = zip(*table)
    for _ in range(6):  # a mutation may not apply (no list to shuffle): try another
        if rng.choices(fns, weights)[0](m, rng):
            return True
    return False


def mutate_document(data: bytes, rng: random.Random, log: list[str], *, cap: int, donors: list[Any]) -> bytes:
    """One to three tree mutations of a JSON/JSONL document, then maybe a byte mutation;
    byte mutations only when the bytes are no document."""
    doc = parse_document(data)
    if doc is None:
        for _ in range(rng.choice([1, 1, 2])):
            data = mutate_bytes(data, rng, log)
        return data
    table = tree_mutations(cap, donors)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        apply_one(doc, rng, table)
    log.extend(doc.log)
    out = doc.serialize()
    if rng.random() < 0.25:
        out = mutate_bytes(out, rng, log)
    return out
