"""A ctxf importer for a tiny transcript: a first line ``#tiny-transcript``, then one ``role: text``
line per message (``user``, ``assistant`` or ``system``)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from context_forensics import ImportContext, Importer, Message, Session, Usage, register

ROLES = ("system", "user", "assistant")


@register
class TinyTranscript(Importer):
    name = "tiny_transcript"
    description = "tiny 'role: text' transcripts (the ctxf plugin example)"
    extensions = (".tiny",)
    priority = 25  # an agent's own log: before the shared schemas and the fallbacks

    def sniff(self, path: Path, head: bytes) -> bool:
        return head.startswith(b"#tiny-transcript\n")

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        messages = []
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines()[1:], start=2):
            role, sep, text = line.partition(": ")
            if not sep or role not in ROLES:
                ctx.warn("not a 'role: text' line; skipped", line=lineno)
                ctx.skip("unknown line", unknown=True)  # a kind this importer does not know
                continue
            # a recorded usage: "assistant: text [tokens 120/8]" (prompt / completion)
            usage = None
            if role == "assistant" and text.endswith("]") and " [tokens " in text:
                text, _, figures = text.rpartition(" [tokens ")
                prompt, completion = figures.rstrip("]").split("/")
                usage = Usage(prompt_tokens=int(prompt), completion_tokens=int(completion))
            messages.append(Message(role=role, text=text, usage=usage))
        yield Session(external_id=path.stem, format=self.name, messages=messages)
