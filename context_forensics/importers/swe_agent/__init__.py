"""SWE-agent ``.traj`` trajectories (classic v0.x and 1.x).

A ``.traj`` is one JSON object: ``history[]`` (the chat messages of every agent, as SWE-agent
keeps them: ``role``, ``content``, ``agent``, ``message_type``, ``is_demo``, ``thought``,
``action``, ``tool_calls``, ``tool_call_ids``, ``thinking_blocks``), ``trajectory[]`` (one
step per model call: ``thought``/``action``/``observation``/``response``, and in 1.x the
``query`` the model saw), ``info`` (``exit_status``, ``submission``, aggregate
``model_stats``) and, in 1.x, ``replay_config`` (a JSON string or object naming the model and
the problem statement id). A RetryAgent run adds ``attempts[]`` (one traj per attempt; the top
level is a copy of the best one).

The submission is kept as a message of kind ``submission`` holding the diff: the result of the
final ``submit`` action when the conversation has it (function calling records it as a tool
message), else appended after the last model call from the submit step's ``observation`` in
``trajectory[]`` (classic ``history[]`` ends with the submit call), else from
``info.submission`` (an auto-submission). It is no model call: the steps are unchanged.

What we import: ``history[]`` when present (it is what the model was sent, before SWE-agent's
history processors elide old observations), split by ``agent`` (the first agent is the main
session; any other agent becomes a child session). Demonstrations stay in the context and are
marked ``meta["is_demo"]``. Without ``history[]`` we use the last step's ``query`` plus its
response, else rebuild the conversation from thought/action/observation. SWE-agent records no
per-call usage, only ``info.model_stats`` totals, which go into the session metadata.

Task and outcome: the instance id comes from ``replay_config.problem_statement.id``, a
predictions file next to the traj (``all_preds.jsonl``, ``*.all_preds.jsonl``, ``preds.json``,
``<id>.pred``) or the file stem when it looks like a SWE-bench id; a SWE-bench verdict next to
the traj (``report.json``, an eval log, a results summary; see ``_swebench.find_verdict``) sets
the outcome.

The package: ``layouts`` (the conversation from history[] or trajectory[]), ``submission``
(the submitted diff as a message), ``sidecars`` (predictions, args.yaml, the run folder, the
replay config) and ``importer`` (the registered ``swe_agent``). The SWE-bench verdicts and the
agent-log message and usage shapes it shares with ``mini_swe_agent`` and ``openhands`` are in
``importers._swebench``, ``importers._agent_messages`` and ``importers._agent_calls``.
"""

from __future__ import annotations

from .importer import SweAgent
from .layouts import messages_by_agent
from .submission import mark_submission

__all__ = ["SweAgent", "mark_submission", "messages_by_agent"]
