"""Write tests/fixtures/otel/ with the official OpenTelemetry GenAI instrumentation (no network).

Each scenario runs in a child process of its own (the instrumentations patch the openai client
and read their settings from the environment once), drives the ``openai`` client over an
``httpx`` MockTransport that returns canned chat completions (one of them a tool call), and
exports what the instrumentation wrote with the SDK's OTLP JSON file exporter (the JSON Lines
layout of the collector's file exporter). Sockets are refused in the child: nothing goes out.

Scenarios (file: instrumentation, mode):

- ``openai_v2_spans.jsonl``: opentelemetry-instrumentation-openai-v2 with
  OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental and content captured on spans
  (``span_only``): ``gen_ai.input.messages`` / ``gen_ai.output.messages`` /
  ``gen_ai.system_instructions``; the agent run and its ``execute_tool`` span come from
  opentelemetry-util-genai's TelemetryHandler (``invoke_agent`` with a conversation id).
- ``openai_v2_events.jsonl``: the same instrumentation on its default (semconv 1.30) path with
  content captured as log-record events (``gen_ai.system.message``, ``gen_ai.user.message``,
  ``gen_ai.assistant.message``, ``gen_ai.tool.message``, ``gen_ai.choice``); spans and logs
  are written to the one file, as a collector file exporter does.
- ``openllmetry.jsonl``: Traceloop's opentelemetry-instrumentation-openai
  (``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` attributes).
- ``openinference.jsonl``: Arize's openinference-instrumentation-openai
  (``llm.input_messages.N.message.*`` attributes).

Run: ``.venv/bin/python scripts/make_otel_fixtures.py [OUT_DIR]`` (needs the ``fixtures`` extra:
``pip install -e '.[fixtures]'``). The output is made deterministic where the SDK allows
(fixed trace/span ids, fixed clock); ``--check`` compares a fresh run with the committed files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "otel"
PACKAGES = (
    "openai", "opentelemetry-sdk", "opentelemetry-exporter-otlp-json-file", "opentelemetry-instrumentation-openai-v2",
    "opentelemetry-util-genai", "opentelemetry-instrumentation-openai", "openinference-instrumentation-openai",
)

SCENARIOS = {
    "openai_v2_spans.jsonl": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
    },
    "openllmetry.jsonl": {"TRACELOOP_TRACE_CONTENT": "true"},
    "openinference.jsonl": {},
    # the SDK's ConsoleSpanExporter (pretty-printed span objects one after another), same spans
    "openai_v2_console.json": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
    },
}
# Written by older releases (semconv <= 1.36 events; OpenLLMetry's indexed attributes), which need
# an OpenTelemetry API older than the one above: they run under a second interpreter (--legacy
# PYTHON, a venv with LEGACY_PACKAGES) and are encoded with opentelemetry-exporter-otlp-proto-common
# + protobuf's json_format (ids turned into the hex OTLP/JSON uses).
LEGACY_SCENARIOS = {
    "openai_v2_events.jsonl": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"},
    "openllmetry_legacy.jsonl": {"TRACELOOP_TRACE_CONTENT": "true"},
}
LEGACY_PACKAGES = (
    "opentelemetry-api==1.33.1", "opentelemetry-sdk==1.33.1", "opentelemetry-exporter-otlp-proto-common==1.33.1",
    "opentelemetry-instrumentation-openai-v2==2.1b0", "opentelemetry-instrumentation-openai==0.40.14",
    "opentelemetry-semantic-conventions-ai==0.4.9", "openai", "httpx",
)

SYSTEM = "You are a weather assistant. Answer in one sentence."
QUESTION = "What is the weather in Paris today?"
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
CALL_ID = "call_wx_1"
ARGS = '{"city": "Paris"}'
RESULT = '{"temp_c": 18, "sky": "cloudy"}'
ANSWER = "It is 18 °C and cloudy in Paris."


def _completion(n: int, message: dict, finish: str, usage: tuple[int, int, int]) -> dict:
    prompt, completion, cached = usage
    return {
        "id": f"chatcmpl-fixture{n}", "object": "chat.completion", "created": 1767225600 + n,
        "model": "gpt-4o-mini-2024-07-18", "system_fingerprint": "fp_fixture",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                  "prompt_tokens_details": {"cached_tokens": cached}},
    }


# The canned answers, in the order the scenario asks (its second trace's call last).
REPLIES = [
    _completion(1, {"role": "assistant", "content": None, "tool_calls": [
        {"id": CALL_ID, "type": "function", "function": {"name": "get_weather", "arguments": ARGS}}]},
        "tool_calls", (71, 15, 0)),
    _completion(2, {"role": "assistant", "content": ANSWER}, "stop", (103, 12, 64)),
    _completion(3, {"role": "assistant", "content": "Hello! How can I help?"}, "stop", (9, 7, 0)),
]


def child(name: str, out: Path) -> None:  # pragma: no cover - runs in the child process
    import socket

    def refuse(*a: object, **k: object) -> None:
        raise RuntimeError("make_otel_fixtures: no socket may be opened")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.create_connection = refuse  # type: ignore[assignment]

    import httpx2 as httpx  # the openai client's HTTP library (openai >= 3 uses httpx2)
    import openai
    from opentelemetry import trace
    from opentelemetry._logs import set_logger_provider
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class Ids(IdGenerator):  # fixed ids, so a regenerated file compares with the committed one
        def __init__(self) -> None:
            self.trace, self.span = 0, 0

        def generate_trace_id(self) -> int:
            self.trace += 1
            return 0x5EED0000000000000000000000000000 + self.trace

        def generate_span_id(self) -> int:
            self.span += 1
            return 0x5EED000000000000 + self.span

    out.unlink(missing_ok=True)
    legacy = name in LEGACY_SCENARIOS
    resource = Resource.create({"service.name": "weather-agent", "service.version": "0.0.1",
                                "service.instance.id": "fixture-instance"})
    tp = TracerProvider(resource=resource, id_generator=Ids())
    lp = LoggerProvider(resource=resource)
    if legacy:
        from opentelemetry.sdk._logs.export import InMemoryLogExporter
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        span_mem, log_mem = InMemorySpanExporter(), InMemoryLogExporter()
        tp.add_span_processor(SimpleSpanProcessor(span_mem))
        lp.add_log_record_processor(SimpleLogRecordProcessor(log_mem))
    elif name.endswith("_console.json"):
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter
        console = open(out, "w", encoding="utf-8")
        tp.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=console)))
    else:
        from opentelemetry.exporter.otlp.json.file import FileSpanExporter
        from opentelemetry.exporter.otlp.json.file._log_exporter import FileLogExporter
        tp.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(out))))
        lp.add_log_record_processor(SimpleLogRecordProcessor(FileLogExporter(str(out))))
    trace.set_tracer_provider(tp)
    set_logger_provider(lp)

    if name.startswith("openai_v2") and legacy:
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
        from opentelemetry.sdk._events import EventLoggerProvider
        OpenAIInstrumentor().instrument(tracer_provider=tp, event_logger_provider=EventLoggerProvider(lp))
    elif name.startswith("openai_v2"):
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
        OpenAIInstrumentor().instrument(tracer_provider=tp, logger_provider=lp)
    elif name.startswith("openllmetry"):
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as TraceloopInstrumentor
        TraceloopInstrumentor().instrument(tracer_provider=tp)
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor
        OIInstrumentor().instrument(tracer_provider=tp)

    replies = iter(REPLIES)

    def handler(request: "httpx.Request") -> "httpx.Response":
        assert request.url.path.endswith("/chat/completions"), request.url
        return httpx.Response(200, json=next(replies), headers={"content-type": "application/json"})

    client = openai.OpenAI(api_key="sk-fixture", base_url="https://api.openai.test/v1", max_retries=0,
                           http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    tracer = trace.get_tracer("make_otel_fixtures")
    messages: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]

    def agent_loop() -> None:
        first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[TOOL],
                                               temperature=0.2, max_tokens=200)
        call = first.choices[0].message.tool_calls[0]
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function",
             "function": {"name": call.function.name, "arguments": call.function.arguments}}]})
        run_tool(call.id, call.function.name, call.function.arguments)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": RESULT})
        client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[TOOL], temperature=0.2,
                                       max_tokens=200)

    if name == "openai_v2_spans.jsonl":
        from opentelemetry.util.genai.handler import get_telemetry_handler
        genai = get_telemetry_handler(tracer_provider=tp, logger_provider=lp)

        def run_tool(call_id: str, tool: str, arguments: str) -> None:
            with genai.tool(tool, tool_type="function") as inv:
                inv.tool_call_id = call_id
                inv.arguments = json.loads(arguments)
                inv.tool_result = json.loads(RESULT)

        with genai.invoke_local_agent(agent_name="weather-agent", request_model="gpt-4o-mini") as agent:
            agent.conversation_id = "conv-weather-1"  # util-genai 1.1b0 sets it on the agent span
            agent_loop()
    else:
        def run_tool(call_id: str, tool: str, arguments: str) -> None:
            with tracer.start_as_current_span(f"execute_tool {tool}"):
                pass

        with tracer.start_as_current_span("weather-agent run"):
            agent_loop()
    with tracer.start_as_current_span("greeting"):  # a second trace: a second session
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}])
    tp.shutdown()
    lp.shutdown()
    if name.endswith("_console.json"):
        console.close()
    if legacy:
        write_proto_json(out, span_mem.get_finished_spans(), log_mem.get_finished_logs())


def write_proto_json(out: Path, spans: object, logs: object) -> None:  # pragma: no cover - child process
    """One OTLP/JSON line per span and per log record, as a file exporter writes them."""
    import base64

    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    def hex_ids(v: object) -> object:
        if isinstance(v, dict):
            return {k: (base64.b64decode(x).hex() if k in ("traceId", "spanId", "parentSpanId") and isinstance(x, str)
                        else hex_ids(x)) for k, x in v.items()}
        if isinstance(v, list):
            return [hex_ids(x) for x in v]
        return v

    with open(out, "w", encoding="utf-8") as f:
        for s in spans:
            f.write(json.dumps(hex_ids(MessageToDict(encode_spans([s]))), ensure_ascii=False) + "\n")
        for r in logs:
            f.write(json.dumps(hex_ids(MessageToDict(encode_logs([r]))), ensure_ascii=False) + "\n")


def scrub_console_clock(path: Path) -> None:
    """The console exporter's ISO times, replaced with a fixed sequence in their order."""
    text, decoder, i, objs = path.read_text("utf-8"), json.JSONDecoder(), 0, []
    while i < len(text.rstrip()):
        while text[i].isspace():
            i += 1
        obj, i = decoder.raw_decode(text, i)
        objs.append(obj)
    keys = ("start_time", "end_time", "timestamp")

    def values(v: object) -> list[str]:
        if isinstance(v, dict):
            return [x for k, x in v.items() if k in keys and isinstance(x, str)] + \
                [y for k, x in v.items() if k not in keys for y in values(x)]
        return [y for x in v for y in values(x)] if isinstance(v, list) else []

    order = {t: n for n, t in enumerate(sorted(set(values(objs))))}

    def fix(v: object) -> object:
        if isinstance(v, dict):
            return {k: (f"2026-01-01T00:00:{order[x] // 1000:02d}.{order[x] % 1000:03d}000Z"
                        if k in keys and isinstance(x, str) else fix(x)) for k, x in v.items()}
        return [fix(x) for x in v] if isinstance(v, list) else v

    path.write_text("".join(json.dumps(fix(o), indent=4, ensure_ascii=False) + "\n" for o in objs), "utf-8")


