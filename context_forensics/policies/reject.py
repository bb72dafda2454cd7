"""``reject``: the provider refuses a request that does not fit (OpenAI Chat Completions,
Anthropic Messages, Gemini, DeepSeek). Nothing is removed; the step is marked as a call
that would fail with "context length exceeded", with the overflow size."""

from __future__ import annotations

from .base import Engine, Policy, register_policy


@register_policy
class Reject(Policy):
    name = "reject"
    description = "error on overflow: the call would fail with context_length_exceeded"
    as_of = "2025-11-01"
    source = "OpenAI / Anthropic / Gemini / DeepSeek API errors for oversize prompts"

    def fit(self, eng: Engine, step: int, p: dict) -> int:
        over = eng.total() - eng.inp.budget
        if over > 0:
            eng.event("overflow", would_fail=True, overflow=over,
                      message=f"context length exceeded by {over:,} tokens")
            return over
        return 0
