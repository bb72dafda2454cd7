"""OpenTelemetry GenAI telemetry as OTLP/JSON: one session per ``gen_ai.conversation.id`` (taken
from the span or its nearest ancestor, e.g. an ``invoke_agent`` span), else per trace.

Each model-call span (``chat`` / ``text_completion`` / ``generate_content``; an OpenLLMetry or
OpenInference LLM span) is one recorded call: its recorded request (``gen_ai.system_instructions``
+ ``gen_ai.input.messages``, the ≤1.36 message events tied to it, or the indexed prompt
attributes) is exactly what the model read, kept like a cassette's recorded requests
(``meta["request"]`` on the answer, with ``input_differs`` / ``input_hashes`` where a request does
not extend the history), and ``gen_ai.usage.*`` is that call's recorded usage (``input_tokens``
counts cached tokens too, as the conventions say). ``execute_tool`` spans add their facts to the
tool result they produced, or the result itself when no later request re-sent it.

The package: ``otlp`` (files to spans and log records), ``messages`` (the message forms),
``calls`` (spans as calls, calls chained into a session) and ``importer`` (the registered ``otel``).
"""

from __future__ import annotations

from .importer import OpenTelemetryGenAI
from .otlp import read_telemetry

__all__ = ["OpenTelemetryGenAI", "read_telemetry"]
