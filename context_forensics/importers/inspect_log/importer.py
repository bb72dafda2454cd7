"""The ``inspect`` importer: sniffs an Inspect log (``.json`` or ``.eval``) and yields one
session per sample and epoch."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ...records import Session
from ..base import ImportContext, Importer, head_text, register
from .container import ZIP_MAGIC, eval_samples, json_samples
from .sample import sample_session


@register
class InspectLog(Importer):
    """UK AISI Inspect eval logs: one session per sample and epoch."""

    name = "inspect"
    description = "UK AISI Inspect eval logs (.json and .eval), one session per sample and epoch"
    extensions = (".json", ".eval")
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        if head[:4] == ZIP_MAGIC:
            if path.suffix.lower() == ".eval":
                return True
            # the first member's name sits at offset 30 of a zip's local file header
            n = int.from_bytes(head[26:28], "little")
            first = head[30 : 30 + n]
            return first in (b"_journal/start.json", b"header.json", b"start.json")
        text = head_text(head)
        if not text.startswith("{"):
            return False
        return (
            '"eval"' in text
            and '"task_id"' in text
            and ('"run_id"' in text or '"eval_id"' in text)
            and '"created"' in text
        )

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        with open(path, "rb") as f:
            magic = f.read(4)
        samples = eval_samples(path, ctx) if magic == ZIP_MAGIC else json_samples(path, ctx)
        for n, (header, sample) in enumerate(samples):
            session = None
            with ctx.record("sample", index=_label(sample, n)):
                session = sample_session(self.name, header, sample, ctx)
            if session is not None:
                yield session


def _label(sample: dict, n: int) -> str:
    """A sample's place for a warning: its id and epoch, else its position."""
    sid = sample.get("id")
    if isinstance(sid, (str, int)) and not isinstance(sid, bool):
        return f"{sid} epoch {sample.get('epoch', 1)}"
    return f"#{n + 1}"
