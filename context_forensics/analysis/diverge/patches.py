"""Patches: the change a run made to its repository, read from the patch it submitted or
rebuilt from its edits, and two runs' changes compared file by file and hunk by hunk.

``ctxf diverge`` uses this for the *decisive* divergence of two coding-agent runs: the
earliest divergence is often exploration (``ls -R`` vs ``ls -la``), while what decides the
outcome is where the fix differs.

Hunks are compared as **change blocks**: one contiguous run of removed and added lines. A
unified diff's hunk is split at its context lines into blocks (git cuts and merges hunks by
the context it keeps, so one change can come out as differently cut hunks in two runs), and
an edit (old text -> new text) is turned into blocks by ``difflib`` over its lines. Two blocks
are the same when they are in the same file and remove and add the same lines with
whitespace collapsed; blank lines and line numbers are ignored.

A reconstructed patch (:class:`Rebuild`) applies a run's edits in order: a file the run
created is added with its content, and later edits apply to that content; edits of files
that were in the repository are kept as (old, new) pairs, an edit of text an earlier edit
wrote is folded into that earlier pair, a revert (``git checkout f``) drops the file's pairs,
and a file changed by a command that does not show the change (a script, a ``sed`` line
command) is marked ``unknown``: its hunks are not counted.
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

MAX_HUNK_LINES = 40  # lines of one side's hunk in a report


def _norm(line: str) -> str:
    return " ".join(line.split())


@dataclass(frozen=True)
class Block:
    """One change block: consecutive removed and added lines of one file."""

    path: str
    removed: tuple[str, ...]
    added: tuple[str, ...]

    @property
    def sig(self) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        """What two runs must share to have made this change (whitespace collapsed, no blanks)."""
        return (self.path, tuple(n for n in map(_norm, self.removed) if n),
                tuple(n for n in map(_norm, self.added) if n))

    @property
    def empty(self) -> bool:
        _, rem, add = self.sig
        return not rem and not add

    def lines(self) -> list[str]:
        return [f"-{x}" for x in self.removed] + [f"+{x}" for x in self.added]


def blocks_between(path: str, old: str, new: str) -> list[Block]:
    """The change blocks that turn ``old`` into ``new`` (line diff), blank-only blocks dropped."""
    a, b = old.split("\n"), new.split("\n")
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            blk = Block(path, tuple(a[i1:i2]), tuple(b[j1:j2]))
            if not blk.empty:
                out.append(blk)
    return out


def added_blocks(path: str, text: str) -> list[Block]:
    """The change block of ``text`` added to ``path`` as new lines (none when it is blank)."""
    blk = Block(path, (), tuple(text.split("\n")))
    return [] if blk.empty else [blk]


@dataclass
class FilePatch:
    path: str
    status: str  # modified | added | deleted | changed (by a command that does not show how)
    blocks: list[Block] = field(default_factory=list)
    unknown: bool = False  # part of the change is not recoverable from the log

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "status": self.status, "hunks": None if self.unknown else len(self.blocks),
                "unknown": self.unknown}


@dataclass
class Patch:
    """A run's change to the repository and where it was read from."""

    source: str  # submission | metadata | reconstructed
    files: dict[str, FilePatch]
    note: str
    reconstructed: bool = False
    truncated: bool = False
    # the run's own changes of repository files its submission lacks: {file, step, seq, by, by_step,
    # by_seq, command, words} each (``by``: "commit" / "stash" when a later command took the change out of
    # what ``git diff`` shows; None when the log does not show why)
    unsubmitted: list[dict[str, Any]] = field(default_factory=list)

    def blocks(self) -> list[Block]:
        return [b for f in self.files.values() for b in f.blocks]

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "reconstructed": self.reconstructed, "truncated": self.truncated,
                "note": self.note, "files": [f.to_dict() for f in self.files.values()],
                "hunks": sum(len(f.blocks) for f in self.files.values()),
                "unknown_files": sorted(p for p, f in self.files.items() if f.unknown),
                "unsubmitted": self.unsubmitted}


def parse_patch(text: str) -> dict[str, FilePatch] | None:
    """The files and change blocks of a unified diff (``git diff`` output); None when the text
    holds no diff at all (an empty text is an empty patch: no change)."""
    from unidiff import PatchSet
    from unidiff.errors import UnidiffParseError

    if not text.strip():
        return {}
    start = text.find("diff --git ")
    if start < 0:
        start = text.find("--- ")
    if start < 0:
        return None
    try:
        ps = PatchSet(text[start:])
    except UnidiffParseError:
        return None
    out: dict[str, FilePatch] = {}
    for pf in ps:
        path = pf.path
        status = "added" if pf.is_added_file else "deleted" if pf.is_removed_file else "modified"
        blocks: list[Block] = []
        for hunk in pf:
            rem: list[str] = []
            add: list[str] = []
            for line in [*hunk, None]:
                if line is not None and (line.is_removed or line.is_added):
                    (rem if line.is_removed else add).append(line.value.rstrip("\n"))
                    continue
                if rem or add:  # a context line (or the hunk's end) closes the block
                    blk = Block(path, tuple(rem), tuple(add))
                    if not blk.empty:
                        blocks.append(blk)
                    rem, add = [], []
        out[path] = FilePatch(path, status, blocks)
    return out