def scrub_clock(path: Path) -> None:
    """Replace the recorded clock values with a fixed sequence (the SDK stamps wall time)."""
    if path.suffix == ".json":
        scrub_console_clock(path)
        return
    lines = [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]
    times: dict[str, str] = {}

    def walk(v: object) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ("startTimeUnixNano", "endTimeUnixNano", "timeUnixNano", "observedTimeUnixNano") and x:
                    v[k] = times[str(x)]
                else:
                    walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    # Map in sorted order so the fixed clock keeps the recorded order of events.
    for x in sorted({str(t) for line in lines for t in _clock_values(line)}, key=int):
        times.setdefault(x, str(1767225600_000000000 + len(times) * 1_000_000))
    walk(lines)
    path.write_text("".join(json.dumps(x, ensure_ascii=False, separators=(",", ":")) + "\n" for x in lines), "utf-8")


def _clock_values(v: object) -> list[object]:
    out: list[object] = []
    if isinstance(v, dict):
        for k, x in v.items():
            if k in ("startTimeUnixNano", "endTimeUnixNano", "timeUnixNano", "observedTimeUnixNano") and x:
                out.append(x)
            else:
                out += _clock_values(x)
    elif isinstance(v, list):
        for x in v:
            out += _clock_values(x)
    return out


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version
    found = {}
    for p in PACKAGES:
        try:
            found[p] = version(p)
        except PackageNotFoundError:
            found[p] = "missing"
    return found


