"""Recorded calls chained into sessions.

A call whose request repeats an earlier call's request plus that call's answer (a tool-use
chain, a multi-turn chat) continues that call's session; any other call starts a new one (a
Responses call that names ``previous_response_id`` continues the call that gave that id). The
call's answer (the first message it produced that is not a reasoning item) carries its usage,
``meta["call_index"]`` and ``meta["request"]``; where a later request re-sends an earlier answer, the session keeps the
re-sent form (what the model read from then on) and notes a differing recorded answer in
``meta["recorded_response"]``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...records import Message
from ..base import ImportContext
from ..openai_responses import answer_index
from .calls import Call


@dataclass
class Chain:
    """One session being built: its messages and the calls chained into it so far."""

    messages: list[Message]
    start: int  # where the last call's answer begins (= its request length)
    calls: list[Call]
    prefix_hashes: list[str]  # hashes of messages[:start], the last call's request


def _signature(msgs: list[Message]) -> tuple[list[str], list[str], str]:
    calls = [c for m in msgs for c in m.tool_calls]
    ids = sorted(c.id for c in calls if c.id)
    names = sorted(c.name for c in calls)
    text = " ".join(" ".join(m.text for m in msgs if m.kind == "message" and m.role == "assistant").split())
    return ids if len(ids) == len(calls) else [], names, text


def _same_answer(sent: list[Message], recorded: list[Message]) -> bool:
    """Whether the assistant turn a request re-sends is the recorded answer (loosely)."""
    if not sent:
        return False
    if all(m.meta.get("no_response") for m in recorded):
        return True  # the answer was not recorded; the re-sent one is all there is
    ids_s, names_s, text_s = _signature(sent)
    ids_r, names_r, text_r = _signature(recorded)
    if names_r or names_s:
        if ids_s and ids_r:
            return ids_s == ids_r
        return names_s == names_r
    return text_s == text_r


def _hashes(msgs: list[Message]) -> list[str]:
    return [m.hash for m in msgs]


def _answer(call: Call, msgs: list[Message], recorded: list[Message] | None = None) -> list[Message]:
    """``msgs`` (the call's answer as the session keeps it) with the call's facts on its answer
    (the first message that is not a reasoning item: the step replay compares with the usage)."""
    k = answer_index(msgs)
    first = msgs[k]
    src = call.response[answer_index(call.response)]
    meta = {**first.meta, **src.meta, "call_index": call.index, "request": call.params}
    if recorded is not None and not src.meta.get("no_response") and _hashes(recorded) != _hashes(msgs):
        meta["recorded_response"] = {
            "text": "".join(m.text for m in recorded),
            "tool_calls": [c.to_dict() for m in recorded for c in m.tool_calls],
            "parts": [p for m in recorded for p in m.parts],
        }
    model = src.model or first.model or call.params.get("model")
    out = [replace(first, usage=src.usage, model=model if isinstance(model, str) else None,
                   timestamp=src.timestamp or call.timestamp, meta=meta)]
    return list(msgs[:k]) + out + list(msgs[k + 1:])


def _extend(chain: Chain, call: Call, req_hashes: list[str], ctx: ImportContext) -> bool:
    """Append ``call`` to ``chain`` if its request continues the chain's last call."""
    last = chain.calls[-1]
    p = chain.start
    recorded = chain.messages[p:]
    if call.previous_response_id:
        if call.previous_response_id != last.response_id:
            return False
        new = call.request
        if call.instructions is not None and new and new[0].meta.get("source") == "instructions":
            new = new[1:]  # the session keeps the first call's instructions
            if chain.messages and chain.messages[0].text != call.instructions:
                ctx.warn(f"interaction {call.index}: instructions changed mid-chain; the session shows the "
                         "first call's instructions")
        call.request = chain.messages + new
        chain.start = len(call.request)
        chain.prefix_hashes = _hashes(call.request)
        chain.messages = call.request + _answer(call, call.response)
        chain.calls.append(call)
        return True
    req = call.request
    if len(req) <= p or req_hashes[:p] != chain.prefix_hashes:
        return False
    j = p
    while j < len(req) and req[j].role == "assistant":
        j += 1
    sent = req[p:j]
    if not _same_answer(sent, recorded):
        return False
    # Keep the earlier calls' messages (they carry usage) and the re-sent answer (what the
    # model read from now on), with the earlier call's facts moved onto it.
    adopted = _answer(last, sent, recorded=last.response)
    chain.messages = chain.messages[:p] + adopted + req[j:] + _answer(call, call.response)
    chain.start = len(req)
    chain.prefix_hashes = req_hashes
    chain.calls.append(call)
    return True


def chain_calls(calls: list[Call], ctx: ImportContext) -> list[Chain]:
    """The sessions of ``calls`` (in recorded order): each call continues the latest chain its
    request extends, or starts a chain of its own."""
    chains: list[Chain] = []
    for call in calls:
        req_hashes = _hashes(call.request)
        for chain in sorted(chains, key=lambda c: c.calls[-1].index, reverse=True):
            if _extend(chain, call, req_hashes, ctx):
                break
        else:
            if call.previous_response_id:
                ctx.warn(f"interaction {call.index}: continues response {call.previous_response_id!r}, which is "
                         "not in this cassette; its earlier context is missing")
            chains.append(Chain(messages=call.request + _answer(call, call.response), start=len(call.request),
                                 calls=[call], prefix_hashes=req_hashes))
    return chains
