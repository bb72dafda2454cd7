"""The decisive divergence: each run's final patch (recorded, or rebuilt from its edits), and
the first edit of the repository's own files that differs between the runs.

The earliest divergence of two coding-agent runs is often exploration (``ls -R`` vs
``ls -la``); what decides the outcome is where the fix differs. ``decisive_edit`` compares each
run's k-th edit of the source files with the other's, and also traces the first hunk of each
final patch that the other lacks to the edit that wrote it.

A submitted patch is what ``git diff`` showed at the end; a run that committed (or stashed) its
own fix first submitted without it. ``unsubmitted`` lists the run's own changes of repository
files its submission lacks, and the ``git commit`` / ``git stash`` that took each out of the diff:
"the fix to X at step k is not in the submission; step m committed it".
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .actions import shell_segments, shell_tokens, tool_kind
from .applied import strip_wrappers
from .display import cap, one_line
from .edits import EditAction, command_lines
from .events import Event, RunEvents, failed
from .patches import Block, Patch, Rebuild, hunk_lines, parse_patch


def final_patch(rev: RunEvents, row: dict[str, Any] | None, edits: list[EditAction]) -> Patch:
    """The run's change to the repository: the submission it recorded (a submission message,
    else the session metadata's ``submission``), parsed; else rebuilt from its edits."""
    meta = (row or {}).get("metadata") or {}
    text, source, note, truncated = None, "", "", False
    if rev.submission is not None:
        text, source = rev.submission, "submission"
        note = f"read from the final submission message (seq {rev.submission_seq})"
    elif isinstance(meta.get("submission"), str):
        text, source = meta["submission"], "metadata"
        total = meta.get("submission_chars")
        truncated = isinstance(total, int) and total > len(text)
        note = "read from the session metadata's submission (mini-swe-agent info.submission)"
        if truncated:
            note += f", cut at {len(text):,} of {total:,} characters: hunks after the cut are missing"
    if text is not None:
        files = parse_patch(text)
        if files is not None:
            patch = Patch(source, files, note, truncated=truncated)
            patch.unsubmitted = unsubmitted(rev, patch, edits)
            return patch
        note = f"{note} holds no diff; "
    else:
        note = ""
    rebuild = _rebuild(edits)
    n = rebuild.edits
    return rebuild.patch(note + (f"reconstructed from {n} edit(s) of repository files in the log (no recorded "
                                 "patch)" if n else "no recorded patch and no edit of a repository file in the log"))


def _rebuild(edits: list[EditAction]) -> Rebuild:
    """The repository files' change rebuilt from edit actions, in order (files outside it left out)."""
    rebuild = Rebuild()
    for act in edits:
        for x in act.edits:
            if not x.in_repo:
                continue
            if x.op == "create":
                rebuild.create(x.path, x.new or "")
            elif x.op == "replace" and x.old is not None and x.new is not None:
                rebuild.replace(x.path, x.old, x.new)
            elif x.op == "insert" and x.new is not None:
                rebuild.insert(x.path, x.line, x.new)
            elif x.op == "delete":
                rebuild.delete(x.path)
            elif x.op == "revert":
                rebuild.revert(x.path)
            elif x.op == "undo":
                rebuild.undo(x.path)
            else:
                rebuild.changed(x.path)
    return rebuild


def takes_out(e: Event) -> str | None:
    """``commit`` / ``stash`` when a shell action commits or stashes the working tree's changes
    (they leave what ``git diff`` shows); ``restore`` when it brings them back (``git stash pop``,
    a ``git reset`` that keeps the files); None otherwise, or when its result says it failed."""
    if e.type != "action" or tool_kind(e.tool) != "shell" or "git" not in e.text:
        return None
    found = None
    for line, _, _ in command_lines(e.text):
        for seg in shell_segments(shell_tokens(line) or []):
            seg = strip_wrappers(seg)
            if seg[:1] != ["git"]:
                continue
            args = seg[1:]
            while args[:1] and args[0].startswith("-"):  # git -C dir / -c k=v
                args = args[2:] if args[0] in ("-C", "-c") else args[1:]
            sub, rest = (args[0], args[1:]) if args else ("", [])
            if sub == "commit":
                found = "commit"
            elif sub == "stash" and (not rest or rest[0] in ("push", "save") or rest[0].startswith("-")):
                found = "stash"
            elif (sub == "stash" and rest[:1] in (["pop"], ["apply"])) or (sub == "reset" and "--hard" not in rest):
                found = "restore"
    res = e.result
    if found and res is not None and (failed(res) or "nothing to commit" in res.text or "No local changes" in res.text):
        return None
    return found


