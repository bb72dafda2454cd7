"""VCR.py / pytest-recording cassettes of LLM API calls (also Ruby VCR and JSON cassettes).

Each recorded interaction is one model call: its request body is the exact context the model
read, and its response carries the recorded usage. Supported endpoints: OpenAI
``/chat/completions``, ``/responses`` and legacy ``/completions``; Anthropic ``/v1/messages``
(also via Bedrock ``invoke`` / Vertex ``rawPredict`` with an Anthropic body); Gemini / Vertex
``generateContent`` and ``streamGenerateContent``; Bedrock ``converse`` / ``converse-stream``
(and Nova ``invoke``); Ollama ``/api/chat``. Other interactions (auth, model listing, token
counting, embeddings) are skipped and counted, as are model APIs with other native bodies.

Bodies may be plain strings, ``!!binary`` base64 (often gzip: the magic bytes decide), or
``{"string": ...}``; streamed responses (SSE ``data:`` lines, Gemini JSON arrays, Ollama
NDJSON, AWS binary event streams) are reassembled into one response, text, tool calls and
usage included. A call whose answer was not recorded (an empty stream body) is kept without
usage and takes its answer from the next request that re-sends it.

Session layout: a call whose request repeats an earlier call's request plus that call's answer
(a tool-use chain, a multi-turn chat) continues that call's session; any other call starts a
new one. The call's answer (the first message it produced that is not a reasoning item)
carries its usage, ``meta["call_index"]`` (the interaction's position in the cassette) and
``meta["request"]`` (endpoint, model, tools, max_tokens, ...), and every message before the
call's output in the session is exactly that call's request context. Where a later request re-sends an earlier answer,
the session keeps the re-sent form (what the model read from then on) and notes a differing recorded answer in
``meta["recorded_response"]``.

The package, by step: ``container`` (the YAML/JSON file, headers, body bytes and their
encodings), ``payloads`` (a body as a JSON document or stream payloads), ``streams``
(stream payloads reassembled into one response), ``gemini`` and ``bedrock`` (those APIs'
shapes; the OpenAI and Anthropic ones are the ``openai_chat``, ``openai_responses`` and
``anthropic_messages`` importers' converters), ``calls`` (interactions as model calls),
``chain`` (calls chained into sessions) and ``importer`` (the registered ``vcr_cassette``).
"""

from __future__ import annotations

from .calls import Call, read_calls
from .chain import Chain, chain_calls
from .container import load_cassette
from .importer import VCRCassette
from .payloads import parse_sse

__all__ = ["Call", "Chain", "VCRCassette", "chain_calls", "load_cassette", "parse_sse", "read_calls"]
