"""Inspect's log files as ``(header, sample)`` pairs: the ``.json`` log (``version`` 1 and 2),
and the zipped ``.eval`` container: ``header.json`` (finished), ``_journal/start.json`` only (a
run still in progress or killed) or the first layout (``start.json`` + ``results.json``), with
one ``samples/<id>_epoch_<n>.json`` member per sample.
"""

from __future__ import annotations

import json
import re
import zipfile
import zlib
from pathlib import Path
from typing import Any, Iterator

from ...errors import InputError
from .._inflate import charge, limits_text, stream_limit
from .._json import NestingError, parse_json
from ..base import NESTING_HINT, ImportContext, load_json

ZIP_MAGIC = b"PK\x03\x04"
_SAMPLE_NAME = re.compile(r"^samples/(.+)_epoch_(\d+)\.json$")


def json_samples(path: Path, ctx: ImportContext) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """The ``(log, sample)`` pairs of a ``.json`` log (v1 and v2: ``samples[]``)."""
    data = load_json(path, ctx)
    if not isinstance(data, dict) or not isinstance(data.get("eval"), dict):
        raise InputError(
            "not an Inspect log: expected an object with an 'eval' section",
            where=str(path),
            hint="force another format with --format",
        )
    samples = data.get("samples")
    if samples is None:
        ctx.warn(
            "log has no samples (a header-only log: the eval ran with samples not logged, or "
            "the file was written by read_eval_log(header_only=True)); imported 0 sessions"
        )
        return
    if not isinstance(samples, list):
        raise InputError("'samples' is not a list", where=str(path))
    for i, sample in enumerate(samples):
        if not isinstance(sample, dict):
            ctx.warn(f"samples[{i}] is not an object; skipped")
            ctx.skip("malformed sample")
            continue
        yield data, sample


def eval_samples(path: Path, ctx: ImportContext) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """The ``(header, sample)`` pairs of an ``.eval`` zip, samples in natural order."""
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as e:
        raise InputError(
            f"cannot open the .eval zip: {e}",
            where=str(path),
            hint="the log may be truncated; Inspect writes it at each flush, so a copy "
            "taken mid-write can be partial",
        ) from None
    with zf:
        names = set(zf.namelist())
        header = _eval_header(zf, names, path, ctx)
        members = sorted(
            (n for n in names if n.startswith("samples/") and n.endswith(".json")), key=_natural
        )
        if not members:
            ctx.warn(
                f"log has no samples (status {header.get('status', 'unknown')!r}: "
                "header only, or no sample had finished); imported 0 sessions"
            )
            return
        for name in members:
            if name.count("/") > 1:  # the chunked .eval2 layout, not this one
                ctx.skip("unsupported sample entry")
                continue
            try:
                raw = _read_member(zf, name, path, ctx)
            except CorruptMember as e:  # a bad CRC, a broken deflate stream: this sample only
                ctx.warn(f"{e.message}; sample skipped, the others kept")
                ctx.skip("unreadable sample")
                continue
            try:
                sample = parse_json(raw, ctx)
            except json.JSONDecodeError as e:
                ctx.warn(f"{name}: {'JSON ' + e.msg if isinstance(e, NestingError) else f'malformed JSON ({e.msg})'}; "
                         "sample skipped")
                ctx.skip("malformed sample")
                continue
            if not isinstance(sample, dict):
                ctx.warn(f"{name}: not an object; sample skipped")
                ctx.skip("malformed sample")
                continue
            yield header, sample


class CorruptMember(InputError):
    """A zip member whose bytes do not decompress or check out."""


def _read_member(zf: zipfile.ZipFile, name: str, path: Path, ctx: ImportContext) -> bytes:
    """One member's bytes, bounded (``_inflate``: its declared size, and what it inflates to, at
    most ``stream_limit`` of its compressed size; the file's members together, its budget)."""
    info = zf.getinfo(name)
    cap = stream_limit(info.compress_size)
    if info.file_size > cap:  # zipfile reads no more than the declared size, whatever the stream holds
        raise CorruptMember(f"{name}: declares {info.file_size / 2**20:,.1f} MiB from {info.compress_size:,} "
                            f"compressed bytes, more than ctxf inflates (a zip bomb?); {limits_text()}",
                            where=str(path))
    if info.flag_bits & 0x1:
        raise CorruptMember(f"{name}: the member is encrypted (password-protected), and ctxf reads no "
                            "encrypted zip member", where=str(path))
    try:
        with zf.open(name) as f:
            data = f.read(cap + 1)
    except NotImplementedError as e:  # zstd/deflate64 members need a newer zipfile
        raise InputError(
            f"{name}: {e}",
            where=str(path),
            hint="this .eval uses a zip compression Python's zipfile cannot read here; "
            "convert it with `inspect log convert --to json` and import the .json",
        ) from None
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error, RuntimeError, ValueError) as e:
        # zlib.error: a deflate stream that does not inflate (a corrupt or tampered member);
        # RuntimeError: a member zipfile takes for encrypted or password-protected by its header
        raise CorruptMember(f"{name}: cannot read member: {e}", where=str(path)) from None
    if len(data) > cap:
        raise CorruptMember(f"{name}: inflates to more than {cap / 2**20:,.1f} MiB (a zip bomb?); {limits_text()}",
                            where=str(path))
    charge(ctx, len(data), name)
    return data


def _eval_header(zf: zipfile.ZipFile, names: set[str], path: Path, ctx: ImportContext) -> dict[str, Any]:
    def read(name: str) -> Any:
        try:
            return parse_json(_read_member(zf, name, path, ctx), ctx)
        except NestingError as e:
            raise InputError(f"{name}: JSON {e.msg}", where=str(path), hint=NESTING_HINT) from None
        except json.JSONDecodeError as e:
            raise InputError(f"{name}: malformed JSON: {e.msg}", where=str(path)) from None

    if "header.json" in names:
        header = read("header.json")
    elif "_journal/start.json" in names:  # never finished: no header.json written
        header = dict(read("_journal/start.json"))
        header.setdefault("status", "started")
        ctx.warn("no header.json (the eval did not finish); read _journal/start.json")
    elif "start.json" in names:  # the first .eval layout
        header = dict(read("start.json"))
        if "results.json" in names:
            results = read("results.json")
            if isinstance(results, dict):
                header.update(results)
    else:
        raise InputError(
            "not an Inspect .eval log: no header.json or _journal/start.json in the zip",
            where=str(path),
            hint="force another format with --format",
        )
    if not isinstance(header, dict) or not isinstance(header.get("eval"), dict):
        raise InputError("Inspect header has no 'eval' section", where=str(path))
    return header


def _natural(name: str) -> tuple:
    m = _SAMPLE_NAME.match(name)
    if not m:
        return (2, name)
    # Digits compared as numbers by (length, text): no int() of a name's digits, however many.
    sid, epoch = m.group(1), m.group(2).lstrip("0")
    epoch_key = (len(epoch), epoch)
    if sid.isascii() and sid.isdigit():
        digits = sid.lstrip("0")
        return (0, (len(digits), digits), "", epoch_key)
    return (1, (0, ""), sid, epoch_key)
