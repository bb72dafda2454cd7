"""``reject``: the provider refuses a request that does not fit (OpenAI Chat Completions,
Anthropic Messages, Gemini, DeepSeek). Nothing is removed; the step is marked as a call
that would fail with "context length exceeded", with the overflow size.

Before the log's first compaction record the window under ``reject`` is the one the log
recorded, so a call the log shows answered under this model (``ReplayInput.answered``) fit:
it is no overflow, whatever the token estimate says."""

from __future__ import annotations

from dataclasses import dataclass

from .base import Engine, Policy, register_policy


@dataclass(slots=True)
class _RejectState:
    first_compaction: int  # the first message after which the log's window differs from the whole history


@register_policy
class Reject(Policy):
    name = "reject"
    description = "error on overflow: the call would fail with context_length_exceeded"
    as_of = "2025-11-01"
    source = "OpenAI / Anthropic / Gemini / DeepSeek API errors for oversize prompts"

    def start(self, eng: Engine, p: dict) -> None:
        kinds = eng.inp.kinds
        eng.set_policy_state(_RejectState(next((i for i, k in enumerate(kinds)
                                                if k in ("compaction_boundary", "compaction_summary")), len(kinds))))

    def fit(self, eng: Engine, step: int, p: dict) -> int:
        over = eng.total() - eng.inp.budget
        answered = eng.inp.answered
        if over > 0 and answered and answered[step - 1] and eng.end <= eng.policy_state(_RejectState).first_compaction:
            return 0  # the log shows this very window accepted under this model
        if over > 0:
            eng.event("overflow", would_fail=True, overflow=over,
                      message=f"context length exceeded by {over:,} tokens")
            return over
        return 0
