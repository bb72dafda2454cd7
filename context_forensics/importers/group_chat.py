"""Multi-agent group chats: a list of ``{content, role|name}`` turns whose speakers are agents.

Two layouts:

- AutoGen / AG2 group chats (``GroupChat.messages``, a chat manager's history): a JSON list of
  ``{content, role, name}`` where ``name`` is the speaking agent, and Magentic-One orchestrator
  logs, where ``role`` itself is the speaker (``Orchestrator (thought)``, ``Orchestrator (->
  WebSurfer)``, ``WebSurfer``, ``human``).
- Data sets built from them, the Who&When failure-attribution set (ag2ai/Agents_Failure_Attribution,
  ``Who&When/``, checked at f4d2b6da464a): one object per run with ``history`` (the turns),
  ``question``, ``question_ID``, ``ground_truth``, ``is_correct`` (Algorithm-Generated) or
  ``is_corrected`` (Hand-Crafted), the labelled ``mistake_agent``, ``mistake_step`` (an index into
  ``history``) and ``mistake_reason``, and per-agent ``system_prompt`` (Algorithm-Generated).

The sniffer claims a file only for what makes it a group chat: a ``history`` of turns with the
Who&When labels, or turns (a list, or a ``history``) with at least two named speakers that are no chat role (``user``,
``assistant``, ...) and no tool calls, so an ordinary OpenAI chat list stays ``openai_chat``'s.

Each turn is one message, in order, ``name`` = the agent (a Magentic-One role's ``(...)`` tail is
the channel: ``meta["channel"]``; ``meta["speaker"]`` the speaker as written, ``meta["history_index"]``
its index). A human's turn is a user message; a code executor's (a speaker named ``*terminal*``) is a
user message with its name (its output, read by the agents, made by no model call); every other
agent's turn is an assistant message (a speaker named ``User`` / ``human`` is the human: a user
message; a human proxy under another name cannot be told from an agent and is read as one) (one model call of that
agent). The chat is one shared history: each agent read it all, plus its own system prompt, which the log keeps apart
(``metadata["system_prompts"]``, not in the window); no model names and no token usage are logged.

Task and outcome: ``question_ID`` is the task, the question the title (whole in metadata);
``is_correct`` / ``is_corrected`` false is a failure, true a success. The labelled mistake goes to
``metadata["labelled_mistake"]`` {agent, step (history index), reason, message (its position),
call_step (the model-call step number of that message, as ``ctxf show`` / ``explain`` count steps,
when it is an agent's call)}, to compare with ``explain``'s decisive step.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from ..errors import InputError
from ..records import Message, Session
from ._sniffing import is_chat_turn, looks_like_group_chat, partial_json, speaker_of
from ._text import clip, title_line
from .base import RECORD_ERRORS, ImportContext, Importer, as_int, as_list, as_str, load_json, register

WHO_AND_WHEN_KEYS = frozenset({"mistake_agent", "mistake_step", "mistake_reason"})
_CHANNEL = re.compile(r"^(.*?)\s*\((.*)\)\s*$")


def agent_and_channel(speaker: str) -> tuple[str, str | None]:
    """``Orchestrator (-> WebSurfer)`` -> (``Orchestrator``, ``-> WebSurfer``)."""
    m = _CHANNEL.match(speaker)
    if m and m.group(1):
        return m.group(1), m.group(2)
    return speaker, None


@register
class GroupChat(Importer):
    name = "group_chat"
    description = ("multi-agent group chats (AutoGen / AG2 GroupChat messages, Magentic-One logs, Who&When "
                   "runs with labelled mistakes): each agent a named speaker")
    extensions = (".json",)
    priority = 26

    def sniff(self, path: Path, head: bytes) -> bool:
        doc = partial_json(head)
        if isinstance(doc, dict):
            history = doc.get("history")
            if not isinstance(history, list) or not all(is_chat_turn(t) for t in history):
                return False
            # the labels follow a long history: past the head, the speakers have to say it
            return bool(WHO_AND_WHEN_KEYS & doc.keys()) or looks_like_group_chat(history)
        return isinstance(doc, list) and looks_like_group_chat(doc)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        doc = load_json(path, ctx)
        if isinstance(doc, dict):
            turns, labels = as_list(doc.get("history")), doc
        elif isinstance(doc, list):
            turns, labels = doc, {}
        else:
            raise InputError("not a group chat: expected a list of turns or a Who&When run", where=str(path),
                             hint="a group chat is a JSON list of {content, role, name}")
        messages: list[Message] = []
        at: dict[int, int] = {}
        for i, t in enumerate(turns):
            try:
                m = self._turn(t, i, ctx)
            except RECORD_ERRORS as e:
                ctx.bad_record(e, what="turn", index=i)
                continue
            if m is not None:
                at[i] = len(messages)
                messages.append(m)
        if not messages:
            raise InputError("no turn in this group chat", where=str(path),
                             hint="the history holds no {content, role|name}")
        metadata: dict[str, Any] = {"agents": sorted({m.name for m in messages if m.role == "assistant" and m.name}),
                                    "turns": len(turns), "window": "one shared history; each agent's own system prompt "
                                    "is not in it (metadata['system_prompts'] where the log has them)"}
        prompts = labels.get("system_prompt")
        if isinstance(prompts, dict) and prompts:
            metadata["system_prompts"] = prompts
        for k in ("question", "ground_truth", "level", "question_ID"):
            if k in labels:
                metadata[k] = labels[k]
        verdict = labels.get("is_correct", labels.get("is_corrected"))
        outcome = "success" if verdict is True else "failure" if verdict is False else "unknown"
        if WHO_AND_WHEN_KEYS & labels.keys():
            metadata["labelled_mistake"] = self._mistake(labels, at, messages, ctx)
            metadata["labels_source"] = "Who&When"
        question = as_str(labels.get("question"))
        task = as_str(labels.get("question_ID"))
        title = title_line(question) if question else title_line(messages[0].text)
        yield Session(external_id=path.stem if not task else f"{path.parent.name}/{path.stem}", format=self.name,
                      messages=messages, title=title or path.stem, task=task, outcome=outcome, metadata=metadata)

    def _turn(self, t: Any, i: int, ctx: ImportContext) -> Message | None:
        if not is_chat_turn(t):
            ctx.skip("non-turn item", unknown=True)
            return None
        content = t.get("content")
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise TypeError(f"turn content is {type(content).__name__}, not text")
        speaker = speaker_of(t)
        raw_role = (as_str(t.get("role")) or "").lower()
        meta: dict[str, Any] = {"history_index": i}
        if speaker is None or speaker.lower() in ("user", "human"):  # the human (a UserProxy named "User"), the system
            role = "system" if raw_role in ("system", "developer") else "user"
            meta["speaker"] = speaker or raw_role
            return Message(role=role, text=content, name=as_str(t.get("name")), meta=meta)
        agent, channel = agent_and_channel(speaker)
        meta["speaker"] = speaker
        if channel:
            meta["channel"] = channel
        if raw_role and as_str(t.get("name")):
            meta["logged_role"] = raw_role  # AG2 logs each turn as the recording agent saw it
        if "terminal" in agent.lower():
            meta["executor_output"] = True  # a code executor's output: no model call made it
            return Message(role="user", text=content, name=agent, meta=meta)
        return Message(role="assistant", text=content, name=agent, meta=meta)

    def _mistake(self, labels: dict, at: dict[int, int], messages: list[Message], ctx: ImportContext) -> dict[str, Any]:
        step = as_int(labels.get("mistake_step"))
        if step is None and isinstance(labels.get("mistake_step"), str) and labels["mistake_step"].strip().isdigit():
            step = int(labels["mistake_step"].strip())
        out: dict[str, Any] = {"agent": labels.get("mistake_agent"), "step": step,
                               "reason": clip(str(labels.get("mistake_reason") or ""), 2000)}
        pos = at.get(step) if step is not None else None
        if pos is None:
            ctx.warn(f"the labelled mistake step {labels.get('mistake_step')!r} is no turn of the history")
            return out
        out["message"] = pos
        m = messages[pos]
        out["speaker"] = m.meta.get("speaker")
        if m.role == "assistant":
            out["call_step"] = sum(1 for x in messages[: pos + 1] if x.role == "assistant")
        return out
