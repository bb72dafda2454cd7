"""The shape the provider logs share: a JSON document, or a JSONL file, of records.

A provider log (OpenAI Chat Completions, Responses, Anthropic Messages, a generic message log)
is one record (a request, a response, a request with its response), a JSON list of records,
or JSONL with one record per line; or it is one conversation written whole (a list of
messages or items, or JSONL with one per line). ``DocumentImporter.parse`` reads every one of
these layouts the same way, and a format says only how one record becomes a session
(``record_session``) and, where the format has one, how a whole file is a single conversation
(``list_session``, ``stream_session``). Each record yields a session, or a warning with its
place (its line) and a skip count, and the rest of the file is kept: a record whose shape
breaks the conversion too (``RECORD_ERRORS``: skipped with its line or index); a lone object
that is not a record is an error that names the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Iterable, Iterator

from ..errors import InputError
from ..records import Message, Session
from ._sniffing import looks_like_jsonl
from ._text import clip
from .base import RECORD_ERRORS, ImportContext, Importer, first_jsonl_value, iter_jsonl, load_json, read_head


class DocumentImporter(Importer):
    """An importer of JSON documents / JSONL files whose records each become a session."""

    # The error for a lone JSON object that is not a record, and for a document that is
    # neither an object nor a list.
    not_a_record: ClassVar[str]
    not_a_document: ClassVar[str]

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        if looks_like_jsonl(path, read_head(path)):
            first = first_jsonl_value(path)
            if first is None:
                return
            whole = self.stream_session(path, first[1], ctx)
            if whole is not None:
                yield whole
                return
            for line, rec in iter_jsonl(path, ctx):
                s = self._record(rec, ctx, ext=None, line=line)
                if s is not None:
                    yield s
            return
        data = load_json(path, ctx)
        if isinstance(data, list):
            whole = self.list_session(path, data, ctx)
            if whole is not None:
                yield whole
                return
            for i, rec in enumerate(data):
                s = self._record(rec, ctx, ext=str(i), line=None, index=i)
                if s is not None:
                    yield s
            return
        if isinstance(data, dict):
            try:
                s = self.record_session(data, ctx, ext=path.stem, line=None)
            except RECORD_ERRORS as e:  # the file's one record: nothing read, the ingest says so
                ctx.bad_record(e)
                return
            if s is None:
                raise InputError(self.not_a_record, where=str(path), hint="force another format with --format")
            yield s
            return
        raise InputError(self.not_a_document, where=str(path))

    def _record(self, rec: Any, ctx: ImportContext, *, ext: str | None, line: int | None,
                index: int | None = None) -> Session | None:
        if not isinstance(rec, dict):
            ctx.warn("record is not an object; skipped", line=line)
            ctx.skip("malformed record")
            return None
        try:
            return self.record_session(rec, ctx, ext=ext, line=line)
        except RECORD_ERRORS as e:
            ctx.bad_record(e, line=line, index=index)
            return None

    # -- what a format says

    def stream_session(self, path: Path, first: Any, ctx: ImportContext) -> Session | None:
        """The whole JSONL file as one (streamed) session, when its ``first`` value says the
        file is one conversation written a message or item per line; else None."""
        return None

    def list_session(self, path: Path, items: list[Any], ctx: ImportContext) -> Session | None:
        """The whole JSON list as one session, when it is one conversation; else None (the
        list is read as records)."""
        return None

    def record_session(
        self, rec: dict[str, Any], ctx: ImportContext, *, ext: str | None, line: int | None
    ) -> Session | None:
        """One record as a session, or None (warned about and counted, with ``line``).

        ``ext`` is the session's external id when the place gives one (the file stem for a
        lone object, the index in a list); None for a JSONL line, whose record names itself.
        """
        raise NotImplementedError

    def session(
        self, external_id: str, messages: list[Message], metadata: dict[str, Any], *, model: Any = None
    ) -> Session:
        """A session of ``messages``, titled by its first user text; the model (when the
        record names none) and the start time are the first ones the messages carry."""
        return Session(
            external_id=str(external_id),
            format=self.name,
            messages=messages,
            title=first_user_title(messages),
            model=model if model is not None else first_model(messages),
            started_at=next((m.timestamp for m in messages if m.timestamp), None),
            metadata=metadata,
        )


def first_user_title(messages: Iterable[Message]) -> str | None:
    """The first user text, cut to 80 characters: the title of a conversation that names none."""
    first = next((m.text for m in messages if m.role == "user" and m.text), "")
    return clip(first, 80) or None


def first_model(messages: Iterable[Message]) -> str | None:
    """The first model a message names, or None."""
    return next((m.model for m in messages if m.model), None)


__all__ = ["DocumentImporter", "first_model", "first_user_title"]
