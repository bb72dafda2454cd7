"""Private files: what ctxf writes that holds log text is readable by its owner only.

The store's folder is created 0700 and its files 0600 (the database, and its ``-wal`` and
``-shm``, which SQLite creates with the database's mode), and so are the files written from a
store (``ctxf report --html``, the ``view`` page, audit's ``--junit``, ``--markdown`` and
``--jsonl``, every ``--plot`` image) and the spooled copies of streams: logs hold credentials and private code, and
the umask (0644 with the usual 022) is not a choice made for them. An existing folder keeps its
mode: it may be the working directory or a shared one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO, TextIO

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def make_private_dir(path: Path) -> None:
    """Create ``path`` and its missing parents, each 0700 whatever the umask; existing
    folders are left as they are."""
    missing: list[Path] = []
    p = Path(path)
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, PRIVATE_DIR)
        except FileExistsError:  # another process made it first: it is theirs to keep
            continue
        os.chmod(d, PRIVATE_DIR)  # mkdir's mode went through the umask


def create_private_file(path: Path) -> bool:
    """Create ``path`` empty and 0600 unless it exists; return whether this call created it.

    Exclusive, so two processes creating a store at once both go on with one file.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, PRIVATE_FILE)  # exactly 0600: os.open's mode went through the umask
    finally:
        os.close(fd)
    return True


def write_private_text(path: Path, text: str, *, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` as a 0600 file, whole or not at all (``write_private_bytes``)."""
    write_private_bytes(path, text.encode(encoding))


def write_private_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` as a 0600 file, whole or not at all; the folders it creates are 0700.

    The bytes go to a temporary file beside the target, renamed over it once complete: a
    reader never sees half a file, an interrupted write leaves the old one, and an existing
    file with a wider mode is replaced by a private one. A symlink is followed (its target is
    written, as ``Path.write_text`` does); a device or a pipe (``/dev/stdout``) is written to.
    """
    path = Path(path)
    if path.exists() and not path.is_file():
        with open(path, "wb") as f:
            f.write(data)
        return
    target = Path(os.path.realpath(path))
    make_private_dir(target.parent)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), PRIVATE_FILE)
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def open_private_text(path: Path, *, encoding: str = "utf-8") -> TextIO:
    """Open ``path`` for writing as a 0600 file, truncated: for a report streamed a line at a
    time (``audit --jsonl``), whose lines must be on disk as they come, also when the run is
    stopped (a reader sees whole lines: each is written and flushed at once). A device or a pipe
    is opened as it is."""
    path = Path(path)
    if path.exists() and not path.is_file():
        return open(path, "w", encoding=encoding)
    return os.fdopen(_private_fd(path), "w", encoding=encoding)


def open_private_bytes(path: Path) -> BinaryIO:
    """``open(path, "wb")`` of a 0600 file, truncated (a spooled copy of a stream or a remote log)."""
    return os.fdopen(_private_fd(Path(path)), "wb")


def _private_fd(path: Path) -> int:
    make_private_dir(Path(os.path.realpath(path)).parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    os.fchmod(fd, PRIVATE_FILE)
    return fd
