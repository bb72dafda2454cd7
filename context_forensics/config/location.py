"""Which store a command reads and writes, and why: one store wherever the user stands.

The order (the first that applies wins):

1. ``--db PATH`` (``db=`` in the API);
2. ``$CTXF_DB``;
3. ``storage.path`` set in the config file (relative to the working folder; ``~`` expanded);
4. ``./forensics_data/sessions.db`` when it exists in the working folder (where ctxf kept its
   store before there was a user-level one): used, and said;
5. the user-level store, ``sessions.db`` in platformdirs' user data folder for ``ctxf``
   (``$XDG_DATA_HOME/ctxf``, else ``~/.local/share/ctxf`` on Linux; ``~/Library/Application
   Support/ctxf`` on macOS).

ctxf's cache (the rebuilt tokenizer files, the ONNX export) is in platformdirs' user cache folder
(``tokens.assets.cache_dir``). ``platformdirs`` is imported only when a path is resolved.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .schema import Config

APP = "ctxf"
DB_ENV = "CTXF_DB"
WORKING_STORE = "./forensics_data/sessions.db"  # the store's place before the user-level one
STORE_FILE = "sessions.db"

# Where the path came from (``StoreLocation.origin``), in the order they win.
ORIGINS = ("--db", "$CTXF_DB", "storage.path", "working folder", "user data folder")


@dataclass(frozen=True)
class StoreLocation:
    """The store's ``path``, where it came from (``origin``, one of ``ORIGINS``) and why, in a
    sentence (``reason``)."""

    path: str
    origin: str
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"path": self.path, "origin": self.origin, "reason": self.reason,
                "exists": self.path == ":memory:" or Path(self.path).exists()}


def _absolute_or_none(raw: str | None) -> Path | None:
    return Path(raw) if raw and os.path.isabs(raw) else None


def user_data_dir() -> Path:
    """ctxf's user data folder (platformdirs). A relative ``$XDG_DATA_HOME`` is ignored, as the
    XDG spec says (platformdirs would take it, and the store would move with the working folder)."""
    import platformdirs

    if os.environ.get("XDG_DATA_HOME") and not _absolute_or_none(os.environ["XDG_DATA_HOME"]):
        return Path.home() / ".local" / "share" / APP
    return Path(platformdirs.user_data_dir(APP, appauthor=False))


def user_cache_dir() -> Path:
    """ctxf's user cache folder (platformdirs); a relative ``$XDG_CACHE_HOME`` is ignored."""
    import platformdirs

    if os.environ.get("XDG_CACHE_HOME") and not _absolute_or_none(os.environ["XDG_CACHE_HOME"]):
        return Path.home() / ".cache" / APP
    return Path(platformdirs.user_cache_dir(APP, appauthor=False))


def user_store() -> Path:
    """The user-level store: ``sessions.db`` in ctxf's user data folder."""
    return user_data_dir() / STORE_FILE


def store_location(cfg: Config | None = None, db: str | Path | None = None) -> StoreLocation:
    """The store to open for ``cfg`` (its ``storage.path``) and ``db`` (``--db``), by the order
    in this module's docstring."""
    if db is not None and str(db) != "":
        return StoreLocation(str(db), "--db", "given with --db")
    env = os.environ.get(DB_ENV, "")
    if env.strip():
        return StoreLocation(os.path.expanduser(env), "$CTXF_DB", f"from ${DB_ENV}")
    if cfg is not None and cfg.storage.path:
        return StoreLocation(os.path.expanduser(cfg.storage.path), "storage.path", f"storage.path in {cfg.source}")
    if Path(WORKING_STORE).is_file():
        return StoreLocation(WORKING_STORE, "working folder",
                             f"found in the working folder; elsewhere ctxf uses the user-level store, {user_store()}")
    return StoreLocation(str(user_store()), "user data folder",
                         f"the user-level store: no --db, ${DB_ENV}, storage.path or {WORKING_STORE} here")


__all__ = ["DB_ENV", "ORIGINS", "StoreLocation", "WORKING_STORE", "store_location", "user_cache_dir",
           "user_data_dir", "user_store"]
