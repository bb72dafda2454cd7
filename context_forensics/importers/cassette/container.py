"""The cassette file and the HTTP parts of what it recorded.

A cassette is YAML (VCR.py, pytest-recording, Ruby VCR) or JSON holding a list of
interactions, each a request and its response. This module reads the document and gives the
parts every interaction needs whatever API it called: headers (lower-cased, first value), the
body's bytes however the recorder stored them (a string, ``!!binary`` base64, ``{"string":
...}``, ``{"base64_string": ...}`` or the JSON itself), undone content-encoding (gzip by its
magic bytes, deflate, brotli, zstd), the recorded date, and the model a URI names.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import re
import zlib
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ...errors import InputError
from .._inflate import StreamTooBig, charge, inflate, limits_text, stream_limit, too_big
from .._json import NestingError, bounded, parse_json
from ..base import NESTING_HINT, ImportContext, decode, record_error_reason


def _yaml_loader() -> type:
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc, valid-type]
        """Safe loading; old cassettes' ``!!python/unicode`` style tags read as plain values."""

    def _python_tag(loader: Any, suffix: str, node: Any) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return loader.construct_scalar(node)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_mapping(node, deep=True)

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", _python_tag)
    return Loader


def load_cassette(path: Path, ctx: ImportContext) -> Any:
    """The cassette document (YAML or JSON); errors name the file and line."""
    data = path.read_bytes()
    if not data.strip():
        raise InputError("empty file", where=str(path), hint="nothing to ingest; check the cassette")
    text = decode(data, ctx)
    if text.lstrip()[:1] in "{[":
        try:
            return parse_json(text, ctx)
        except NestingError as e:
            raise InputError(f"cannot read: JSON {e.msg}", where=f"{path}:{e.lineno}:{e.colno}",
                             hint=NESTING_HINT) from None
        except json.JSONDecodeError:
            pass  # YAML is a superset of JSON; let the YAML parser report the error
    import yaml

    try:
        doc = yaml.load(text, Loader=_yaml_loader())  # noqa: S506 (a safe loader)
        # Aliases share one value among many places: expanded, a few hundred bytes of them can
        # stand for a billion values (an "alias bomb"), or for a value inside itself.
        size = expanded_size(doc, MAX_VALUES)
        if size > MAX_VALUES:
            raise InputError(f"its YAML aliases expand to more than {MAX_VALUES:,} values (an alias bomb?)",
                             where=str(path), hint="a recorded cassette repeats no value that often")
        # The YAML parser's values get the guard JSON gets: nesting bounded, lone surrogates
        # (a "\ud800" escape) replaced.
        return bounded(doc, ctx)
    except (RecursionError, NestingError):
        raise InputError("cannot read: YAML nested too deeply", where=str(path), hint=NESTING_HINT) from None
    except (ValueError, TypeError, AttributeError, LookupError, OverflowError) as e:
        # a constructor's own error: a tagged value it cannot build (!!int 'x', !!timestamp 'x')
        raise InputError(f"malformed YAML: a tagged value that cannot be read ({record_error_reason(e)})",
                         where=str(path), hint="the cassette must be valid YAML") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        raise InputError(f"malformed YAML: {getattr(e, 'problem', None) or e}", where=where,
                         hint="the cassette must be valid YAML; check it was fully written") from None


MAX_VALUES = 5_000_000  # values (lists, maps, scalars) a cassette may expand to through its aliases


