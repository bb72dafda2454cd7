"""What a path given to ``ingest`` is, and how a folder is walked.

A regular file or a folder is read as it is. A *stream* (a pipe reached through ``/dev/stdin``,
``/dev/fd/N`` or ``/proc/self/fd/N``: what a shell hands over for ``< file``, ``cmd |`` or
``<(cmd)``) is read once, into a temporary copy of at most ``STREAM_LIMIT`` bytes, because an
importer reads a log more than once (to tell its format, to hash it, to parse it); a stream
that sends nothing for ``STREAM_IDLE_SECONDS`` is given up. A named FIFO, a device
(``/dev/zero``, a terminal) or a socket is refused by name: reading one waits for a writer
forever, or never ends.

A walk visits each folder once, by device and inode, so a symlink back up (``a -> ..``) or a
second link to a folder or file already walked is skipped and counted, and it walks without
recursion (a folder tree of any depth). A folder it cannot list is a failed unit of its own.

What a walk leaves out: the folders of version control, virtual environments, package managers
and tool caches (``SKIP_DIRS``, and any folder holding a ``pyvenv.cfg``), and every dot *file*
that is not a known log (``LOG_DOTFILES``: Aider's ``.aider.chat.history.md`` and
``.aider.llm.history``; ``.env``, ``.gitignore`` and the like are never opened). Other dot
folders are walked: agents keep their logs in them (``.gemini/``, ``.claude/``, ``.copilot/``).
"""

from __future__ import annotations

import os
import re
import select
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from ..errors import CtxfError, InputError
from .files import open_private_bytes

STREAM_LIMIT = 256 * 1024 * 1024  # bytes of a stream read at most
STREAM_IDLE_SECONDS = 60  # a stream silent this long is given up

# Where a shell puts the streams it hands over: /dev/stdin, /dev/fd/N, /proc/self/fd/N, /proc/PID/fd/N.
_FD_PATH = re.compile(r"^/(?:dev/stdin|dev/fd/\d+|proc/(?:self|\d+)/fd/\d+)$")

# Folders a walk never enters: version control, virtual environments, package managers, caches.
SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".bzr", ".jj", ".venv", "venv", ".env", "node_modules", "__pycache__", ".tox",
    ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", ".ipynb_checkpoints", ".eggs",
    ".idea", ".cache", ".npm", ".yarn", ".pnpm-store", ".cargo", ".rustup", ".gradle", ".terraform",
    ".next", ".nuxt", ".parcel-cache", ".direnv", ".github",
})
# Dot files a walk lists (every other dot file is left alone, never opened): the logs tools write
# under dot names. Aider: .aider.chat.history.md, .aider.llm.history (and renamed history files
# such as .aider.llm.history.md), not its prompt-input history .aider.input.history.
LOG_DOTFILES = re.compile(r"^\.aider\..*history(?<!input\.history)(?:\..*)?$")


def skipped_dir(folder: Path) -> bool:
    """Whether a walk leaves ``folder`` out (``SKIP_DIRS``, Aider's tag cache, a virtualenv)."""
    name = folder.name
    if name in SKIP_DIRS or name.startswith(".aider.tags.cache"):
        return True
    return (folder / "pyvenv.cfg").is_file()


def listed_file(name: str) -> bool:
    """Whether a walk lists a file of this name: any name not starting with a dot, and the dot
    files that are known logs (``LOG_DOTFILES``)."""
    return not name.startswith(".") or LOG_DOTFILES.match(name) is not None