def unsubmitted(rev: RunEvents, patch: Patch, edits: list[EditAction]) -> list[dict[str, Any]]:
    """The run's own changes of repository files (``edits``: those that applied) that its
    submitted ``patch`` lacks: each file with its last edit's step and the ``git commit`` or ``git
    stash`` after it that took it out of what ``git diff`` shows (``by`` None when the log shows
    none; not listed when the submission was cut short)."""
    if patch.reconstructed:
        return []
    end = rev.submission_seq if rev.submission_seq is not None else max((e.seq for e in rev.events), default=0) + 1
    mine = [a for a in edits if a.event.seq < end]
    changed = _rebuild(mine).patch("").files
    out: list[dict[str, Any]] = []
    outs = [(e, how) for e in rev.events if e.seq < end and e.skip is None and (how := takes_out(e))]
    for path in sorted(set(changed) - set(patch.files)):
        last = next(a for a in reversed(mine) if path in a.files)
        by: tuple[Event, str] | None = None
        for e, how in outs:
            if e.seq <= last.event.seq:
                continue
            if how == "restore":
                by = None
            elif by is None:
                by = (e, how)
        if by is None and patch.truncated:
            continue  # the cut may have taken it
        u = {"file": path, "step": last.event.step, "seq": last.event.seq, "by": by[1] if by else None,
             "by_step": by[0].step if by else None, "by_seq": by[0].seq if by else None,
             "command": one_line(by[0].text, 120) if by else None}
        out.append({**u, "words": unsubmitted_words(u)})
    return out


def unsubmitted_words(u: dict[str, Any], whose: str = "the") -> str:
    """One unsubmitted change as a sentence: "the fix to X at step k is not in the submission;
    step m committed it"."""
    said = f"{whose} fix to {u['file']} at step {u['step']} is not in the submission"
    if u.get("by"):
        verb = {"commit": "committed", "stash": "stashed"}[u["by"]]
        return f"{said}; step {u['by_step']} {verb} it, so `git diff` no longer showed it"
    return f"{said}; the log does not show what took it out"


def _source_files(pa: Patch, pb: Patch) -> set[str]:
    """The repository's own files either run changed (its patch, recorded or rebuilt, and its own
    fixes a commit took out of its submission); files the runs only added (reproduction scripts,
    new tests) count when no existing file changed."""
    changed = {p for pt in (pa, pb) for p, f in pt.files.items() if f.status != "added"}
    changed |= {u["file"] for pt in (pa, pb) for u in pt.unsubmitted if u["by"]}
    return changed or {p for pt in (pa, pb) for p in pt.files}


def _source_edits(edits: list[EditAction], src: set[str]) -> list[EditAction]:
    """A run's edit actions of repository files, each cut to its edits of the source files."""
    return [x for x in (y.only(src) for y in edits if any(e.in_repo for e in y.edits)) if x is not None]


def _edit_side(act: EditAction | None, own: list[EditAction], other: list[EditAction], own_patch: Patch,
               other_patch: Patch) -> dict[str, Any] | None:
    """One run's side of the decisive edit: the edit, its hunk (from the command, or from the
    final patch when the command does not show it), and whether the other run made it too."""
    if act is None:
        return None
    blocks = act.blocks()
    hunk, hunk_source, note = None, None, None
    if blocks is not None:
        hunk, hunk_source = hunk_lines(blocks), "command"
    else:
        # the command does not show the change: when it is the run's only edit of its files and the
        # run recorded its patch, the patch's hunks for those files are this edit's change
        only = all(sum(f in x.files for x in own) == 1 for f in act.files)
        if only and not own_patch.reconstructed and all(f in own_patch.files for f in act.files):
            blocks = [b for f in act.files for b in own_patch.files[f].blocks]
            hunk = hunk_lines(blocks)
            hunk_source = "final patch"
            note = "the command does not show the change; it is the run's only edit of this file, so the final " \
                   "patch's hunks are its change"
        else:
            note = "the command does not show the change"
    other_blocks: set[Any] = set()
    other_unknown = False
    for x in other:
        xb = x.blocks()
        if xb is None:
            other_unknown = other_unknown or bool(set(x.files) & set(act.files))
        else:
            other_blocks.update(b.sig for b in xb)
    same_edit = in_patch = None
    if blocks is not None:
        sigs = {b.sig for b in blocks}
        sig = act.sig() if hunk_source == "command" else None
        if (sig is not None and any(x.sig() == sig for x in other)) or (sigs and sigs <= other_blocks):
            same_edit = True
        elif not other_unknown:
            same_edit = False
        patch_sigs = {b.sig for b in other_patch.blocks()}
        if sigs and sigs <= patch_sigs:
            in_patch = True
        elif not any(other_patch.files[f].unknown for f in act.files if f in other_patch.files):
            in_patch = False
    ev = act.event
    # a later `git checkout FILE` of every file it changed put them back: its change is gone
    back = next((x for x in own if x.event.step is not None and ev.step is not None and x.event.step > ev.step
                 and set(act.files) <= {e.path for e in x.edits if e.op == "revert"}), None)
    said = [unsubmitted_words(u) for u in own_patch.unsubmitted if u["file"] in act.files]
    if in_patch is False:  # the other run may have made this fix and committed it out of its submission
        said += [unsubmitted_words(u, "the other run's own") for u in other_patch.unsubmitted
                 if u["file"] in act.files]
    return {"step": ev.step, "seq": ev.seq, "display": ev.display, "files": act.files,
            "edits": [x.to_dict() for x in act.edits], "change_known": hunk_source == "command", "hunk": hunk,
            "hunk_source": hunk_source, "note": note, "same_edit_in_other": same_edit, "in_other_patch": in_patch,
            "submission_note": "; ".join(said) or None, "command": cap(ev.text, 3000),
            "reverted": None if back is None else {"step": back.event.step, "seq": back.event.seq,
                                                   "display": cap(back.event.display, 80)}}


