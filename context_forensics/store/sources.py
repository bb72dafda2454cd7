"""The inputs of an audit that runs on workers: list them on the driver, read them on a worker.

``list_sources`` turns what the command line names (local paths, folders, globs the shell did
not expand, fsspec URLs such as ``s3://bucket/prefix/``) into ``Source`` records: small,
picklable, in a stable order. Local items go through ``ingest.expand`` (folders an importer
reads whole, companions, sidecars, symlink loops, refused FIFOs), so a worker rebuilds exactly
the units a serial ingest reads (``Source.to_unit``). A URL's files are listed with fsspec
(imported only then; ``pip install "context-forensics[remote]"`` and the backend: s3fs, gcsfs);
a walk of a prefix keeps the files with a log suffix (``LOG_SUFFIXES``) and leaves out what a
local walk leaves out (``inputs.SKIP_DIRS``, dot files that are no known log). ``file://`` URLs
are local paths.

On a worker, ``ingest_source`` reads one source into a store: a local one as ``ingest_unit``
does; a remote one is copied (``fetch``, at most ``inputs.STREAM_LIMIT`` bytes, as for a
stream) into a private folder under its own file name and ingested with the URL as the
session's source, so session ids and file records do not depend on where the copy was.
``group`` cuts the sources into batches for tasks, in order and balanced by size.

What a remote prefix does not have: folders read whole (an OpenHands ``llm_completions/``) and
companions (a Claude Code session's sub-agent files) are recognised on local paths only.
"""

from __future__ import annotations

import glob as globlib
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Iterator
from urllib.parse import unquote, urlparse

from .. import importers
from ..errors import CtxfError, ExitCode, InputError, UnknownFormatError, UsageError
from ..importers.base import read_head
from . import inputs
from .db import Store
from .files import open_private_bytes
from .ingest import FileResult, Unit, _Careful, _ingest_once, expand, ingest_unit
from .units import shown

# Suffixes of the files importers read. A walked file with one of them that no importer
# recognises is either broken (it does not parse: a truncated or corrupt log, which the audit
# could not read) or a well-formed document of a layout ctxf does not read (run metadata, a
# format not supported yet), which is left alone and listed, as `ctxf ingest` does. A walk of a
# remote prefix keeps only files with one of them (or a known dot-file log name).
LOG_SUFFIXES = frozenset({".json", ".jsonl", ".ndjson", ".traj", ".eval", ".yaml", ".yml", ".db", ".sqlite",
                          ".sqlite3"})
REMOTE_HINT = 'pip install "context-forensics[remote]"'
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")  # two letters at least: "C://x" is a Windows drive
_MAGIC = re.compile(r"[*?[]")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Source:
    """One input unit, as a worker needs it (plain values: it pickles).

    ``url``: what reports and the store call it (the path as expanded, or the URL); ``local``:
    the local path, None for a remote file; ``size``: its bytes (a folder: its files'); the rest
    rebuilds the ``ingest.Unit`` (``importer`` a format name, None: detected at ingest)."""

    url: str
    local: str | None
    size: int = 0
    importer: str | None = None
    explicit: bool = False
    companion: bool = False  # brought along by the source before it (``Importer.companions``)
    stream: bool = False  # a pipe: readable in the driver's process only
    folder: bool = False  # a folder an importer reads whole
    problem: CtxfError | None = field(default=None, compare=False)  # refused: never read

    @property
    def remote(self) -> bool:
        return self.local is None

    def to_unit(self) -> Unit:
        """The ingest unit of a local source."""
        if self.local is None:
            raise ValueError(f"{self.url} is remote: fetch it first (ingest_source does)")
        imp = importers.get(self.importer) if self.importer else None
        return Unit(Path(self.local), imp, self.explicit, stream=self.stream, problem=self.problem,
                    companion=self.companion)


@dataclass
class SourceList:
    """What ``list_sources`` found: the sources in order, the walked files no importer
    recognised (``ignored``, as ``ingest.expand`` gives them) and links a walk skipped."""

    sources: list[Source] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    links_skipped: int = 0

    def __iter__(self) -> Iterator[Source]:
        return iter(self.sources)

    def __len__(self) -> int:
        return len(self.sources)

    @property
    def total_bytes(self) -> int:
        return sum(s.size for s in self.sources)


def is_url(item: str | Path) -> bool:
    """Whether ``item`` is a URL (``scheme://…``), not a path (a Windows drive is a path)."""
    return isinstance(item, str) and _URL.match(item) is not None


# ---------------------------------------------------------------- listing


