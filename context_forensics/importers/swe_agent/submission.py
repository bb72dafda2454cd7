"""The run's submission (the diff it submitted) kept as a ``submission`` message after its last
model call: the final ``submit`` action's result when the conversation has it (function
calling records it as a tool message), else the submit step's observation from
``trajectory[]``, else ``info.submission`` (an auto-submission). It is no model call.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...records import KIND_MESSAGE, KIND_SUBMISSION, Message


def _is_submit(action: Any) -> bool:
    return isinstance(action, str) and action.strip().split(" ", 1)[0] == "submit"


def mark_submission(msgs: list[Message], steps: list[Any], info: dict[str, Any]) -> None:
    """Keep the run's submission as a ``submission`` message after its last model call (in place)."""
    last = next((j for j in range(len(msgs) - 1, -1, -1)
                 if msgs[j].role == "assistant" and msgs[j].kind == KIND_MESSAGE), None)
    if last is None:
        return
    call = msgs[last]
    submission = info.get("submission") if isinstance(info.get("submission"), str) else None
    step = steps[-1] if steps and isinstance(steps[-1], dict) else {}
    observation = step.get("observation") if _is_submit(step.get("action")) else None
    observation = observation if isinstance(observation, str) and observation.strip() else None
    submit_calls = [c for c in call.tool_calls if c.name == "submit"]
    meta: dict[str, Any] = {"exit": True}
    if isinstance(info.get("exit_status"), str):
        meta["exit_status"] = info["exit_status"]
    after = msgs[last + 1:]
    if after:  # the conversation kept the submit's result: mark it
        result = after[-1]
        is_result = len(after) == 1 and (
            (result.role == "tool" and result.tool_call_id in {c.id for c in submit_calls if c.id})
            or (observation is not None and result.text.strip() == observation.strip())
            or (bool(submission and submission.strip()) and result.text.strip() == submission.strip()))  # type: ignore[union-attr]
        if is_result:
            msgs[-1] = replace(result, kind=KIND_SUBMISSION, meta={**result.meta, **meta})
        return
    if observation is not None:
        text, meta["from"] = observation, "trajectory"
    elif submission:
        text, meta["from"] = submission, "info.submission"
    else:
        return
    if len(submit_calls) == 1 and submit_calls[0].id:  # function calling: the submit call's result
        msgs.append(Message(role="tool", text=text, kind=KIND_SUBMISSION, tool_call_id=submit_calls[0].id,
                            name="submit", meta=meta))
    else:  # classic: observations are user messages
        msgs.append(Message(role="user", text=text, kind=KIND_SUBMISSION, meta=meta))
