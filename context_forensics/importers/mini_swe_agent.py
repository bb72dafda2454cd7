"""mini-swe-agent / live-swe-agent ``*.traj.json`` trajectories.

One JSON object: ``messages[]`` (the agent's complete, linear message list, i.e. exactly what
each model call was sent), ``info`` (``exit_status``, ``submission``, ``model_stats`` with
``instance_cost``/``api_calls``, ``mini_version``, ``config.model.model_name``),
``trajectory_format`` and, in newer versions, ``instance_id``.

- ``mini-swe-agent-1`` (v1.x, and unversioned v0.x files): text actions in a bash code block;
  the assistant message's ``extra.response`` is the raw completion with ``usage``; every
  observation and the final submission are ``user`` messages.
- ``mini-swe-agent-1.1`` (v2.x, live-swe-agent): tool calling. Assistant messages are
  litellm message dumps (``tool_calls``, maybe ``reasoning_content``/``thinking_blocks``)
  with ``extra.response``; observations are ``role: tool`` messages; Responses-API models
  store the response object itself (``object: response``, ``output[]``) and
  ``function_call_output`` items; the run ends with a ``role: exit`` message.

Per-call usage comes from ``extra.response.usage`` (OpenAI-style, litellm Anthropic cache
fields, Responses and Gemini shapes; see :func:`usage_from`) and sits on the assistant message.

Decisions:

- The submission is kept as a message of kind ``submission`` whose text is the patch: in v1 the
  final ``user`` message equal to ``info.submission``; in v2 the ``role: exit`` record, which
  holds the output of the last call's ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` command, so it
  becomes the ``tool`` result of that call (a ``user`` message when no single call is left
  unanswered). Both carry ``meta["exit"] = True``. An exit record that is no submission (another
  exit status, nothing submitted) stays a plain ``user`` message with ``meta["exit"]``. No later
  model call reads them: the steps are the assistant messages, as before.
- A call whose output failed to parse (FormatError) is not in ``messages[]``: mini-swe-agent
  keeps only the error message it sent back. Those calls still count in
  ``info.model_stats.api_calls``; ``metadata["unrecorded_calls"]`` is the difference, said in a
  warning, and when the error message carries the dropped response its usage is kept in that
  user message's ``meta["dropped_call"]`` (never as ``Message.usage``, which belongs to
  assistant steps).
- Tool-calling runs send a fixed ``bash`` tool schema that the file does not record; when the
  calls use it, ``metadata["tools"]`` holds mini-swe-agent's schema with
  ``metadata["tools_inferred"] = True``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

from ..errors import InputError
from ..records import KIND_MESSAGE, KIND_SUBMISSION, Message, Session
from ._agent_calls import iso_time, scalar_params, tools_summary, usage_from
from ._agent_messages import convert_message
from ._swebench import looks_like_instance_id, verdict_near
from ._text import clip
from .base import RECORD_ERRORS, ImportContext, Importer, as_dict, as_list, head_text, load_json, register, text_of

# mini-swe-agent's bash tool (models/utils/actions_toolcall.py and the Responses-API variant)
BASH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Execute a bash command",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The bash command to execute"}},
            "required": ["command"],
        },
    },
}
BASH_TOOL_RESPONSE_API = {"type": "function", **BASH_TOOL["function"]}


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".traj.json", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def _response_of(m: dict) -> dict | None:
    extra = as_dict(m.get("extra"))
    resp = extra.get("response")
    if isinstance(resp, dict):
        return resp
    if m.get("object") == "response":
        return m
    return None


def _reasoning_from_response(resp: dict | None) -> dict:
    """Reasoning fields of ``choices[0].message`` when the stored message lacks them."""
    choices = resp.get("choices") if isinstance(resp, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return {}
    msg = choices[0].get("message")
    if not isinstance(msg, dict):
        return {}
    return {k: msg[k] for k in ("reasoning_content", "reasoning", "reasoning_details", "thinking_blocks")
            if msg.get(k)}


def _exit_message(m: dict, index: int, messages: list[Message], submission: Any) -> Message:
    """v2's ``role: exit`` record as a message: the submission, or another kind of exit."""
    extra = as_dict(m.get("extra"))
    text = text_of(m.get("content"))
    status = extra.get("exit_status")
    meta: dict[str, Any] = {"index": index, "exit": True, "source_role": "exit"}
    if isinstance(status, str):
        meta["exit_status"] = status
    is_submission = status == "Submitted" or (bool(text) and text in (submission, extra.get("submission")))
    if not is_submission:
        return Message(role="user", text=text, meta=meta)
    # The exit record holds the output of the last call's submit command: that call's result.
    last = next((j for j in range(len(messages) - 1, -1, -1) if messages[j].role == "assistant"), None)
    if last is not None:
        answered = {x.tool_call_id for x in messages[last + 1:] if x.role == "tool"}
        open_calls = [c for c in messages[last].tool_calls if c.id and c.id not in answered]
        if len(open_calls) == 1:
            return Message(role="tool", text=text, kind=KIND_SUBMISSION, tool_call_id=open_calls[0].id,
                           name=open_calls[0].name, meta=meta)
    return Message(role="user", text=text, kind=KIND_SUBMISSION, meta=meta)