def list_sources(items: list[str | Path] | tuple[str | Path, ...], *, recursive: bool = True,
                 fmt: str | None = None, storage_options: dict[str, Any] | None = None,
                 classify_many: Any = None) -> SourceList:
    """The sources ``items`` name, each once: the local ones first, in the order ``ingest``
    reads them (one ``expand`` over them all, globs expanded sorted), then each URL's files,
    sorted.

    ``classify_many``: as for ``ingest.expand`` (the walked files' heads read on workers).

    Raises ``UsageError`` for a local path that does not exist, a glob or a URL that matches no
    file, a URL whose fsspec backend is not installed, or fsspec missing."""
    out = SourceList()
    local: list[Path] = []
    remote: list[Source] = []
    for item in items:
        if is_url(item) and str(item).lower().startswith("file://"):
            item = _file_url_path(str(item))
        if is_url(item):
            remote.extend(_remote(str(item), recursive=recursive, fmt=fmt, storage_options=storage_options or {}))
        else:
            local.extend(_local_paths(item))
    found: list[Source] = []
    if local:
        walk = inputs.Walk()
        units, out.ignored = expand(local, fmt=fmt, recursive=recursive, walk=walk, classify_many=classify_many)
        out.links_skipped = walk.links_skipped
        found = [_from_unit(u) for u in units]
    seen: set[str] = set()
    for s in found + remote:
        key = s.url if s.local is None or s.stream else os.path.realpath(s.local)
        if key not in seen:
            seen.add(key)
            out.sources.append(s)
    return out


def _file_url_path(url: str) -> str:
    u = urlparse(url)
    if u.netloc not in ("", "localhost"):
        raise UsageError(f"{url}: a file:// URL on another host ({u.netloc}) is not a local path",
                         hint="use file:///absolute/path, or mount the share and give its path")
    return unquote(u.path) or "/"


def _local_paths(item: str | Path) -> list[Path]:
    """The path ``item`` names, or the paths its glob matches (sorted)."""
    p = Path(item)
    if inputs.kind_of(p) != "missing":
        return [p]
    if isinstance(item, str) and _MAGIC.search(item):
        matches = sorted(globlib.glob(item, recursive=True))
        if not matches:
            raise UsageError(f"no file matches {item}", hint="check the pattern (** matches folders at any depth)")
        return [Path(m) for m in matches]
    raise UsageError("no such file or folder (or a symlink loop)", where=str(item), hint="check the path")


def _from_unit(u: Unit) -> Source:
    folder = u.problem is None and not u.stream and u.path.is_dir()
    return Source(url=str(u.path), local=str(u.path), size=_local_size(u) if u.problem is None else 0,
                  importer=u.importer.name if u.importer is not None else None, explicit=u.explicit,
                  companion=u.companion, stream=u.stream, folder=folder, problem=u.problem)


def _local_size(u: Unit) -> int:
    if u.stream:
        return 0
    try:
        if not u.path.is_dir():
            return u.path.stat().st_size
        size = 0
        for dirpath, _, names in os.walk(u.path):
            for n in names:
                st = os.stat(os.path.join(dirpath, n))
                if stat.S_ISREG(st.st_mode):
                    size += st.st_size
        return size
    except OSError:  # it fails by name when ingested
        return 0


def _filesystem(url: str, storage_options: dict[str, Any]) -> tuple[Any, str]:
    """(the fsspec filesystem of ``url``, its path there); ``UsageError`` naming what to install."""
    scheme = _URL.match(url).group(1).lower()  # type: ignore[union-attr]
    try:
        import fsspec.core  # type: ignore[import-untyped]
    except ImportError:
        raise UsageError(f"{url}: reading URLs needs fsspec, which is not installed", hint=REMOTE_HINT) from None
    from fsspec.registry import known_implementations  # type: ignore[import-untyped]

    try:
        return fsspec.core.url_to_fs(url, **storage_options)
    except ImportError:
        spec = known_implementations.get(scheme, {})
        package = str(spec.get("class", scheme)).split(".")[0]
        raise UsageError(f"{url}: reading {scheme}:// URLs needs {package}, which is not installed",
                         hint=f"pip install {package}") from None
    except ValueError as e:
        if scheme not in known_implementations:
            raise UsageError(f"{url}: no fsspec filesystem reads {scheme}:// URLs",
                             hint="give a local path, or a URL such as s3://bucket/prefix/ or gs://bucket/prefix/"
                             ) from None
        raise UsageError(f"{url}: {e}") from None


