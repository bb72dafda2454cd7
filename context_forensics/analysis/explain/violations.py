"""Violations: the prohibitions among a run's tracked constraints, and the actions that broke them.

A constraint is a **prohibition** when one of its sentences negates an action ("Never modify
files under tests/", "Do not run `git push --force`", "You must not edit setup.py"; the stance
comes from ``matching.polarity``; "QDP is not case sensitive" negates no action). What it forbids is
what that sentence names that an action can touch:

- a path, folder or file name (``tests/``, ``src/core/*.py``, ``setup.py``, ``package.json``):
  an edit that changed a file there breaks it (the edits the log shows: ``diverge.edits``; one
  that puts the file back, ``git checkout FILE`` or an undo, does not);
- a command in backticks (`` `git push --force` ``): a shell action whose command
  holds it breaks it.

A prohibition that names neither (``"Never be rude"``) cannot be checked against actions and is
left out: nothing here guesses what an action means. ``unchecked`` lists the tracked rules about
an action that no action is checked against (a prohibition naming no path or command, "MUST NOT
include comments in the code unless ..."; an obligation, "Always run `pytest -q`"), for explain
to say so. ``violations`` gives the first action that broke each prohibition, in step order.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ...matching.polarity import analyse
from ..diverge.actions import tool_kind
from ..diverge.edits import EditAction
from ..diverge.events import RunEvents

# a path: segments with a slash (tests/, src/a.py, ./docs/*), or a file name with an extension
_PATH = re.compile(r"(?<![\w/.-])((?:\.{0,2}/)?(?:[\w*.-]+/)+[\w*.-]*|[\w*-][\w*.-]*\.[A-Za-z][\w]{0,5})(?![\w/-])")
_CODE = re.compile(r"`([^`\n]{2,80})`")
_NOT_PATHS = {"e.g.", "i.e.", "etc.", "vs."}
# edits that put a file back as it was (``git checkout FILE``, an editor's undo): they break no "do not modify"
_RESTORES = ("revert", "undo")


@dataclass(frozen=True)
class Prohibition:
    """What one constraint forbids that an action can touch."""

    fact: str
    paths: tuple[str, ...]
    commands: tuple[str, ...]


@dataclass(frozen=True)
class Violation:
    """The first action that broke a prohibition."""

    fact: str
    step: int
    seq: int
    action: str  # the action, on one line
    target: str  # the path or command of the fact it touched
    files: tuple[str, ...] = ()  # the files it changed there (an edit)

    def to_dict(self) -> dict[str, Any]:
        return {"fact": self.fact, "step": self.step, "seq": self.seq, "action": self.action,
                "target": self.target, "files": list(self.files)}


# what a prohibition forbids doing (stems, ``matching.polarity.stem``): "never modify", "do not run", ...
_ACTION_STEMS = frozenset({"modifi", "edit", "touch", "chang", "delet", "remov", "run", "use", "commit", "push",
                           "write", "creat", "renam", "instal", "upgrad", "alter", "overwrit", "updat", "add",
                           "execut", "call", "invok", "move", "downgrad", "revert", "rewrit", "replac", "includ"})
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(])|\n+")


def _forbidding(sentence: str) -> bool:
    """Some clause of the sentence negates an action ("never modify", "do not run", "avoid touching")."""
    return any(st == "negated" and word in _ACTION_STEMS
               for c in analyse(sentence) for word, (st, _, _) in c.stance.items())


def is_prohibition(text: str) -> bool:
    """Some sentence of ``text`` forbids an action ("never modify", "do not run", "must not edit")."""
    return any(_forbidding(s) for s in _SENTENCE.split(text) if s.strip())


def prohibition(fact: str) -> Prohibition | None:
    """What ``fact`` forbids an action to touch (the paths and commands its forbidding sentences
    name); None when it forbids nothing checkable."""
    commands: list[str] = []
    paths: list[str] = []
    for sentence in _SENTENCE.split(fact):
        if not sentence.strip() or not _forbidding(sentence):
            continue
        for m in _CODE.finditer(sentence):
            code = m.group(1).strip()
            if " " in code or not _PATH.fullmatch(code):  # a command; a path in backticks counts as a path
                commands.append(" ".join(code.split()))
        for m in _PATH.finditer(sentence):
            p = m.group(1)
            if p.lower() in _NOT_PATHS:
                continue
            p = p.rstrip(".")  # the sentence's full stop
            if not p or p.endswith("/.") or any(p in c for c in commands):
                continue
            if re.fullmatch(r"[\d.]+", p):  # a version or a number, not a file
                continue
            paths.append(p[2:] if p.startswith("./") else p)
    if not paths and not commands:
        return None
    return Prohibition(fact, tuple(dict.fromkeys(paths)), tuple(dict.fromkeys(commands)))


def _rules_an_action(sentence: str) -> bool:
    """Some clause of the sentence forbids or requires an action ("must not include", "always run")."""
    return any(st in ("negated", "required") and word in _ACTION_STEMS
               for c in analyse(sentence) for word, (st, _, _) in c.stance.items())


def unchecked(facts: Iterable[str]) -> list[str]:
    """The facts that rule on an action but are no checkable prohibition (one naming no path or
    command, a condition, an obligation): no action is checked against them, so whether a run
    kept them is not known here."""
    return [f for f in facts if prohibition(f) is None
            and any(_rules_an_action(s) for s in _SENTENCE.split(f) if s.strip())]


def path_matches(path: str, target: str) -> bool:
    """Whether a changed file ``path`` (repo-relative or absolute) is what ``target`` names: the
    file itself, a file under the folder, a file of that name, or one the glob matches."""
    p = path.lstrip("/")
    t = target.lstrip("/")
    if not t:
        return False
    parts = p.split("/")
    if any(ch in t for ch in "*?["):
        return fnmatch.fnmatch(p, t) or fnmatch.fnmatch(p, "*/" + t) or fnmatch.fnmatch(posixpath.basename(p), t)
    if t.endswith("/"):
        folder = t.rstrip("/").split("/")
        return any(parts[i:i + len(folder)] == folder for i in range(len(parts) - len(folder)))
    if "/" in t:  # a path: the same file, or a file under it, anywhere below the repo root
        tp = t.split("/")
        return any(parts[i:i + len(tp)] == tp for i in range(len(parts) - len(tp) + 1))
    return parts[-1] == t or t in parts[:-1]


def _command_hit(command: str, target: str) -> bool:
    """The command holds ``target`` as whole words (`sudo` is not in "pseudocode")."""
    return re.search(r"(?<![\w-])" + re.escape(target) + r"(?![\w-])", " ".join(command.split())) is not None


def violations(rev: RunEvents, edits: Sequence[EditAction], facts: Iterable[str]) -> list[Violation]:
    """The first action that broke each checkable prohibition among ``facts``, by step."""
    rules = [p for p in (prohibition(f) for f in facts) if p is not None]
    out: list[Violation] = []
    for rule in rules:
        found: Violation | None = None
        for ea in edits:
            e = ea.event
            if e.step is None:
                continue
            changed = sorted({x.path for x in ea.edits if x.op not in _RESTORES})
            for t in rule.paths:
                hit = tuple(f for f in changed if path_matches(f, t))
                if hit:
                    found = Violation(rule.fact, e.step, e.seq, e.display, t, hit)
                    break
            if found:
                break
        if rule.commands:
            for e in rev.aligned():
                if e.type != "action" or e.step is None or tool_kind(e.tool) != "shell":
                    continue
                if found is not None and e.step >= found.step:
                    break
                cmd = next((c for c in rule.commands if _command_hit(e.text, c)), None)
                if cmd is not None:
                    found = Violation(rule.fact, e.step, e.seq, e.display, cmd)
                    break
        if found is not None:
            out.append(found)
    return sorted(out, key=lambda v: (v.step, v.seq))
