"""tau-bench results: a JSON list of runs, one session per run (task and trial).

What ``tau_bench/run.py`` writes (sierra-research/tau-bench @ 59a200c6d575, ``types.EnvRunResult``;
also the shape of its ``historical_trajectories/*.json``): ``[{task_id, reward, info, traj,
trial}, ...]``. ``traj`` is the agent's message list as it sent it: with the tool-calling agent
OpenAI chat messages (``tool_calls``, ``role: tool`` results; ``agents/tool_calling_agent.py``),
with the ReAct / act agents plain text (the assistant's turn ends ``Action:\\n{"name", "arguments"}``
and the environment's answer comes back as a user turn ``API output: ...``;
``agents/chat_react_agent.py``): that text is what the model read, so it is kept as text, the
parsed action in ``meta["react_action"]``. ``info`` holds the task (``task.instruction`` is the user
simulator's, not the agent's), ``reward_info`` and, for a run that crashed, ``error`` (such a run
has an empty ``traj``: skipped, counted and warned about).

Outcome, from ``reward`` (tau-bench's verdict: 1.0 when the final database and the outputs match
the task's, else 0.0): ``reward >= 1`` success, ``reward <= 0`` failure, anything between (a
custom reward) unknown, the reward kept in metadata. The task key is ``tau-bench/<env>/<task_id>``
with the environment from the file's name (``...-airline.json``, ``...-retail.json``) or else from
the policy heading of the system prompt (``# Airline Agent Policy`` / ``# Retail agent policy``),
``metadata["env_source"]`` saying which; ``tau-bench/<task_id>`` when neither says. Trials of one
task share the key, so ``ctxf diverge --task`` pairs a success with a failure.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

from ..errors import InputError
from ..records import Message, Session
from ._agent_messages import convert_message
from ._sniffing import partial_json
from ._stream import iter_json_array
from .base import RECORD_ERRORS, ImportContext, Importer, as_dict, as_int, as_list, as_str, register

ENVS = ("airline", "retail")
_HEADINGS = {"# airline agent policy": "airline", "# retail agent policy": "retail"}
_ACTION = re.compile(r"Action:\s*(\{.*\})\s*$", re.S)


def _is_run(item: Any) -> bool:
    return (isinstance(item, dict) and "task_id" in item and "reward" in item
            and ("traj" in item or "info" in item) and not ("messages" in item or "history" in item))


def env_of(path: Path, traj: list[Any]) -> tuple[str | None, str | None]:
    """(environment, what said so) for a results file."""
    words = re.split(r"[^a-z]+", path.name.lower())
    named = [e for e in ENVS if e in words]
    if len(named) == 1:
        return named[0], "file name"
    first = traj[0] if traj and isinstance(traj[0], dict) else {}
    if first.get("role") == "system" and isinstance(first.get("content"), str):
        head = first["content"].lstrip().split("\n", 1)[0].strip().lower()
        if head in _HEADINGS:
            return _HEADINGS[head], "system prompt heading"
    return None, None


def outcome_of(reward: Any) -> str:
    if isinstance(reward, bool) or not isinstance(reward, (int, float)):
        return "unknown"
    if reward >= 1:
        return "success"
    if reward <= 0:
        return "failure"
    return "unknown"


def react_action(text: str) -> dict[str, Any] | None:
    """The ``Action: {"name", "arguments"}`` a ReAct / act turn ends with, or None."""
    m = _ACTION.search(text)
    if not m:
        return None
    try:
        value = json.loads(m.group(1))
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("name"), str) else None


@register
class TauBench(Importer):
    name = "tau_bench"
    description = "tau-bench results (a list of {task_id, trial, reward, info, traj}): one session per trial"
    extensions = (".json",)
    priority = 25

    def sniff(self, path: Path, head: bytes) -> bool:
        doc = partial_json(head)
        return isinstance(doc, list) and bool(doc) and all(_is_run(x) for x in doc)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        seen: dict[str, int] = {}
        any_run = False
        for i, run in iter_json_array(path, ctx):
            any_run = True
            session = None
            with ctx.record("run", index=i):
                session = self._run(path, i, run, ctx, seen)
            if session is not None:
                yield session
        if not any_run:
            raise InputError("no run in this tau-bench results file", where=str(path),
                             hint="a results file is a list of {task_id, trial, reward, info, traj}")

    def _run(self, path: Path, index: int, run: Any, ctx: ImportContext, seen: dict[str, int]) -> Session | None:
        if not _is_run(run):
            ctx.skip("non-run item", unknown=True)
            return None
        traj = as_list(run.get("traj"))
        info = as_dict(run.get("info"))
        if not traj:
            ctx.warn(f"run {index} (task {run.get('task_id')}): no trajectory"
                     + (f" (error: {str(info['error'])[:200]})" if info.get("error") else "") + "; skipped it")
            ctx.skip("run without trajectory")
            return None
        task_id, trial = as_int(run.get("task_id")), as_int(run.get("trial"))
        env, env_source = env_of(path, traj)
        task = f"tau-bench/{env}/{task_id}" if env else f"tau-bench/{task_id}"
        names: dict[str, str] = {}
        messages: list[Message] = []
        react = 0
        for j, m in enumerate(traj):
            try:
                if not isinstance(m, dict):
                    ctx.skip("malformed message")
                    continue
                meta: dict[str, Any] = {"traj_index": j}
                for msg in convert_message(m, ctx, names=names, meta=meta):
                    if msg.role == "assistant" and not msg.tool_calls and (action := react_action(msg.text)):
                        msg.meta["react_action"] = action
                        react += 1
                    elif msg.role == "user" and msg.text.startswith("API output: "):
                        msg.meta["environment_output"] = True  # the ReAct agent's tool result, sent as a user turn
                    messages.append(msg)
            except RECORD_ERRORS as e:
                ctx.bad_record(e, what="message", index=f"{index}.{j}")
        key = f"{task}/trial-{trial}"
        seen[key] = seen.get(key, 0) + 1
        external_id = key if seen[key] == 1 else f"{key}#{seen[key]}"
        metadata: dict[str, Any] = {"reward": run.get("reward"), "trial": trial, "task_id": task_id,
                                    "run_index": index, "agent_format": "react" if react else "tool_calling"}
        if env:
            metadata["env"], metadata["env_source"] = env, env_source
        for k in ("reward_info", "user_cost", "source"):
            if k in info:
                metadata[k] = info[k]
        instruction = as_str(as_dict(info.get("task")).get("instruction"))
        if instruction:
            metadata["user_instruction"] = instruction
        if as_list(as_dict(info.get("task")).get("actions")):
            metadata["expected_actions"] = info["task"]["actions"]
        return Session(external_id=external_id, format=self.name, messages=messages,
                       title=f"tau-bench {env or ''} task {task_id} trial {trial}".replace("  ", " "),
                       task=task, outcome=outcome_of(run.get("reward")), metadata=metadata)