class Rebuild:
    """A patch rebuilt from a run's edits, applied in order (see the module docstring)."""

    def __init__(self) -> None:
        self.created: dict[str, str | None] = {}  # files the run created: content (None: not known)
        self.pairs: dict[str, list[list[str]]] = {}  # repository files: [old, new] per edit
        self.unknown: set[str] = set()
        self.edits = 0
        self.ignored: list[str] = []

    def create(self, path: str, content: str) -> None:
        self.edits += 1
        if path in self.pairs or path in self.unknown:
            # a repository file written whole: its old content is not in the log
            self.pairs.pop(path, None)
            self.unknown.add(path)
            return
        self.created[path] = content

    def replace(self, path: str, old: str, new: str) -> None:
        self.edits += 1
        if path in self.created:
            content = self.created[path]
            if content is not None and old in content:
                self.created[path] = content.replace(old, new, 1)
            else:
                self.created[path] = None
            return
        pairs = self.pairs.setdefault(path, [])
        for p in pairs:
            if p[1] and p[1] in old:  # this edit rewrites text an earlier edit wrote: fold it in
                p[0], p[1] = old.replace(p[1], p[0], 1), new
                return
            if old and old in p[1]:
                p[1] = p[1].replace(old, new, 1)
                return
        pairs.append([old, new])

    def insert(self, path: str, line: int | None, new: str) -> None:
        self.edits += 1
        if path in self.created:
            content = self.created[path]
            if content is not None and isinstance(line, int):
                rows = content.split("\n")
                self.created[path] = "\n".join(rows[:line] + new.split("\n") + rows[line:])
            else:
                self.created[path] = None
            return
        self.pairs.setdefault(path, []).append(["", new])

    def changed(self, path: str) -> None:
        """Changed by a command that does not show how."""
        self.edits += 1
        if path in self.created:
            self.created[path] = None
        else:
            self.unknown.add(path)

    def delete(self, path: str) -> None:
        if path in self.created:
            del self.created[path]
        else:
            self.ignored.append(f"rm {path}")  # not a file the run made: the log cannot tell what it held

    def revert(self, path: str) -> None:
        self.pairs.pop(path, None)
        self.unknown.discard(path)

    def undo(self, path: str) -> None:
        if self.pairs.get(path):
            self.pairs[path].pop()

    def patch(self, note: str) -> Patch:
        files: dict[str, FilePatch] = {}
        for path in sorted(set(self.pairs) | self.unknown):
            blocks = [b for old, new in self.pairs.get(path, []) for b in blocks_between(path, old, new)]
            if blocks or path in self.unknown:
                files[path] = FilePatch(path, "changed" if path in self.unknown and not blocks else "modified",
                                        blocks, unknown=path in self.unknown)
        for path, content in sorted(self.created.items()):
            if content is None:
                files[path] = FilePatch(path, "added", [], unknown=True)
            else:
                files[path] = FilePatch(path, "added", added_blocks(path, content.rstrip("\n")))
        if self.ignored:
            note += f"; not counted: {', '.join(self.ignored[:5])}" + (" …" if len(self.ignored) > 5 else "")
        return Patch("reconstructed", files, note, reconstructed=True)


def compare_patches(a: Patch | None, b: Patch | None) -> dict[str, Any]:
    """Files touched by each run, files in common, and change blocks in common / only in A /
    only in B (counted as multisets of block signatures)."""
    out: dict[str, Any] = {"a": a.to_dict() if a else None, "b": b.to_dict() if b else None}
    if a is None or b is None:
        missing = " and ".join(s for s, p in (("A", a), ("B", b)) if p is None)
        out.update(comparable=False, note=f"no patch for {missing}: neither recorded nor recoverable from the log",
                   files_a=sorted(a.files) if a else None, files_b=sorted(b.files) if b else None,
                   common_files=None, hunks=None, per_file=[])
        return out
    ca, cb = Counter(x.sig for x in a.blocks()), Counter(x.sig for x in b.blocks())
    per_file: list[dict[str, Any]] = []
    for path in sorted(set(a.files) | set(b.files)):
        fa, fb = a.files.get(path), b.files.get(path)
        fa_c = Counter({k: v for k, v in ca.items() if k[0] == path})
        fb_c = Counter({k: v for k, v in cb.items() if k[0] == path})
        per_file.append({"path": path, "a": fa.status if fa else None, "b": fb.status if fb else None,
                         "common": sum((fa_c & fb_c).values()), "only_a": sum((fa_c - fb_c).values()),
                         "only_b": sum((fb_c - fa_c).values()),
                         "unknown": [s for s, f in (("a", fa), ("b", fb)) if f is not None and f.unknown]})
    unknown = sorted({f"{s.upper()}: {p['path']}" for p in per_file for s in p["unknown"]})
    note = "hunks are change blocks (runs of removed/added lines, whitespace collapsed, line numbers ignored)"
    if unknown:
        note += f"; not countable (the log does not show the change): {', '.join(unknown)}"
    out.update(comparable=True, note=note, files_a=sorted(a.files), files_b=sorted(b.files),
               common_files=sorted(set(a.files) & set(b.files)),
               hunks={"common": sum((ca & cb).values()), "only_a": sum((ca - cb).values()),
                      "only_b": sum((cb - ca).values())},
               per_file=per_file)
    return out


def hunk_lines(blocks: list[Block], limit: int = MAX_HUNK_LINES) -> list[str]:
    """A readable hunk: ``-`` / ``+`` lines per block, blocks separated by ``@@`` (capped)."""
    out: list[str] = []
    for k, b in enumerate(blocks):
        if k:
            out.append("@@")
        out.extend(b.lines())
    return out if len(out) <= limit else out[:limit] + [f"… {len(out) - limit} more line(s)"]


__all__ = ["Block", "FilePatch", "Patch", "Rebuild", "added_blocks", "blocks_between", "compare_patches",
           "hunk_lines", "parse_patch"]
