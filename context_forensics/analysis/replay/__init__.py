"""Replay: the window of every model call under a model and an overflow policy.

- ``spec``: which model spec and policy a replay runs under (``resolve_spec``), and the budget
  the session's answered calls prove (``bound_by_usage``);
- ``policies``: the eviction policies, one module each, registered by name (``get_policy``;
  ``policies.policies()`` lists them);
- ``engine``: ``prepare`` a session (count it, build the policy's input), run it into per-step
  records (``replay_session``, ``step_dicts``, ``summarize``), cached in the store;
- ``timeline``: ``Timeline``, each message's state at every step of a run;
- ``parts``, ``window``: what one step's window is made of, and ``window_at``, that window
  message by message.

>>> from context_forensics.analysis.replay import replay_session, window_at
>>> rep = replay_session(store, session_id, "gpt-4o-mini")   # a Replay; rep.to_dict() is the --json
"""

from . import policies
from .engine import (
    CACHE_SCHEMA,
    LOST_STATES,
    REPLAY_VERSION,
    Prepared,
    Replay,
    build_input,
    gc_paused,
    message_steps,
    prepare,
    replay_prepared,
    replay_session,
    step_dicts,
    summarize,
)
from .parts import PART_KINDS, window_parts
from .policies import IN_WINDOW, STATE_NAMES, Policy, ReplayInput, StepResult, get_policy, is_compaction, rewrites_only
from .spec import bound_by_usage, is_answered, model_notes_for, resolve_spec
from .timeline import Timeline
from .window import window_at

__all__ = [
    "CACHE_SCHEMA", "IN_WINDOW", "LOST_STATES", "PART_KINDS", "REPLAY_VERSION", "STATE_NAMES",
    "Policy", "Prepared", "Replay", "ReplayInput", "StepResult", "Timeline",
    "bound_by_usage", "build_input", "gc_paused", "get_policy", "is_answered", "is_compaction", "message_steps",
    "model_notes_for", "policies", "prepare", "replay_prepared", "replay_session", "resolve_spec", "rewrites_only",
    "step_dicts", "summarize",
    "window_at", "window_parts",
]
