"""Harness templates: what opens the sessions of more than one task of a format in the store.

A goal taken from a session's opening is judged on its task statement, not on the harness's
boilerplate around it (``goal.assess_goal``, rule 1): the openings of the other sessions of the
same format are compared word 6-gram by word 6-gram (``TemplateIndex``), and a whole message, or
a run of at least TEMPLATE_MIN_WORDS words, that also opens a session of another task is the
harness's. ``template_index`` builds the index of a store's format (cached per process).
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Iterator

import numpy as np

from ...records import NOT_OWN_META
from .terms import WORD_TOKEN, content_words

if TYPE_CHECKING:  # pragma: no cover
    from ...store.db import Store

SHINGLE_WORDS = 6  # word n-grams compared between openings
TEMPLATE_MIN_WORDS = 8  # a shared run this long is a harness's template, not two people asking alike


@dataclass
class TemplateIndex:
    """What opens sessions of more than one task of one format in the store.

    ``shared`` maps the hash of a word 6-gram, or of a whole opening message, to the number of
    distinct tasks whose opening holds it (only those held by 2 or more are kept); ``tasks``
    counts the distinct tasks compared. Sessions with a task key are compared with each other
    (a task is a key), sessions without one with each other (a task is a distinct opening;
    identical openings are one task, run again): whether a keyed and an unkeyed session ran the
    same task cannot be told, and a task's own statement must never pass for a template.
    """

    fmt: str
    tasks: int
    shared: dict[int, int]

    def split(self, text: str) -> tuple[list[str], int, int, int]:
        """(the runs of ``text`` that are its own, words set aside as template, words, the most
        other tasks sharing a piece of it).

        Template is a whole message that also opens another task, or a run of at least
        TEMPLATE_MIN_WORDS words each inside a 6-gram that does: a shorter shared phrase ("what's
        the weather in Seattle") is two people asking alike, not a harness.
        """
        toks = [(m.start(), m.end(), m.group().lower()) for m in WORD_TOKEN.finditer(text)]
        words = [w for _, _, w in toks]
        n = len(toks)
        whole = self.shared.get(_whole_hash(words), 0)
        if whole >= 2:
            return [], n, n, whole - 1
        covered = np.zeros(n, dtype=bool)
        sharing = np.zeros(n, dtype=np.int64)
        for i, h in _shingles(words):
            k = self.shared.get(h, 0)
            if k >= 2:
                covered[i:i + SHINGLE_WORDS] = True
                sharing[i:i + SHINGLE_WORDS] = np.maximum(sharing[i:i + SHINGLE_WORDS], k)
        template = np.zeros(n, dtype=bool)
        for a, b in _runs(covered):
            if b - a >= TEMPLATE_MIN_WORDS:
                template[a:b] = True
        runs = []
        for a, b in _runs(~template):
            start, end = toks[a][0], toks[b - 1][1]
            lo = toks[a - 1][1] if a else 0  # widen over the punctuation that hugs the run: "<tag>", "(x)"
            hi = toks[b][0] if b < n else len(text)
            while start > lo and not text[start - 1].isspace():
                start -= 1
            while end < hi and not text[end].isspace():
                end += 1
            run = text[start:end].strip()
            if content_words(run):  # a lone date or number between template lines is no task
                runs.append(run)
        others = int(sharing[template].max()) - 1 if template.any() else 0
        return runs, int(template.sum()), n, others


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of True in a boolean array."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist()))


def _stable(parts: list[str]) -> int:
    """A 64-bit hash of words that is the same in every process (``hash`` of a str is salted per
    process, and a distributed audit merges the indexes its workers build)."""
    data = "\x1f".join(parts).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little", signed=True)


def _shingles(words: list[str]) -> list[tuple[int, int]]:
    """(start, hash) of each run of SHINGLE_WORDS words."""
    return [(i, _stable(words[i:i + SHINGLE_WORDS])) for i in range(len(words) - SHINGLE_WORDS + 1)]


def _whole_hash(words: list[str]) -> int:
    return _stable(["\x00whole", *words])


# Each session's opening as goal_from_messages takes it: system/developer/user text before the
# first model call, or the first user message when none came before it.
# (a message whose text is not the session's own, ``records.NOT_OWN_META``, is no part of it)
_OWN = " ".join(f"AND coalesce(json_extract(m.meta, '$.{k}'), 0) = 0" for k in NOT_OWN_META)
_OPENINGS = f"""WITH f AS (
       SELECT s.id AS sid, coalesce(s.task, '') AS task,
              (SELECT min(m.seq) FROM messages m WHERE m.session_id = s.id AND m.role = 'assistant'
                AND m.kind = 'message') AS first_call,
              (SELECT min(m.seq) FROM messages m WHERE m.session_id = s.id AND m.role = 'user'
                AND m.kind = 'message' AND trim(m.text) != ''
                {_OWN}) AS first_user
       FROM sessions s WHERE s.format = ?)
       SELECT f.sid, f.task, m.text FROM f JOIN messages m ON m.session_id = f.sid
       WHERE m.kind = 'message' AND m.role IN ('system', 'developer', 'user') AND trim(m.text) != ''
     {_OWN}
     AND (f.first_call IS NULL OR m.seq < f.first_call OR m.seq = f.first_user)
       ORDER BY f.sid, m.seq"""


_INDEX_CACHE: dict[tuple[str, str, bool], tuple[int, TemplateIndex]] = {}


# (format, keyed) -> the index a distributed audit's driver merged over every session of the run
# and its store (``fixed_templates``): a worker's private store holds only its task's sessions.
_FIXED: dict[tuple[str, bool], TemplateIndex] = {}


@contextmanager
def fixed_templates(indexes: dict[tuple[str, bool], TemplateIndex] | None) -> Iterator[None]:
    """While the block runs, ``template_index`` answers these indexes for their (format, keyed)."""
    saved = dict(_FIXED)
    _FIXED.update(indexes or {})
    try:
        yield
    finally:
        _FIXED.clear()
        _FIXED.update(saved)


def template_index(store: Store, fmt: str, keyed: bool = False) -> TemplateIndex:
    """The template index of one format's sessions with (``keyed``) or without a task key, over
    the whole store (cached per process while the format's sessions are unchanged: an audit
    worker builds it once), or the run's (``fixed_templates``)."""
    fixed = _FIXED.get((fmt, keyed))
    if fixed is not None:
        return fixed
    rows = store.db.execute("SELECT id, coalesce(task, ''), coalesce(ingested_at, '') FROM sessions "
                            "WHERE format = ? ORDER BY id", [fmt]).fetchall()
    fingerprint = hash(tuple(tuple(r) for r in rows))
    key = (str(store.path), fmt, keyed)
    cached = _INDEX_CACHE.get(key) if store.path is not None else None
    if cached is not None and cached[0] == fingerprint:
        return cached[1]
    # Each session's opening as goal_from_messages takes it: system/developer/user text before
    # the first model call, or the first user message when none came before it.
    texts = store.db.execute(_OPENINGS, [fmt]).fetchall()
    docs: dict[str, tuple[str, list[str]]] = {}
    for sid, task, text in texts:
        if bool(task) == keyed:
            docs.setdefault(sid, (task, []))[1].append(text)
    index = index_from_groups(fmt, _groups(docs.values()))
    if store.path is not None:
        _INDEX_CACHE[key] = (fingerprint, index)
    return index


def template_groups(store: Store, fmt: str, keyed: bool = False) -> dict[int, set[int]]:
    """The pieces ``template_index`` counts, before counting: per task (a task key, or a distinct
    opening; by stable hash), the hashes of its openings' 6-grams and whole messages. Groups
    from several stores merge by union (``merge_groups``) into the index of all of them."""
    texts = store.db.execute(_OPENINGS, [fmt]).fetchall()
    docs: dict[str, tuple[str, list[str]]] = {}
    for sid, task, text in texts:
        if bool(task) == keyed:
            docs.setdefault(sid, (task, []))[1].append(text)
    return _groups(docs.values())


def _groups(docs: Iterable[tuple[str, list[str]]]) -> dict[int, set[int]]:
    groups: dict[int, set[int]] = {}
    for task, parts in docs:
        words = [[w.lower() for w in WORD_TOKEN.findall(t)] for t in parts]
        gkey = _stable(["task", task]) if task else _stable(["text", *("\x1e".join(" ".join(w) for w in words),)])
        groups.setdefault(gkey, set()).update({h for w in words for _, h in _shingles(w)}
                                              | {_whole_hash(w) for w in words if w})
    return groups


def merge_groups(into: dict[int, set[int]], more: dict[int, set[int]]) -> dict[int, set[int]]:
    for g, hs in more.items():
        into.setdefault(g, set()).update(hs)
    return into


def index_from_groups(fmt: str, groups: dict[int, set[int]]) -> TemplateIndex:
    """The index of these groups: each hash held by 2 or more of them, with how many."""
    counts: dict[int, int] = {}
    for hs in groups.values():
        for h in hs:
            counts[h] = counts.get(h, 0) + 1
    return TemplateIndex(fmt, len(groups), {h: k for h, k in counts.items() if k >= 2})