def kind_of(path: Path) -> str:
    """``file``, ``dir``, ``stream``, ``fifo`` (a named one), ``device``, ``socket``, ``missing``
    or ``unreadable`` (stat itself failed: a folder on the way that cannot be searched)."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except OSError as e:
        if e.errno == 40:  # ELOOP: a symlink loop, nothing at the end of it
            return "missing"
        return "unreadable"
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    through_fd = bool(_FD_PATH.match(os.path.abspath(str(path))))
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return "stream" if through_fd else ("fifo" if stat.S_ISFIFO(mode) else "socket")
    return "device"  # character or block device: /dev/zero, /dev/null, a terminal


def refusal(kind: str, path: Path) -> CtxfError | None:
    """The error for a path of ``kind`` that is not read at all, or None."""
    where = str(path)
    if kind == "fifo":
        return InputError(
            "a named pipe (FIFO), not a log file: reading it waits for a writer, maybe forever; "
            "not read", where=where, hint=f"pipe it in instead: ctxf ingest /dev/stdin < {path}")
    if kind == "socket":
        return InputError("a socket, not a log file; not read", where=where)
    if kind == "device":
        return InputError(
            "a device (a terminal, /dev/zero, /dev/null ...), not a log file; not read", where=where,
            hint="give a log file, or pipe one in: ctxf ingest /dev/stdin < FILE")
    if kind == "unreadable":
        return InputError("cannot look at this path (permission denied on a folder on the way?)",
                          where=where, hint="check the permissions of the folders above it")
    return None


def spool(path: Path, *, limit: int = STREAM_LIMIT, idle: float = STREAM_IDLE_SECONDS) -> Path:
    """Read the stream at ``path`` once, into a temporary file (in a folder of its own, which the
    caller removes). Raises ``InputError`` past ``limit`` bytes or ``idle`` seconds of silence."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise InputError(f"cannot open the stream: {e.strerror or e}", where=str(path)) from None
    folder = Path(tempfile.mkdtemp(prefix="ctxf-stream-"))
    out = folder / (path.name or "stream")
    total = 0
    try:
        with open_private_bytes(out) as w:
            while True:
                ready, _, _ = select.select([fd], [], [], idle)
                if not ready:
                    raise InputError(
                        f"the stream sent nothing for {idle:g} s; gave up on it", where=str(path),
                        hint="save the log to a file and ingest the file")
                try:
                    chunk = os.read(fd, 1 << 20)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                total += len(chunk)
                if total > limit:
                    raise InputError(
                        f"the stream is longer than {limit // (1024 * 1024)} MiB, what ctxf reads of one",
                        where=str(path), hint="save the log to a file and ingest the file")
                w.write(chunk)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        os.close(fd)
    return out


@dataclass
class Walk:
    """What a walk met besides the files it lists."""

    links_skipped: int = 0  # symlinks (and hard links) to a folder or file already walked
    unreadable: list[tuple[Path, OSError]] = field(default_factory=list)  # folders it could not list
    seen_dirs: set[tuple[int, int]] = field(default_factory=set)
    seen_files: set[tuple[int, int]] = field(default_factory=set)


def walk(root: Path, recursive: bool, dir_unit: Callable[[Path], bool], state: Walk) -> list[Path]:
    """The files under ``root``, depth first, in name order (the folders ``skipped_dir`` names
    and dot files that are no known logs left out). A folder ``dir_unit`` takes (one an importer
    reads whole) is not entered."""
    files: list[Path] = []
    try:
        st = root.stat()
    except OSError as e:
        state.unreadable.append((root, e))
        return files
    if (st.st_dev, st.st_ino) in state.seen_dirs:
        state.links_skipped += 1
        return files
    state.seen_dirs.add((st.st_dev, st.st_ino))
    stack: list[Iterator[Path]] = [_entries(root, state)]
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        try:
            est = entry.stat()  # through a symlink: what it points at
        except PermissionError as e:  # a folder that lists its names but may not be searched (r--)
            if not any(f == entry.parent for f, _ in state.unreadable):
                state.unreadable.append((entry.parent, e))
            continue
        except OSError:
            continue  # a broken link, a loop of links: nothing to read
        key = (est.st_dev, est.st_ino)
        if stat.S_ISDIR(est.st_mode):
            if key in state.seen_dirs:  # a link back up, or a second way into a walked folder
                state.links_skipped += 1
                continue
            state.seen_dirs.add(key)
            try:  # both look inside the folder: one the user may not enter fails on its own
                if skipped_dir(entry) or dir_unit(entry):
                    continue
            except OSError as e:
                state.unreadable.append((entry, e))
                continue
            if recursive:
                stack.append(_entries(entry, state))
        elif stat.S_ISREG(est.st_mode):
            if not listed_file(entry.name):
                continue
            if key in state.seen_files:
                state.links_skipped += 1
                continue
            state.seen_files.add(key)
            files.append(entry)
        # FIFOs, devices and sockets in a folder are not logs: left alone, never opened
    return files


def _entries(folder: Path, state: Walk) -> Iterator[Path]:
    try:
        names = sorted(folder.iterdir())
    except OSError as e:
        state.unreadable.append((folder, e))
        return iter(())
    return iter(names)


def os_error_message(e: OSError) -> tuple[str, str | None]:
    """(what went wrong, a hint) for an OSError reading a log."""
    if isinstance(e, PermissionError):
        return ("permission denied: no read permission",
                "check its permissions (ls -l), or run ctxf as a user who can read it")
    if isinstance(e, IsADirectoryError):
        return "is a folder", None
    return f"cannot read: {e.strerror or e}", None


__all__ = ["LOG_DOTFILES", "SKIP_DIRS", "STREAM_IDLE_SECONDS", "STREAM_LIMIT", "Walk", "kind_of", "listed_file",
           "os_error_message", "refusal", "skipped_dir", "spool", "walk"]
