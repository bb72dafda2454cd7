"""The conversation of a transcript: its records on the main path of the uuid tree, in the
order they become messages.

The path runs from the newest conversation record back to the root, across compaction
boundaries (``logicalParentUuid``) and unreadable lines; the other records of a model call on
the path, and the results of its tool calls, are kept with it (parallel tool calls hang off
side branches). A sub-agent file keeps its sidechain records; a compaction call's file, and a
file without parent links, keep every conversation record in file order.
"""

from __future__ import annotations

from array import array
from pathlib import Path
from typing import Any

from ..base import ImportContext
from .index import Index, read_at, salvage_links
from .kinds import CONVERSATION_TYPES, UNREADABLE, base_kind


def _nonzero(mask: Any) -> array:
    """Positions of the set bytes of a uint8/bool numpy array, as an ``array("q")``."""
    import numpy as np

    out = array("q")
    out.frombytes(np.flatnonzero(mask).astype(np.int64).tobytes())
    return out


def record_mask(n: int, positions: Any) -> bytearray:
    """A bytearray of ``n`` zeros with 1 at ``positions`` (an array("q") or a set of ints)."""
    import numpy as np

    out = np.zeros(n, dtype=np.uint8)
    if isinstance(positions, array):
        if len(positions):
            out[np.frombuffer(positions, dtype=np.int64)] = 1
    elif positions:
        out[np.fromiter(positions, dtype=np.int64, count=len(positions))] = 1
    return bytearray(out.tobytes())


def _conversation_mask(idx: Index, *, sidechain: bool, keep_all: bool) -> bytearray:
    """1 for each conversation record of this session (main or sidechain file), else 0."""
    n = len(idx)
    is_conv = {k: base_kind(k) in CONVERSATION_TYPES for k in set(idx.kind)}
    conv = bytearray(map(is_conv.__getitem__, idx.kind))
    if not keep_all:
        if sidechain:  # only the sidechain records
            side = bytearray(n)
            for i in idx.sidechain:
                side[i] = conv[i]
            conv = side
        else:
            for i in idx.sidechain:
                conv[i] = 0
    return conv


def main_path(path: Path, idx: Index, *, sidechain: bool, keep_all: bool, ctx: ImportContext) -> array:
    """Indices of the records that make up the conversation, in file order."""
    import numpy as np

    n = len(idx)
    conv = _conversation_mask(idx, sidechain=sidechain, keep_all=keep_all)
    conv_np = np.frombuffer(conv, dtype=np.uint8).astype(bool) if n else np.zeros(0, bool)
    if keep_all or not idx.linked:
        # The compaction call's records hang off the parent session's tree (their parents
        # are in another file), and a file without parent links has no tree: file order.
        return _nonzero(conv_np)
    leaf = conv.rfind(1)
    if leaf < 0:
        return array("q")
    keep = bytearray(n)
    parent = array("q")
    parent.frombytes(idx.parent.astype(np.int64).tobytes())
    puid = idx.puid
    i: int | None = leaf
    while i is not None and not keep[i]:
        keep[i] = 1
        p = parent[i]
        if p >= 0:
            i = p
            continue
        child, i = i, None
        if puid[child] != 0:  # a named parent is missing from the file
            # Read the child again for the parent's uuid: ids are not kept as text.
            with open(path, "rb") as f:
                if idx.kind[child] == UNREADABLE:
                    f.seek(idx.offset[child])
                    ref = salvage_links(f.readline())[1] or "?"
                else:
                    rec = read_at(f, idx.offset[child], idx.line[child], ctx) or {}
                    ref = rec.get("parentUuid") or rec.get("logicalParentUuid") or "?"
            # An unreadable line before the child whose own uuid could not be read is most
            # likely that parent: join the conversation across it, and say so.
            stub = max((j for j, known in idx.unreadable.items() if not known and j < child and not keep[j]),
                       default=None)
            if stub is not None:
                ctx.warn(f"parent record {ref} of line {idx.line[child]} is not in this file; taken to be the "
                         f"unreadable line {idx.line[stub]} before it (its own uuid is lost), and the "
                         "conversation is joined across that line", line=idx.line[stub])
                i = stub
                continue
            ctx.warn(f"parent record {ref} is not in this file; the conversation starts after it")
    # Parallel tool calls: keep the other blocks of calls on the path and their results.
    keep_np = np.frombuffer(keep, dtype=np.uint8).copy()
    msg = np.frombuffer(idx.msg, dtype=np.int64) if n else np.zeros(0, np.int64)
    on_path = np.unique(msg[(keep_np == 1) & (msg != 0)])
    keep_np[conv_np & (msg != 0) & np.isin(msg, on_path)] = 1
    if len(idx.tu_rec) and len(idx.tr_rec):
        tu_rec, tu_id = np.frombuffer(idx.tu_rec, np.int64), np.frombuffer(idx.tu_id, np.int64)
        tr_rec, tr_id = np.frombuffer(idx.tr_rec, np.int64), np.frombuffer(idx.tr_id, np.int64)
        answered = tu_id[keep_np[tu_rec] == 1]
        extra = tr_rec[conv_np[tr_rec] & (keep_np[tr_rec] == 0) & np.isin(tr_id, answered)]
        keep_np[extra] = 1
    return _nonzero((keep_np == 1) & conv_np)


def emission_plan(idx: Index, included: array) -> tuple[array, dict[int, list[int]]]:
    """Emission order: record indices, and the later records of each split model call.

    A call (records sharing a message.id) is emitted where its first record is. Only calls
    split over several records get an entry in the returned dict (first record -> the rest),
    so a huge file of one-record calls costs no dict at all.
    """
    rest: dict[int, list[int]] = {}
    first_of: dict[int, int] = {}  # hash(message.id) -> first record, for the calls seen so far
    order = array("q")
    for i in included:
        mid = idx.msg[i]
        if mid == 0:
            order.append(i)
            continue
        first = first_of.setdefault(mid, i)
        if first == i:
            order.append(i)
        else:
            rest.setdefault(first, []).append(i)
    return order, rest
