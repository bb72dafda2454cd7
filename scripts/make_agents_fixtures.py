"""Write tests/fixtures/openai_agents/: SQLite files the OpenAI Agents SDK's own ``SQLiteSession`` wrote.

Offline: no API key, no socket. ``items.db`` holds items added with ``session.add_items`` (a user
message, a reasoning item, an assistant message, a function_call and its function_call_output, a
second session in the same file); ``run.db`` is what ``Runner.run(agent, ..., session=...)`` writes
when the agent's model is a ``Model`` subclass that returns canned responses (a tool call, then an
answer; a second run on the same session continues it). Needs the ``fixtures`` extra
(``pip install -e '.[fixtures]'``); run ``python scripts/make_agents_fixtures.py [OUT_DIR]``.

The SDK writes WAL journals; each file is checkpointed and switched back to a rollback journal at the
end so it is one self-contained file (the rows are exactly the SDK's).
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

from agents import Agent, Runner, function_tool
from agents.items import ModelResponse
from agents.memory import SQLiteSession
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "openai_agents"


def _message(text: str, mid: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id=mid, type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text, annotations=[])])


class CannedModel(Model):
    """Returns the next canned output each call (no network)."""

    def __init__(self, outputs: list[list]) -> None:
        self.outputs = list(outputs)

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None, **kw):
        out = self.outputs.pop(0)
        return ModelResponse(output=out, usage=Usage(requests=1, input_tokens=50, output_tokens=10,
                                                     total_tokens=60), response_id=None)

    def stream_response(self, *a, **kw):  # pragma: no cover - the script never streams
        raise NotImplementedError


@function_tool
def get_weather(city: str) -> str:
    """Return the weather in a city."""
    return f"The weather in {city} is sunny, 21 C."


def _settle(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()


async def items_db(path: Path) -> None:
    s = SQLiteSession("conv-items", path)
    await s.add_items([
        {"role": "user", "content": "What is the weather in Paris?"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Use the weather tool."}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "The weather in Paris is sunny, 21 C."},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "It is sunny in Paris, 21 C.", "annotations": []}]},
    ])
    await s.add_items([{"role": "user", "content": "Thanks!"}])
    s.close()
    other = SQLiteSession("conv-other", path)
    await other.add_items([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                           {"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": "Hello.", "annotations": []}]}])
    other.close()


async def run_db(path: Path) -> None:
    model = CannedModel([
        [ResponseReasoningItem(id="rs_a", type="reasoning", summary=[Summary(type="summary_text",
                                                                             text="I should call get_weather.")]),
         ResponseFunctionToolCall(id="fc_a", call_id="call_a", type="function_call", name="get_weather",
                                  arguments='{"city": "Tokyo"}')],
        [_message("Tokyo is sunny, 21 C.", "msg_a")],
        [_message("You asked about Tokyo.", "msg_b")],
    ])
    agent = Agent(name="Weather", instructions="You answer weather questions.", model=model, tools=[get_weather])
    session = SQLiteSession("run-1", path)
    r1 = await Runner.run(agent, "What is the weather in Tokyo?", session=session)
    r2 = await Runner.run(agent, "Which city did I ask about?", session=session)
    session.close()
    print("run 1:", r1.final_output, "| run 2:", r2.final_output)


def main(out: Path = OUT) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, make in (("items.db", items_db), ("run.db", run_db)):
        p = out / name
        for suffix in ("", "-wal", "-shm"):
            Path(str(p) + suffix).unlink(missing_ok=True)
        asyncio.run(make(p))
        _settle(p)
        print("wrote", p)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