def generate(out_dir: Path, legacy_python: str | None = None) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    todo = [(n, e, sys.executable) for n, e in SCENARIOS.items()]
    if legacy_python:
        todo += [(n, e, legacy_python) for n, e in LEGACY_SCENARIOS.items()]
    for name, env, python in todo:
        out = out_dir / name
        child_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRACELOOP_"))}
        child_env.update(env)
        subprocess.run([python, __file__, "--child", name, str(out)], env=child_env, check=True)
        scrub_clock(out)
        written.append(out)
    return written


def main(argv: list[str]) -> int:
    legacy = None
    if "--legacy" in argv:
        i = argv.index("--legacy")
        legacy, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    if argv[:1] == ["--child"]:
        child(argv[1], Path(argv[2]))
        return 0
    if argv[:1] == ["--check"]:
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            differ = [p.name for p in generate(Path(tmp), legacy) if p.read_bytes() != (FIXTURES / p.name).read_bytes()]
        print("differ: " + ", ".join(differ) if differ else "the committed fixtures match a fresh run")
        return 1 if differ else 0
    out_dir = Path(argv[0]) if argv else FIXTURES
    for p in generate(out_dir, legacy):
        print(f"wrote {p} ({p.stat().st_size} bytes)")
    print(json.dumps(versions(), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