def expanded_size(value: Any, limit: int) -> int:
    """How many values ``value`` holds with every shared list / map counted each time it is
    referenced (what a walk or ``json.dumps`` would visit), stopping past ``limit``; a value that
    contains itself counts as past it. Linear in the distinct values, without recursion."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()  # the containers on the path from the root: one met again is a loop
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        x, done = stack.pop()
        if type(x) is not dict and type(x) is not list:
            continue
        key = id(x)
        children = list(x.values()) if type(x) is dict else x
        if done:
            open_.discard(key)
            total = 1 + sum(sizes.get(id(y), 1) for y in children)
            sizes[key] = total
            if total > limit:
                return total
            continue
        if key in sizes:
            continue
        open_.add(key)
        stack.append((x, True))
        for y in children:
            if type(y) is dict or type(y) is list:
                if id(y) in open_:
                    return limit + 1
                if id(y) not in sizes:
                    stack.append((y, False))
    return sizes.get(id(value), 1)


def interactions(doc: Any, path: Path) -> tuple[list[dict], dict[str, Any]]:
    """The cassette's interactions (Ruby VCR's ``http_interactions``) and its version info."""
    if not isinstance(doc, dict):
        raise InputError("expected a cassette with an 'interactions' list", where=str(path),
                         hint="force another format with --format")
    items = doc.get("interactions")
    if items is None:
        items = doc.get("http_interactions")  # Ruby VCR
    if not isinstance(items, list):
        raise InputError("expected a cassette with an 'interactions' list", where=str(path),
                         hint="force another format with --format")
    info = {k: doc[k] for k in ("version", "recorded_with") if isinstance(doc.get(k), (str, int))}
    return items, info


def lower_headers(h: Any) -> dict[str, str]:
    """Lower-cased header names -> first value (VCR stores lists of values)."""
    out: dict[str, str] = {}
    if isinstance(h, dict):
        for k, v in h.items():
            if isinstance(v, list):
                v = v[0] if v else ""
            if isinstance(v, bytes):  # botocore cassettes store some headers as !!binary
                v = v.decode("utf-8", errors="replace")
            out[str(k).lower()] = str(v)
    return out


def body_bytes(body: Any) -> bytes | None:
    """The raw bytes of a recorded body, whatever way the cassette stored it."""
    if body is None:
        return None
    if isinstance(body, dict):
        if "string" in body:
            body = body["string"]
        elif "base64_string" in body:
            try:
                return base64.b64decode(str(body["base64_string"]))
            except (binascii.Error, ValueError):
                return None
        else:  # a cassette that stored the JSON itself
            return json.dumps(body).encode()
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8", errors="replace")
    if isinstance(body, list):
        return json.dumps(body).encode()
    return str(body).encode()


def decompress(data: bytes, encoding: str, ctx: ImportContext, what: str) -> bytes | None:
    """Undo gzip (by magic bytes), deflate, brotli or zstd, bounded (``_inflate``); None with a
    warning if impossible or past the bound of one body (past the file's, ``InflateError``)."""
    enc = encoding.lower().strip()
    try:
        if data[:2] == b"\x1f\x8b":
            return inflate(data, 31, what=f"{what}: gzip body", ctx=ctx)
        if enc == "deflate":
            try:
                return inflate(data, 15, what=f"{what}: deflate body", ctx=ctx)
            except zlib.error:
                return inflate(data, -15, what=f"{what}: deflate body", ctx=ctx)
        if enc in ("br", "zstd"):
            return _optional_decompress(data, enc, ctx, what)
    except StreamTooBig as e:
        ctx.warn(f"{e.message}; body ignored ({limits_text()})")
        ctx.skip("oversized body")
        return None
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        ctx.warn(f"{what}: cannot decompress body ({e}); body ignored")
        return None
    return data


def _optional_decompress(data: bytes, enc: str, ctx: ImportContext, what: str) -> bytes | None:
    """Brotli / zstd need optional modules; a body the recorder already decoded passes through.
    Bounded as gzip is: at most ``stream_limit`` bytes are asked of the decoder."""
    cap = stream_limit(len(data))
    out: bytes | None = None
    try:
        if enc == "br":
            import brotli  # type: ignore[import-not-found]

            out = brotli.Decompressor().process(data, output_buffer_limit=cap + 1)
        else:
            import io

            import zstandard  # type: ignore[import-not-found]

            with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as r:
                out = r.read(cap + 1)
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 (the codecs raise their own error types; an old brotli lacks the bound)
        pass
    if out is not None:
        if len(out) > cap:
            raise too_big(f"{what}: {enc} body", cap, len(data), ctx)
        charge(ctx, len(out), f"{what}: {enc} body")
        return out
    try:
        data.decode("utf-8")
        return data  # plain text already: the recorder decoded it but kept the header
    except UnicodeDecodeError:
        ctx.warn(f"{what}: {enc}-compressed body that cannot be decoded here; body ignored")
        return None


def date_iso(headers: dict[str, str], recorded_at: Any) -> str | None:
    """When the call was recorded (the ``Date`` header, else ``recorded_at``: an RFC 2822 date as
    VCR writes it, or ISO-8601 as a HAR file's ``startedDateTime``) as ISO-8601."""
    value = headers.get("date") or (recorded_at if isinstance(recorded_at, str) else None)
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).isoformat().replace("+00:00", "Z")
    except (TypeError, ValueError, IndexError):
        pass
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).isoformat().replace("+00:00", "Z")
    except ValueError:
        return None


def model_from_uri(uri: str) -> str | None:
    """The model a request URI names: Gemini / Vertex ``/models/<m>``, Bedrock
    ``/model/<m>/invoke``, Azure OpenAI ``/deployments/<m>/``."""
    m = re.search(r"/models/([^/:?]+)", urlsplit(uri).path)
    if m:
        return m.group(1)
    m = re.search(r"/model/([^/]+)/(?:invoke|converse)", urlsplit(uri).path)  # Bedrock
    if m:
        return unquote(m.group(1))
    m = re.search(r"/deployments/([^/]+)/", urlsplit(uri).path)  # Azure OpenAI
    return m.group(1) if m else None
