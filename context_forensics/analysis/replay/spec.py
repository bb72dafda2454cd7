"""Which model spec and policy a replay runs under, and the budget the log's own calls prove.

The spec is the named model, or by default the session's recorded one, or assumed limits that
every output labels (``resolve_spec``); the policy is the one asked for or the model's, its
parameters validated (``resolve_replay``). A call the provider answered bounds the window the
spec may claim (``bound_by_usage``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Sequence

from ...config.models import ModelSpec, resolve_model, session_spec, spec_notes
from ...config.settings import Config
from ...records import KIND_MESSAGE, Message
from ...store.db import Store, StoredMessage
from .policies import get_policy


def is_answered(m: Any) -> bool:
    """Whether the log shows a model call accepted and answered: the provider's count of its
    prompt tokens and a reply (an error or a harness's synthetic notice is no answer)."""
    u = m.usage
    if u is None or not u.prompt_tokens:
        return False
    if isinstance(m.meta, dict) and (m.meta.get("error") or m.meta.get("synthetic") or m.meta.get("is_error")):
        return False
    return bool((u.completion_tokens or 0) > 0 or m.text or m.tool_calls)


def bound_by_usage(spec: ModelSpec, messages: Sequence[StoredMessage],
                   answered_here: Callable[[Message], bool]) -> ModelSpec:
    """``spec`` with the budget the session's answered calls prove.

    A call the provider accepted fit its window: its recorded prompt tokens were at most
    limit − the output it reserved. So the reserved output of this model in this session cannot
    have been more than limit − the largest answered prompt (a harness reserves the same for
    each call), and if that prompt is above the limit, the window was at least that prompt.
    ``answered_here(m)`` says whether an assistant message is such a call of ``spec``'s model.
    """
    best: tuple[int, int, int] | None = None  # (prompt tokens, step, seq)
    step = 0
    for sm in messages:
        m = sm.message
        if m.role != "assistant" or m.kind != KIND_MESSAGE:
            continue
        step += 1
        prompt = m.usage.prompt_tokens if m.usage is not None else None  # an answered call's is recorded
        if answered_here(m) and prompt and (best is None or prompt > best[0]):
            best = (int(prompt), step, sm.seq)
    if best is None or best[0] <= spec.budget:
        return spec
    prompt, step, seq = best
    limit = spec.context_limit
    bound: dict[str, Any] = {"step": step, "message_seq": seq, "recorded_prompt_tokens": prompt,
                             "reserved_output": {"table": spec.reserved_output, "bound": max(0, limit - prompt)},
                             "limit": None}
    if prompt <= limit:
        return replace(spec, reserved_output=limit - prompt, bound=bound)
    bound["limit"] = {"table": limit, "bound": prompt}
    return replace(spec, reserved_output=0, context_limit=prompt, bound=bound)


def _policy_params(spec: ModelSpec, policy: str, params: dict[str, Any] | None) -> dict[str, Any]:
    p = dict(spec.params) if policy == spec.policy else {}
    p.update(params or {})
    p.setdefault("preserve_system", spec.preserve_system)
    return p


def with_log_limit(spec: ModelSpec, metadata: Any) -> ModelSpec:
    """``spec`` under the limits the session's log records for its own model, when it records them
    (``metadata["context_window"]``, ``metadata["max_output_tokens"]``, ``metadata["limit_source"]``:
    Letta's llm_config); the table's figures stay in ``log_limit`` for the header to show."""
    md = metadata if isinstance(metadata, dict) else {}
    limit = md.get("context_window")
    if type(limit) is not int or limit <= 0:
        return spec
    out = md.get("max_output_tokens")
    reserved = out if type(out) is int and 0 <= out < limit else min(spec.reserved_output, limit // 2)
    if (limit, reserved) == (spec.context_limit, spec.reserved_output):
        return spec
    return replace(spec, context_limit=limit, reserved_output=reserved, log_limit={
        "limit": limit, "reserved_output": reserved, "source": str(md.get("limit_source") or "the log"),
        "table": {"limit": spec.context_limit, "reserved_output": spec.reserved_output}})


def resolve_spec(session: dict[str, Any], model: str | ModelSpec | None, config: Config | None) -> ModelSpec:
    """The spec a replay of ``session`` (a session row) under ``model`` starts from: the named
    model, or by default the recorded one, or assumed limits that every output labels. (A
    replay then bounds it by the session's answered calls: ``bound_by_usage``.)"""
    if model is None:
        return with_log_limit(session_spec(session.get("model"), config), session.get("metadata"))
    return model if isinstance(model, ModelSpec) else resolve_model(model, config)


def model_notes_for(store: Store, session_id: str, model: str | ModelSpec | None,
                    config: Config | None) -> list[str]:
    """What a view of a replay-derived figure says about the limits it rests on (``spec_notes``),
    for views that do not hold the replay itself (drift, diverge)."""
    return spec_notes(resolve_spec(store.session(session_id), model, config))


def resolve_replay(store: Store, session_id: str, model: str | ModelSpec | None, config: Config | None,
                   policy: str | None, params: dict[str, Any] | None
                   ) -> tuple[dict[str, Any], ModelSpec, str, dict[str, Any]]:
    """The session row, the model spec (default: the recorded model), the policy (default: the
    model's) and its validated parameters."""
    from ...errors import UsageError

    session = store.session(session_id)
    spec = resolve_spec(session, model, config)
    policy = policy or spec.policy
    pol = get_policy(policy)
    try:
        p = pol.params(_policy_params(spec, policy, params))
        bind = getattr(pol, "bind", None)
        if bind is not None:  # a policy that rests on the session's text (the messages it pins)
            p = bind(p, store.messages(session_id), config)
        for_session = getattr(pol, "for_session", None)
        if for_session is not None:  # a policy whose parameters follow the session's agent (auto_compaction)
            p = for_session(p, session)
    except ValueError as e:
        raise UsageError(str(e)) from None
    return session, spec, policy, p
