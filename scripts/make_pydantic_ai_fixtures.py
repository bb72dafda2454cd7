"""Write tests/fixtures/pydantic_ai/: message histories Pydantic AI itself dumped.

Offline: the agents run on Pydantic AI's own ``TestModel`` and ``FunctionModel`` (no provider, no
socket). Each file is ``ModelMessagesTypeAdapter.dump_json(result.all_messages())``, as the docs
show for storing a conversation:

- ``test_model_run.json``: an agent with instructions, a system prompt and a tool, run once on
  ``TestModel`` (it calls every tool, then answers with the tool results as JSON);
- ``continued.json``: a second run given ``message_history=`` the first run's messages, so the file
  holds both runs;
- ``function_model.json``: a ``FunctionModel`` run that thinks, calls a tool with bad arguments (a
  retry-prompt comes back), calls it again and answers, with usage figures the function sets.

The usage figures are the models' canned ones (TestModel estimates them from the text by its own rule;
the FunctionModel's are written below), not any provider's count. Needs the ``fixtures`` extra; run
``python scripts/make_pydantic_ai_fixtures.py [OUT_DIR]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "pydantic_ai"


def weather_agent(model) -> Agent:
    agent = Agent(model, instructions="Answer weather questions in one sentence.",
                  system_prompt="You are a weather assistant.", retries=3)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        if city.islower() and len(city) > 1:  # TestModel passes "a"; the FunctionModel "paris" once
            raise ModelRetry(f"city must be capitalised, got {city!r}")
        return f"Sunny in {city}, 21 C"

    return agent


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    calls = sum(isinstance(m, ModelResponse) for m in messages)
    usage = RequestUsage(input_tokens=120 + 40 * calls, cache_read_tokens=100 if calls else 0, output_tokens=12)
    if calls == 0:  # arguments that fail validation: a retry-prompt part comes back
        parts = [ThinkingPart(content="The user wants the weather; call get_weather."),
                 ToolCallPart("get_weather", {"town": "Paris"}, tool_call_id="call_0")]
    elif calls == 1:  # the tool raises ModelRetry: a tool-return part with outcome "retried"
        parts = [ToolCallPart("get_weather", {"city": "paris"}, tool_call_id="call_1")]
    elif calls == 2:
        parts = [ToolCallPart("get_weather", '{"city": "Paris"}', tool_call_id="call_2")]
    else:
        parts = [TextPart("It is sunny in Paris, 21 C.")]
    return ModelResponse(parts=parts, usage=usage, model_name="scripted-function-model")


def main(out: Path = OUT) -> None:
    out.mkdir(parents=True, exist_ok=True)
    agent = weather_agent(TestModel())
    first = agent.run_sync("What is the weather in London?")
    (out / "test_model_run.json").write_bytes(ModelMessagesTypeAdapter.dump_json(first.all_messages(), indent=2))
    second = agent.run_sync("And tomorrow?", message_history=first.all_messages())
    (out / "continued.json").write_bytes(ModelMessagesTypeAdapter.dump_json(second.all_messages(), indent=2))
    fn = weather_agent(FunctionModel(scripted))
    third = fn.run_sync("What is the weather in Paris?")
    (out / "function_model.json").write_bytes(ModelMessagesTypeAdapter.dump_json(third.all_messages(), indent=2))
    for name in ("test_model_run.json", "continued.json", "function_model.json"):
        print("wrote", out / name)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
