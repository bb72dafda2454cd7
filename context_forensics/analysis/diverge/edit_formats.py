"""Edit formats that carry several changes in one text: the parsers ``edits`` reads them with.

- **SEARCH/REPLACE blocks** as Cline writes them in ``replace_in_file``'s ``diff`` (and its UI's
  ``editedExistingFile``): ``------- SEARCH`` / ``=======`` / ``+++++++ REPLACE``, or the older
  ``<<<<<<< SEARCH`` / ``>>>>>>> REPLACE`` markers (cline/cline ``src/core/assistant-message/diff.ts``
  accepts both): ``search_replace_blocks``;
- **Aider's edit blocks** in a reply's text (Aider-AI/aider ``aider/coders/editblock_coder.py``:
  ``<{5,9} SEARCH``, ``={5,9}``, ``>{5,9} REPLACE``, the file's path on a line just before the
  block or the fence, else the previous block's file; an empty SEARCH makes a new file), and its
  ``whole`` format's file listings (``wholefile_coder.py``: the path on the line before a fenced
  block holding the entire file): ``aider_blocks``, ``aider_listings``;
- **Codex's apply_patch envelope** (openai/codex ``codex-rs/apply-patch``): ``*** Begin Patch``,
  then ``*** Add File: p`` (lines ``+``), ``*** Delete File: p``, ``*** Update File: p`` (optional
  ``*** Move to: q``, hunks after ``@@`` of `` ``/``-``/``+`` lines), ``*** End Patch``:
  ``apply_patch_files``.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

_CLINE_HEAD = re.compile(r"^(?:-{3,}|<{3,}) ?SEARCH>?\s*$")
_CLINE_SEP = re.compile(r"^={3,}\s*$")
_CLINE_TAIL = re.compile(r"^(?:\+{3,}|>{3,}) ?REPLACE>?\s*$")
_AIDER_HEAD = re.compile(r"^<{5,9} SEARCH>?\s*$")
_AIDER_SEP = re.compile(r"^={5,9}\s*$")
_AIDER_TAIL = re.compile(r"^>{5,9} REPLACE\s*$")
_FENCE = re.compile(r"^\s*(```+|~~~+)\s*[\w+.-]*\s*$")
_NAMEISH = re.compile(r"^[\w@~./\\:-]*[\w-]\.[\w-]+$|^[\w@~.-]*/[\w@~./-]*[\w-]$|^[\w-]+$")


@dataclass(frozen=True)
class Replacement:
    """One search/replace pair of one file (``path`` None when the format names none)."""

    path: str | None
    search: str
    replace: str


def _join(lines: list[str]) -> str:
    return "\n".join(lines) + ("\n" if lines else "")


def search_replace_blocks(diff: str) -> list[Replacement] | None:
    """Cline's SEARCH/REPLACE blocks of one file's ``diff``: (search, replace) pairs, path None;
    None when the text holds no complete block."""
    out: list[Replacement] = []
    search: list[str] | None = None
    replace: list[str] | None = None
    for line in diff.replace("\r\n", "\n").split("\n"):
        if search is None:
            if _CLINE_HEAD.match(line):
                search = []
        elif replace is None:
            if _CLINE_SEP.match(line):
                replace = []
            else:
                search.append(line)
        elif _CLINE_TAIL.match(line):
            out.append(Replacement(None, _join(search), _join(replace)))
            search = replace = None
        else:
            replace.append(line)
    return out or None


def _filename(line: str) -> str | None:
    """A path as Aider finds it on a line near a block (``aider/coders/editblock_coder.strip_filename``)."""
    s = line.strip()
    if not s or s.startswith(("```", "~~~")) or s == "...":
        return None
    s = s.rstrip(":").lstrip("#").strip().strip("`").strip("*").strip()
    return s if s and " " not in s and _NAMEISH.match(s) else None


def aider_blocks(text: str) -> list[Replacement]:
    """Aider's SEARCH/REPLACE edit blocks in a reply, each with its file (see the module
    docstring); a block whose file cannot be named is left out."""
    lines = text.replace("\r\n", "\n").split("\n")
    out: list[Replacement] = []
    last: str | None = None
    i = 0
    while i < len(lines):
        if not _AIDER_HEAD.match(lines[i]):
            i += 1
            continue
        path = None
        for back in range(1, 4):  # the path is on one of the 3 lines before (a fence may sit between)
            if i - back < 0:
                break
            cand = lines[i - back]
            if _FENCE.match(cand):
                continue
            path = _filename(cand)
            break
        path = path or last
        j = i + 1
        search: list[str] = []
        while j < len(lines) and not _AIDER_SEP.match(lines[j]):
            search.append(lines[j])
            j += 1
        replace: list[str] = []
        j += 1
        while j < len(lines) and not _AIDER_TAIL.match(lines[j]):
            replace.append(lines[j])
            j += 1
        if j < len(lines) and path is not None:
            out.append(Replacement(path, _join(search), _join(replace)))
            last = path
        i = j + 1
    return out


AIDER_FAILED = "SEARCH/REPLACE block failed to match"  # in Aider's feedback on blocks it could not apply
_AIDER_FAILED_BLOCK = re.compile(r"^## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in "
                                 r"(.+?)\s*\n<{5,9} SEARCH\s*\n(.*?)^={5,9}\s*$", re.MULTILINE | re.DOTALL)


def aider_failed_blocks(text: str) -> list[tuple[str, str]]:
    """(path, SEARCH text stripped) of each block Aider's feedback says failed to match
    (``editblock_coder.apply_edits``: ``## SearchReplaceNoExactMatch: ... lines in PATH`` and the block)."""
    return [(m.group(1), m.group(2).strip()) for m in _AIDER_FAILED_BLOCK.finditer(text)]


def aider_listings(text: str, names: Collection[str] = ()) -> list[tuple[str, str]]:
    """(path, entire content) of each file listing of Aider's ``whole`` edit format in a reply: a
    fenced block after a line naming a file (a path-like word, or one of ``names``: the files
    Aider said it wrote, whatever their names)."""
    lines = text.replace("\r\n", "\n").split("\n")
    out: list[tuple[str, str]] = []
    i = 1
    while i < len(lines):
        m = _FENCE.match(lines[i])
        path = None
        if m is not None:
            prev = lines[i - 1].strip()
            named = next((n for n in (prev, prev.rstrip(":"), prev.rstrip(":").strip("`*# "),
                                      prev.lstrip("#").strip().rstrip(":").strip()) if n in names), None)
            path = named or _filename(lines[i - 1])
            if path is not None and path not in names and "." not in path and "/" not in path:
                path = None
        if m is None or path is None:
            i += 1
            continue
        close = m.group(1)
        j = i + 1
        body: list[str] = []
        while j < len(lines) and lines[j].strip() != close:
            body.append(lines[j])
            j += 1
        if j < len(lines):
            out.append((path, _join(body)))
        i = j + 1
    return out


@dataclass
class PatchFile:
    """One file of an apply_patch envelope."""

    op: str  # add | delete | update
    path: str
    move_to: str | None = None
    content: str = ""  # add: the new file
    hunks: list[tuple[str, str]] = field(default_factory=list)  # update: (old, new) per ``@@`` hunk


_PATCH_FILE = re.compile(r"^\*\*\* (Add|Delete|Update) File: (.+?)\s*$")


def apply_patch_files(text: str) -> list[PatchFile] | None:
    """The files of a Codex ``apply_patch`` envelope; None when the text holds none."""
    if "*** Begin Patch" not in text:
        return None
    out: list[PatchFile] = []
    cur: PatchFile | None = None
    old: list[str] = []
    new: list[str] = []

    def flush() -> None:
        if cur is not None and cur.op == "update" and (old or new):
            cur.hunks.append((_join(old), _join(new)))
        old.clear()
        new.clear()

    for line in text.replace("\r\n", "\n").split("\n"):
        if (m := _PATCH_FILE.match(line)) is not None:
            flush()
            cur = PatchFile(m.group(1).lower(), m.group(2))
            out.append(cur)
        elif line.startswith("*** Move to: ") and cur is not None:
            cur.move_to = line[len("*** Move to: "):].strip()
        elif line.startswith("*** End Patch") or line.startswith("*** Begin Patch") or cur is None:
            flush()
        elif cur.op == "add":
            if line.startswith("+"):
                cur.content += line[1:] + "\n"
        elif cur.op == "update":
            if line.startswith("@@"):
                flush()
            elif line.startswith("*** End of File"):
                continue
            elif line.startswith("-"):
                old.append(line[1:])
            elif line.startswith("+"):
                new.append(line[1:])
            elif line.startswith(" ") or line == "":
                old.append(line[1:])
                new.append(line[1:])
    flush()
    return out or None


__all__ = ["PatchFile", "Replacement", "aider_blocks", "aider_listings", "apply_patch_files",
           "search_replace_blocks"]