def _remote(url: str, *, recursive: bool, fmt: str | None, storage_options: dict[str, Any]) -> list[Source]:
    fs, root = _filesystem(url, storage_options)
    imp = importers.get(fmt).name if fmt else None
    try:
        if _MAGIC.search(root):
            base_url, base = _glob_base(url), _glob_base(root)
            entries = fs.glob(root, detail=True)
            files: dict[str, dict] = {}
            for name, info in entries.items():
                if info.get("type") == "directory":
                    files.update(_listing(fs, name, recursive))
                elif _kept(name, base):
                    files[name] = info
            explicit = False
        else:
            info = fs.info(root)
            if info.get("type") != "directory":  # a file named by its URL: read whatever its name
                return [Source(url=url, local=None, size=int(info.get("size") or 0), importer=imp, explicit=True)]
            base_url, base = url, root
            files = _listing(fs, root, recursive)
            explicit = False
    except FileNotFoundError:
        raise UsageError("no such file or prefix", where=url, hint="check the bucket and the prefix") from None
    except PermissionError as e:
        raise UsageError(f"permission denied listing it: {e}", where=url, hint="check the credentials") from None
    if not files:
        raise UsageError("no log file under it (none with a suffix of "
                         + ", ".join(sorted(LOG_SUFFIXES)) + ")", where=url, hint="check the prefix")
    return [Source(url=_child_url(base_url, base, name, fs), local=None, size=int(info.get("size") or 0),
                   importer=imp, explicit=explicit) for name, info in sorted(files.items())]


def _listing(fs: Any, root: str, recursive: bool) -> dict[str, dict]:
    """The log files under ``root``: all levels (``fs.find``) or the first (``fs.ls``)."""
    if recursive:
        found = fs.find(root, detail=True)
    else:
        found = {e["name"]: e for e in fs.ls(root, detail=True)}
    return {n: i for n, i in found.items() if i.get("type") != "directory" and _kept(n, root)}


def _kept(name: str, root: str) -> bool:
    """Whether a walk of ``root`` keeps the file ``name``: a log suffix or a known dot-file log,
    no folder a local walk skips on the way."""
    rel = PurePosixPath(name[len(root.rstrip("/")):].lstrip("/") if name.startswith(root.rstrip("/")) else name)
    if any(part in inputs.SKIP_DIRS for part in rel.parts[:-1]):
        return False
    if not inputs.listed_file(rel.name):
        return False
    return rel.suffix.lower() in LOG_SUFFIXES or inputs.LOG_DOTFILES.match(rel.name) is not None


def _glob_base(pattern: str) -> str:
    """The part of a glob before its first wildcard, up to a slash."""
    head = pattern[: _MAGIC.search(pattern).start()]  # type: ignore[union-attr]
    return head[: head.rfind("/") + 1] if "/" in head else head


def _child_url(base_url: str, base: str, name: str, fs: Any) -> str:
    """The URL of ``name`` found under ``base`` (the path of ``base_url``), spelled as the user
    spelled the prefix: ``memory://logs/a.jsonl``, not the filesystem's ``memory:///logs/...``."""
    stripped = base.rstrip("/")
    if name == stripped:
        return base_url
    if name.startswith(stripped + "/"):
        return base_url.rstrip("/") + "/" + name[len(stripped) + 1:]
    return fs.unstrip_protocol(name)


# ---------------------------------------------------------------- on a worker


def fetch(source: Source, tmpdir: str | Path, *, limit: int = inputs.STREAM_LIMIT,
          storage_options: dict[str, Any] | None = None) -> Path:
    """The local path of ``source``: a local one as it is; a remote one copied into a private
    folder under ``tmpdir`` (which the caller removes: the copy's parent), keeping its file
    name. Raises ``InputError`` naming the URL (gone, denied, longer than ``limit`` bytes)."""
    if source.local is not None:
        return Path(source.local)
    fs, path = _filesystem(source.url, storage_options or {})
    most = f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"
    too_long = InputError(f"longer than {most}, what ctxf copies of a remote file", where=source.url,
                          hint="copy the file to a local disk and give its path")
    if source.size > limit:
        raise too_long
    folder = Path(tempfile.mkdtemp(prefix="ctxf-remote-", dir=str(tmpdir)))
    out = folder / (PurePosixPath(path).name or "remote")
    total = 0
    try:
        with fs.open(path, "rb") as r, open_private_bytes(out) as w:
            while chunk := r.read(_CHUNK):
                total += len(chunk)
                if total > limit:
                    raise too_long
                w.write(chunk)
    except CtxfError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    except FileNotFoundError:
        shutil.rmtree(folder, ignore_errors=True)
        raise InputError("no longer there (removed since it was listed?)", where=source.url) from None
    except PermissionError as e:
        shutil.rmtree(folder, ignore_errors=True)
        raise InputError(f"permission denied reading it: {e}", where=source.url, hint="check the credentials") from None
    except Exception as e:  # a backend's own errors (network, throttling): this file fails, by name
        shutil.rmtree(folder, ignore_errors=True)
        raise InputError(f"cannot fetch it ({type(e).__name__}: {e})", where=source.url) from None
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return out


