"""Which messages state the goal and the tracked constraints: what ``constraint_selection`` pins
and ``goal_anchoring`` restates.

A policy sees token counts, never text, and must stay deterministic and cheap, so the messages a
fact rests on are found here, once per replay, by a lexical rule (no embedder):

- the **goal** is the task statement: the first user message with text (a harness's
  demonstration, ``meta.is_demo``, is not it), as drift's ``goal_from_messages`` picks it;
- a message **states** a fact when every number, identifier and quoted string of the fact is in
  it (``matching.lexical``, the same check fact tracking applies) and it holds at least
  ``STEM_SHARE`` of the fact's content-word stems (``matching.polarity.content_stems``). Assistant
  messages are never sources: the model repeating a constraint is not where it was given.

This is a proxy for fact tracking's presence rule (cosine over chunks plus the same lexical
check): a constraint worded differently in the log is not found here, and ``find_pins`` says
which facts it found no statement of (``unmatched``), so an output can say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

# Share of a fact's content stems a stating message must hold. Two thirds lets a statement add or
# drop a word ("Never push to main" / "Do not ever push directly to main") but not stand on one
# shared word; chosen on the facts of tests/fixtures/policies and the corpus config facts.
STEM_SHARE = 2 / 3
SOURCE_ROLES = ("system", "developer", "user", "tool")


@dataclass(frozen=True)
class Pins:
    """The goal message and, per fact, the messages stating it (seqs, oldest first)."""

    goal: int | None
    facts: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def unmatched(self) -> list[str]:
        return [f for f, seqs in self.facts.items() if not seqs]

    def seqs(self, *, goal: bool = True, first_only: bool = False) -> list[int]:
        """Every pinned seq (the goal's if ``goal``; each fact's first statement only if ``first_only``)."""
        out = {self.goal} if goal and self.goal is not None else set()
        for seqs in self.facts.values():
            out.update(seqs[:1] if first_only else seqs)
        return sorted(out)


def goal_seq(messages: Sequence[Any]) -> int | None:
    """The seq of the task statement: the first user message with text (not a demonstration)."""
    from ...records import KIND_MESSAGE, not_own

    for sm in messages:
        m = sm.message
        if m.role == "user" and m.kind == KIND_MESSAGE and m.text.strip() and not not_own(m.meta):
            return sm.seq
    return None


def find_pins(messages: Sequence[Any], facts: Sequence[str]) -> Pins:
    """The goal and each fact's stating messages in ``messages`` (``StoredMessage`` rows)."""
    from ...matching.lexical import lexical_tokens, missing_tokens
    from ...matching.polarity import content_stems
    from ...matching.text import presence_text

    wanted = []
    for fact in facts:
        stems = content_stems(fact)
        need = max(1, round(len(stems) * STEM_SHARE)) if stems else 0
        wanted.append((fact, lexical_tokens(fact), stems, need))
    found: dict[str, list[int]] = {f: [] for f in facts}
    for sm in messages:
        m = sm.message
        if m.role not in SOURCE_ROLES:
            continue
        text = presence_text(m)
        if not text:
            continue
        have = None
        for fact, lex, stems, need in wanted:
            if lex and missing_tokens(lex, text):
                continue
            if stems:
                have = content_stems(text) if have is None else have
                if len(stems & have) < need:
                    continue
            elif not lex:
                continue
            found[fact].append(sm.seq)
    return Pins(goal_seq(messages), {f: tuple(s) for f, s in found.items()})


def bind_facts(p: dict[str, Any], config: Any) -> list[str]:
    """The facts a policy pins: its ``facts`` parameter, else the config's ``facts:``."""
    given = p.get("facts")
    if given is None:
        return list(getattr(config, "facts", None) or ())
    if isinstance(given, str):
        given = [given]
    if not isinstance(given, (list, tuple)) or not all(isinstance(f, str) and f.strip() for f in given):
        raise ValueError(f"parameter 'facts' must be a list of fact texts, not {given!r}")
    return [" ".join(f.split()) for f in given]
