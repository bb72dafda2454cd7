"""The decisive divergence: each run's final patch (recorded, or rebuilt from its edits), and
the first edit of the repository's own files that differs between the runs.

The earliest divergence of two coding-agent runs is often exploration (``ls -R`` vs
``ls -la``); what decides the outcome is where the fix differs. ``decisive_edit`` compares each
run's k-th edit of the source files with the other's, and also traces the first hunk of each
final patch that the other lacks to the edit that wrote it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .display import cap
from .edits import EditAction
from .events import RunEvents
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
            return Patch(source, files, note, truncated=truncated)
        note = f"{note} holds no diff; "
    else:
        note = ""
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
    n = rebuild.edits
    return rebuild.patch(note + (f"reconstructed from {n} edit(s) of repository files in the log (no recorded "
                                 "patch)" if n else "no recorded patch and no edit of a repository file in the log"))


def _source_files(pa: Patch, pb: Patch) -> set[str]:
    """The repository's own files either run changed (its patch, recorded or rebuilt); files
    the runs only added (reproduction scripts, new tests) count when no existing file changed."""
    changed = {p for pt in (pa, pb) for p, f in pt.files.items() if f.status != "added"}
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
    return {"step": ev.step, "seq": ev.seq, "display": ev.display, "files": act.files,
            "edits": [x.to_dict() for x in act.edits], "change_known": hunk_source == "command", "hunk": hunk,
            "hunk_source": hunk_source, "note": note, "same_edit_in_other": same_edit, "in_other_patch": in_patch,
            "command": cap(ev.text, 3000)}


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
                           "final": {"a": _final_hunk(sa, pa, pb), "b": _final_hunk(sb, pb, pa)}}
    if k == len(sa) and k == len(sb):
        out.update(differs=False, index=None, a=None, b=None, a_step=None, b_step=None,
                   reason=f"the runs made the same {k} edit(s) to the source files" if k else
                   "neither run edited a source file")
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
    out.update(differs=True, index=k + 1, a=side_a, b=side_b, a_step=act_a.event.step if act_a else None,
               b_step=act_b.event.step if act_b else None, reason=reason)
    return out