def ingest_source(store: Store, source: Source, *, tmpdir: str | Path | None = None,
                  storage_options: dict[str, Any] | None = None, task: str | None = None,
                  outcome: str | None = None, force: bool = False, options: dict | None = None,
                  redact: Any = True) -> FileResult:
    """Ingest one source into ``store``; never raises for bad input (the result says it failed).

    A local source is ``ingest_unit`` of its unit. A remote one is fetched into ``tmpdir`` (the
    system's temporary folder when None), ingested with its URL as the session's source and the
    result's path, and its copy removed. A remote file a prefix walk found that no importer
    recognises is ``skipped`` when it is a well-formed document of another layout (as a local
    walk leaves it out), ``failed`` when it is broken (empty, JSON that does not parse). The paths
    the result names are as ingest prints them (``units.shown``: a secret in a file name replaced)."""
    return shown(_ingest_source(store, source, tmpdir=tmpdir, storage_options=storage_options, task=task,
                                outcome=outcome, force=force, options=options, redact=redact), redact)


def _ingest_source(store: Store, source: Source, *, tmpdir: str | Path | None, storage_options: dict[str, Any] | None,
                   task: str | None, outcome: str | None, force: bool, options: dict | None,
                   redact: Any) -> FileResult:
    kwargs: dict[str, Any] = dict(task=task, outcome=outcome, force=force, options=options, redact=redact)
    if source.local is not None:
        return ingest_unit(store, source.to_unit(), **kwargs)
    res = FileResult(path=source.url)
    try:
        copy = fetch(source, tmpdir or tempfile.gettempdir(), storage_options=storage_options)
    except CtxfError as e:
        return _failed(res, e)
    try:
        imp = importers.get(source.importer) if source.importer else None
        if imp is None and not source.explicit:
            try:
                head = read_head(copy)
                imp = importers.detect(copy, head)
            except OSError as e:
                return _failed(res, InputError(f"cannot read its copy: {e}", where=source.url))
            if imp is None:
                err = importers.unknown_format(copy, head)
                if isinstance(err, UnknownFormatError):
                    res.status, res.format = "skipped", None
                    res.warnings.append(f"{source.url}: no importer reads this file's layout: left alone")
                    return res
                return _failed(res, _renamed(err, copy, source.url))
        unit = Unit(copy, imp, source.explicit)
        try:
            res = _ingest_once(store, unit, source=source.url, **kwargs)
        except _Careful:
            res = _ingest_once(store, unit, source=source.url, careful=True, **kwargs)
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)
    res.path = source.url
    res.warnings = [w.replace(str(copy), source.url) for w in res.warnings]
    if res.error:
        res.error = res.error.replace(str(copy), source.url)
    return res


def _renamed(e: CtxfError, copy: Path, url: str) -> CtxfError:
    e.where = url if e.where in (None, str(copy)) else e.where.replace(str(copy), url)
    e.message = e.message.replace(str(copy), url)
    return e


def _failed(res: FileResult, e: CtxfError) -> FileResult:
    res.status, res.error, res.sessions, res.messages = "failed", str(e), [], 0
    res.exit_code = int(ExitCode.USAGE if isinstance(e, UnknownFormatError) else ExitCode.ERROR)
    return res


# ---------------------------------------------------------------- batches


def group(sources: list[Source] | SourceList, *, target_bytes: int, max_files: int) -> list[list[Source]]:
    """The sources cut into batches for tasks, in order: a batch takes sources while it stays
    within ``target_bytes`` and ``max_files``; a source with its companions (a session and its
    sub-agents) is never cut, and a source larger than the target is a batch of its own."""
    if target_bytes <= 0 or max_files <= 0:
        raise ValueError("target_bytes and max_files must be positive")
    bundles: list[list[Source]] = []
    for s in sources:
        if s.companion and bundles:
            bundles[-1].append(s)
        else:
            bundles.append([s])
    batches: list[list[Source]] = []
    size = 0
    for b in bundles:
        b_size = sum(s.size for s in b)
        if batches and batches[-1] and (size + b_size > target_bytes or len(batches[-1]) + len(b) > max_files):
            batches.append([])
            size = 0
        if not batches:
            batches.append([])
        batches[-1].extend(b)
        size += b_size
    return batches


__all__ = ["LOG_SUFFIXES", "REMOTE_HINT", "Source", "SourceList", "fetch", "group", "ingest_source", "is_url",
           "list_sources"]