def _lines(blocks: list[Block], which: int) -> set[str]:
    """The removed (``which`` 1) or added (2) lines of the blocks' signatures."""
    return {x for b in blocks for x in b.sig[which]}


def _final_hunk(own: list[EditAction], own_patch: Patch, other_patch: Patch) -> dict[str, Any] | None:
    """The first hunk of this run's final patch that the other's lacks, and the edit that wrote
    it: the last edit whose change holds its added lines (or, for a removal, its removed ones).
    The first differing edit may be undone or rewritten later; this is where the final fixes
    differ."""
    theirs = Counter(b.sig for b in other_patch.blocks())
    for blk in own_patch.blocks():
        if theirs[blk.sig] > 0:
            theirs[blk.sig] -= 1
            continue
        _, rem, add = blk.sig
        writer: EditAction | None = None
        hidden: list[EditAction] = []  # edits of the file that do not show their change
        for act in own:
            mine = [e for e in act.edits if e.path == blk.path]
            if not mine:
                continue
            if any(e.op == "revert" for e in mine):  # the file is back to the repository's version
                writer, hidden = None, []
                continue
            known = [b for e in mine for b in (e.blocks() or [])]
            if set(add or rem) <= _lines(known, 2 if add else 1):
                writer, hidden = act, []
            elif any(e.blocks() is None and e.op not in ("delete", "undo") for e in mine):
                hidden.append(act)
        note = None
        if writer is None and len(hidden) == 1:
            writer, note = hidden[0], "the run's only edit of this file that could have written it"
        elif writer is None:
            note = ("written by one of the edits at steps " + ", ".join(str(x.event.step) for x in hidden)
                    + ": their commands do not show the change") if hidden else "no edit in the log writes it"
        out: dict[str, Any] = {"file": blk.path, "hunk": hunk_lines([blk]), "step": None, "seq": None,
                               "display": None, "traced": writer is not None, "note": note,
                               "candidates": [x.event.step for x in hidden] if writer is None else []}
        if writer is not None:
            out.update(step=writer.event.step, seq=writer.event.seq, display=writer.event.display)
        return out
    return None


def decisive_edit(ea: list[EditAction], eb: list[EditAction], pa: Patch, pb: Patch) -> dict[str, Any]:
    """The first edit of the repository's own files that differs between the runs: each run's
    k-th such edit action is compared with the other's k-th (the same edit: the same change
    blocks in the same files); the first pair that differs, or where one run made no more."""
    src = _source_files(pa, pb)
    sa, sb = _source_edits(ea, src), _source_edits(eb, src)
    k = 0
    while k < len(sa) and k < len(sb) and sa[k].sig() is not None and sa[k].sig() == sb[k].sig():
        k += 1
    out: dict[str, Any] = {"source_files": sorted(src), "a_edits": len(sa), "b_edits": len(sb), "same_before": k,
                           "final": {"a": _final_hunk(sa, pa, pb), "b": _final_hunk(sb, pb, pa)},
                           "unsubmitted": {"a": pa.unsubmitted, "b": pb.unsubmitted}}
    if k == len(sa) and k == len(sb):
        left = [unsubmitted_words(u, f"run {side}'s") for side, pt in (("A", pa), ("B", pb)) for u in pt.unsubmitted
                if u["by"]]  # the same fix, but one run's submission lacks it
        out.update(differs=False, index=None, a=None, b=None, a_step=None, b_step=None,
                   reason=(f"the runs made the same {k} edit(s) to the source files" if k else
                           "neither run edited a source file") + "".join(f"; {x}" for x in left))
        return out
    act_a = sa[k] if k < len(sa) else None
    act_b = sb[k] if k < len(sb) else None
    side_a = _edit_side(act_a, sa, sb, pa, pb)
    side_b = _edit_side(act_b, sb, sa, pb, pa)
    if act_a is None or act_b is None:
        who, other = ("A", "B") if act_a is None else ("B", "A")
        reason = f"run {who} made no further edit to the source files; run {other} did"
    elif act_a.files != act_b.files:
        reason = "different files"
    elif act_a.sig() is None or act_b.sig() is None:
        hidden = [s for s, x in (("A", act_a), ("B", act_b)) if x.sig() is None]
        reason = ("the same file(s); " + (f"{hidden[0]}'s command does not show its change" if len(hidden) == 1
                                          else "neither command shows its change"))
    else:
        reason = "the same file(s), a different change"
    for who, side in (("A", side_a), ("B", side_b)):
        if side and side["reverted"]:
            reason += f"; {who}'s step {side['step']} was put back at step {side['reverted']['step']} " \
                      f"({side['reverted']['display']})"
    out.update(differs=True, index=k + 1, a=side_a, b=side_b, a_step=act_a.event.step if act_a else None,
               b_step=act_b.event.step if act_b else None, reason=reason)
    return out
