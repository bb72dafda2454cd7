"""The streamed JSON array reader (``importers._stream.iter_json_array``): what it yields and the
places its errors name are those of the whole file read at once, wherever the pieces it reads end."""

from __future__ import annotations

import json
import random

import pytest

from context_forensics.errors import InputError
from context_forensics.importers import _stream
from context_forensics.importers._stream import iter_json_array
from context_forensics.importers.base import ImportContext

PIECES = (1, 2, 3, 5, 8, 64, 1 << 20)  # bytes per read: every boundary falls mid-token somewhere


def _items(path, piece, monkeypatch):
    monkeypatch.setattr(_stream.TextStream, "CHUNK", piece)
    ctx = ImportContext(path=path)
    return [v for _, v in iter_json_array(path, ctx)], ctx


def _value(rng: random.Random, depth: int = 0):
    kind = rng.choice(["int", "float", "str", "list", "dict", "lit"] if depth < 3 else ["int", "str", "lit"])
    if kind == "int":
        return rng.choice([0, -7, 12345678901234, 10 ** 30])
    if kind == "float":
        return rng.choice([1.5, -0.25, 6.02e23])
    if kind == "str":
        return rng.choice(["", "plain", "é ü", "🚀 rocket", "tab\tquote\"\\n", "日本語"])
    if kind == "lit":
        return rng.choice([True, False, None])
    if kind == "list":
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {f"k{j}": _value(rng, depth + 1) for j in range(rng.randint(0, 3))}


@pytest.mark.parametrize("piece", PIECES)
def test_items_equal_the_whole_file_parsed_at_once(tmp_path, monkeypatch, piece):
    rng = random.Random(piece)
    values = [_value(rng) for _ in range(60)] + [12345, 7]  # a bare number last: cut at a boundary
    path = tmp_path / "a.json"
    path.write_text("\ufeff[\n " + ",\n  ".join(json.dumps(v, ensure_ascii=False) for v in values) + " ]\n",
                    encoding="utf-8")
    got, ctx = _items(path, piece, monkeypatch)
    assert got == values and not ctx.warnings


@pytest.mark.parametrize("piece", PIECES)
def test_a_lone_object_and_an_empty_list(tmp_path, monkeypatch, piece):
    one = tmp_path / "one.json"
    one.write_text('  {"a": [1, 2, {"b": "🚀"}]}  ', encoding="utf-8")
    assert _items(one, piece, monkeypatch)[0] == [{"a": [1, 2, {"b": "🚀"}]}]
    empty = tmp_path / "empty.json"
    empty.write_text(" [ ] ", encoding="utf-8")
    assert _items(empty, piece, monkeypatch)[0] == []
    blank = tmp_path / "blank.json"
    blank.write_text(" \n ", encoding="utf-8")
    with pytest.raises(InputError, match="empty file"):
        _items(blank, piece, monkeypatch)


def _place(text: str, pos: int) -> str:
    """line:col of a character index, 1-based (as the reader of the whole text said it)."""
    line = text.count("\n", 0, pos) + 1
    return f"{line}:{pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"


@pytest.mark.parametrize("piece", PIECES)
@pytest.mark.parametrize("bad, at", [
    ('[\n{"a": 1},\n{"b": 2}\n{"c": 3}]', '{"c"'),  # a missing comma after items read and dropped
    ('[\n{"a": 1},\n  {"b": tru}]', "tru}"),  # a bad literal inside an item
    ('[{"a": 1}] z', "z"),  # extra data after the list
    ('[{"a": "unterminated}]', '"unterminated'),  # the file ends inside an item
])
def test_errors_name_the_place_in_the_whole_file(tmp_path, monkeypatch, piece, bad, at):
    text = '[' + '{"pad": "' + "x" * 40 + '"},\n' * 1 + bad[1:]  # a first item to read past
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as e:
        _items(path, piece, monkeypatch)
    want = _place(text, text.index(at) if at != '"unterminated' else text.index(at))
    assert e.value.where == f"{path}:{want}", (e.value.where, want, e.value)


def test_invalid_utf8_is_replaced_with_one_warning_naming_the_byte(tmp_path, monkeypatch):
    raw = b'\xef\xbb\xbf[{"a": "ok"}, {"b": "x\xffy"}, {"c": "\xfe"}]'
    path = tmp_path / "u.json"
    path.write_bytes(raw)
    bad_byte = raw.index(b"\xff")
    for piece in PIECES:
        got, ctx = _items(path, piece, monkeypatch)
        assert got == [{"a": "ok"}, {"b": "x\ufffdy"}, {"c": "\ufffd"}]
        assert len(ctx.warnings) == 1 and f"invalid UTF-8 at byte {bad_byte};" in ctx.warnings[0]


def test_memory_follows_the_largest_item_not_the_file(tmp_path, monkeypatch):
    """The text held (``buf``) stays within a few pieces of the largest item's size."""
    item = {"text": "word " * 2000}  # ~10 KB
    path = tmp_path / "big.json"
    path.write_text(json.dumps([item] * 500), encoding="utf-8")  # ~5 MB
    monkeypatch.setattr(_stream.TextStream, "CHUNK", 16 * 1024)
    seen = []
    real = _stream.TextStream.drop

    def drop(self, i):
        seen.append(len(self.buf))
        return real(self, i)

    monkeypatch.setattr(_stream.TextStream, "drop", drop)
    n = sum(1 for _ in iter_json_array(path, ImportContext(path=path)))
    assert n == 500 and max(seen) < 4 * 16 * 1024 < path.stat().st_size / 50


@pytest.mark.parametrize("piece", (7, 1 << 20))
def test_an_item_nested_past_what_python_decodes_names_its_place_in_the_file(tmp_path, monkeypatch, piece):
    deep = "[" * 200_000 + "]" * 200_000  # past the interpreter's recursion limit: no value can be built
    text = '[\n{"pad": "' + "x" * 50 + '"},\n  ' + deep + "\n]"
    path = tmp_path / "deep.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as e:
        _items(path, piece, monkeypatch)
    assert "cannot read: JSON" in str(e.value) and e.value.where.startswith(f"{path}:3:"), e.value.where
