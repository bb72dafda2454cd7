"""Exit codes (a public contract) and the domain errors that map onto them.

The CLI converts these at one boundary; the core raises them and never exits.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1  # unreadable input, a failed file, a broken store
    USAGE = 2  # bad arguments, unknown format, invalid config
    FINDINGS = 3  # audit rules in --fail-on found something
    INTERRUPTED = 130


class CtxfError(Exception):
    """An error a user can act on: says what, where, and how to fix it."""

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where
        self.hint = hint

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class UsageError(CtxfError):
    exit_code = ExitCode.USAGE


class ConfigError(UsageError):
    """The config file is invalid: names the file, the key path and the allowed values."""


class UnknownFormatError(UsageError):
    """No importer recognises a file."""


class InputError(CtxfError):
    """A log file cannot be read or parsed (malformed JSON, empty file, wrong shape)."""


class StoreError(CtxfError):
    """The SQLite store cannot be opened or written."""


class StoreBusyError(StoreError):
    """Another process held the store's write lock for longer than the busy timeout."""


class StoreReadOnlyError(StoreError):
    """A write (ingest, rm) was asked of a store opened read-only."""


class StoreVersionError(StoreError):
    """The store was written by a newer ctxf (a schema this version does not know)."""


class StoreCorruptError(StoreError):
    """The store fails SQLite's integrity check: nothing is written into it."""


class NotFoundError(UsageError):
    """A session reference matches nothing (or more than one thing)."""


class AssetError(CtxfError):
    """A bundled asset (tokenizer vocabulary, embedding model) is missing or does not match."""