@register
class MiniSweAgent(Importer):
    name = "mini_swe_agent"
    description = "mini-swe-agent / live-swe-agent *.traj.json (v1 text actions, v1.1/v2 tool calls)"
    extensions = (".traj.json", ".json")
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        if not text.startswith("{"):
            return False
        if '"trajectory_format": "mini-swe-agent' in text or '"trajectory_format":"mini-swe-agent' in text:
            return True
        if '"mini_version"' in text and '"messages"' in text:
            return True
        # early layouts: {"info": {"exit_status", "submission", "model_stats"}, "messages": [...]}
        return (path.name.endswith(".traj.json") and '"messages"' in text and '"info"' in text
                and '"model_stats"' in text)

    def sidecars(self, path: Path) -> list[Path]:
        if path.is_dir():
            return []
        verdict = verdict_near(path, self._instance_hint(path))
        return [verdict.source] if verdict else []

    @staticmethod
    def _instance_hint(path: Path) -> str | None:
        stem = _stem(path)
        return stem if looks_like_instance_id(stem) else None

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        data = load_json(path, ctx)
        if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
            raise InputError("not a mini-swe-agent trajectory: no messages[] list", where=str(path),
                             hint="expected {info: {...}, messages: [...], trajectory_format: ...}")
        info = as_dict(data.get("info"))
        config = as_dict(info.get("config"))
        model_cfg = as_dict(config.get("model"))
        model_name = model_cfg.get("model_name") if isinstance(model_cfg.get("model_name"), str) else None
        request: dict[str, Any] = {"model": model_name} if model_name else {}
        request.update(scalar_params(model_cfg.get("model_kwargs")))
        stem = _stem(path)
        instance_id = data.get("instance_id") if isinstance(data.get("instance_id"), str) else None
        if not instance_id and looks_like_instance_id(stem):
            instance_id = stem
        verdict = verdict_near(path, instance_id)
        if verdict and verdict.task and not instance_id:
            instance_id = verdict.task
        exit_status = info.get("exit_status")
        submission = info.get("submission")

        raw = data["messages"]
        uses_bash_tool = False
        response_api = False
        for m in raw:
            if not isinstance(m, dict):
                continue
            if m.get("object") == "response" or m.get("type") == "function_call_output":
                response_api = True
            for call in as_list(m.get("tool_calls")):
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict) and fn.get("name") == "bash":
                    uses_bash_tool = True
            if m.get("object") == "response":
                for item in as_list(m.get("output")):
                    if isinstance(item, dict) and item.get("type") == "function_call" and item.get("name") == "bash":
                        uses_bash_tool = True
        tools = [BASH_TOOL_RESPONSE_API if response_api else BASH_TOOL] if uses_bash_tool else None
        if tools:
            request.update(tools_summary(tools))

        messages: list[Message] = []
        names: dict[str, str] = {}
        n_calls = 0
        dropped = 0
        started_at = None
        for i, m in enumerate(raw):
            try:
                if not isinstance(m, dict):
                    ctx.skip("malformed message")
                    continue
                role = str(m.get("role") or "")
                extra = as_dict(m.get("extra"))
                if role == "exit":
                    messages.append(_exit_message(m, i, messages, submission))
                    continue
                resp = _response_of(m)
                is_call = role == "assistant" or m.get("object") == "response"
                meta: dict[str, Any] = {"index": i}
                usage = None
                timestamp = iso_time(extra.get("timestamp"))
                msg_model = None
                if is_call:
                    n_calls += 1
                    usage = usage_from(resp.get("usage")) if resp else None
                    if request:
                        meta["request"] = dict(request)
                    if timestamp is None and resp:
                        timestamp = iso_time(resp.get("created_at") or resp.get("created"))
                    msg_model = resp.get("model") if resp and isinstance(resp.get("model"), str) else None
                    if isinstance(extra.get("cost"), (int, float)):
                        meta["cost"] = extra["cost"]
                    if resp and resp.get("provider"):
                        meta["provider"] = resp["provider"]
                    from_response = _reasoning_from_response(resp)
                    if from_response and not any(m.get(k) for k in from_response):
                        # the stored message lacks the reasoning; it was output, not resent context
                        meta["thinking_from_response"] = True
                        m = {**m, **from_response}
                    started_at = started_at or timestamp
                else:
                    if extra.get("interrupt_type"):
                        meta["interrupt_type"] = extra["interrupt_type"]
                        if extra["interrupt_type"] == "FormatError":
                            dropped_call: dict[str, Any] = {}
                            if resp and usage_from(resp.get("usage")):
                                dropped_call["usage"] = usage_from(resp.get("usage")).to_dict()  # type: ignore[union-attr]
                            if isinstance(extra.get("model_response"), str):
                                dropped_call["response_chars"] = len(extra["model_response"])
                            if dropped_call:
                                meta["dropped_call"] = dropped_call
                                dropped += 1
                    if "returncode" in extra:
                        meta["returncode"] = extra["returncode"]
                messages.extend(convert_message(m, ctx, names=names, usage=usage, meta=meta, model=msg_model,
                                                timestamp=timestamp))
            except RECORD_ERRORS as e:  # a message of unexpected shape: skipped, the rest kept
                ctx.bad_record(e, what="message", index=i)
        # v1: the Submitted exception's message (the final output) is the last user message
        if (messages and messages[-1].role == "user" and messages[-1].kind == KIND_MESSAGE and exit_status
                and isinstance(submission, str) and messages[-1].text == submission):
            messages[-1].meta["exit"] = True
            messages[-1] = replace(messages[-1], kind=KIND_SUBMISSION)

        stats = as_dict(info.get("model_stats"))
        metadata: dict[str, Any] = {
            "trajectory_format": data.get("trajectory_format"),
            "mini_version": info.get("mini_version"),
            "exit_status": exit_status,
            "model_stats": stats,
            "recorded_calls": n_calls,
        }
        api_calls = stats.get("api_calls")
        if isinstance(api_calls, int) and api_calls > n_calls:
            metadata["unrecorded_calls"] = api_calls - n_calls
            errors = sum(1 for x in messages if x.meta.get("interrupt_type") == "FormatError")
            ctx.warn(f"info.model_stats.api_calls is {api_calls} but messages[] holds {n_calls} model "
                     f"call{'' if n_calls == 1 else 's'}: "
                     f"{api_calls - n_calls} left no output in the log"
                     + (f" ({errors} format-error replies of the harness stand for them)" if errors else "")
                     + (f"; the steps are the {n_calls} recorded calls" if n_calls != 1
                        else "; the step is the 1 recorded call"))
        if dropped:
            metadata["dropped_call_usage"] = dropped
        if isinstance(submission, str):
            metadata["submission_chars"] = len(submission)
            metadata["submission"] = clip(submission, 8000)
        for key in ("agent_type", "model_type", "environment_type"):
            if isinstance(config.get(key), str):
                metadata[key] = config[key]
        env = as_dict(config.get("environment"))
        if isinstance(env.get("image"), str):
            metadata["environment_image"] = env["image"]
        if request:
            metadata["request"] = request
        if tools:
            metadata["tools"] = tools
            metadata["tools_inferred"] = True
        if verdict:
            metadata["verdict_source"] = verdict.source.name
        metadata = {k: v for k, v in metadata.items() if v is not None}
        yield Session(
            external_id=instance_id or stem,
            format=self.name,
            messages=messages,
            title=instance_id or stem,
            model=model_name,
            started_at=started_at,
            task=instance_id,
            outcome=verdict.outcome if verdict else "unknown",
            metadata=metadata,
        )
