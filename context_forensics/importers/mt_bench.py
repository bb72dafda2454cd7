"""FastChat llm_judge data: MT-Bench / Vicuna-bench question and answer files (JSONL).

- A question file (``question.jsonl``: ``{question_id, category, turns: [...]}``) becomes one
  session per question holding the user turns only.
- An answer file (``model_answer/<model>.jsonl`` or ``reference_answer/gpt-4.jsonl``:
  ``{question_id, answer_id, model_id, choices: [{index, turns: [...]}], tstamp}``) becomes
  one session per answer choice. The user turns are not in it: they are paired from a
  question file beside it (``question.jsonl`` in the same folder or the one above, as FastChat
  lays them out, or a ``*question*.jsonl`` in the same folder). Without one, only the
  assistant turns are imported, with a warning.

Turns may be strings (MT-Bench) or ``{"content": ...}`` objects (Arena-Hard). Sessions of the
same question share ``task = "mt_bench/<question_id>"`` so answers pair up. No token usage.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from ..errors import InputError
from ..records import Message, Session
from ._text import clip
from .base import RECORD_ERRORS, ImportContext, Importer, epoch_iso, first_jsonl_record, iter_jsonl, register


def _turns(value: Any) -> list[str] | None:
    if not isinstance(value, list):
        return None
    out = []
    for t in value:
        if isinstance(t, str):
            out.append(t)
        elif isinstance(t, dict) and isinstance(t.get("content"), str):
            out.append(t["content"])
        else:
            out.append(json.dumps(t, ensure_ascii=False))
    return out


def _is_answer(rec: dict[str, Any]) -> bool:
    return isinstance(rec.get("choices"), list)


def _question_files(path: Path) -> list[Path]:
    here = path.parent
    found = [here / "question.jsonl", here.parent / "question.jsonl"]
    found += sorted(p for p in here.glob("*question*.jsonl"))
    seen: list[Path] = []
    for p in found:
        if p != path and p.is_file() and p not in seen:
            seen.append(p)
    return seen


@register
class MTBench(Importer):
    name = "mt_bench"
    description = "FastChat MT-Bench question / model-answer files (question_id, turns)"
    extensions = (".jsonl",)
    priority = 30

    def sniff(self, path: Path, head: bytes) -> bool:
        rec = first_jsonl_record(head)
        if rec is None or "question_id" not in rec:
            return False
        if isinstance(rec.get("turns"), list):
            return True
        choices = rec.get("choices")
        return (
            isinstance(choices, list)
            and bool(choices)
            and isinstance(choices[0], dict)
            and isinstance(choices[0].get("turns"), list)
        )

    def sidecars(self, path: Path) -> list[Path]:
        rec = None
        try:
            with open(path, "rb") as f:
                rec = first_jsonl_record(f.read(65536))
        except OSError:
            return []
        if rec is None or not _is_answer(rec):
            return []
        return _question_files(path)[:1]

    def _questions(self, path: Path, ctx: ImportContext) -> tuple[dict[Any, dict[str, Any]], Path | None]:
        for qpath in _question_files(path):
            sub = ImportContext(path=qpath)
            try:
                questions = {
                    rec["question_id"]: rec
                    for _, rec in iter_jsonl(qpath, sub)
                    if isinstance(rec, dict)
                    and isinstance(rec.get("question_id"), (str, int))
                    and isinstance(rec.get("turns"), list)
                }
            except InputError as e:
                ctx.warn(f"question file {qpath} is unreadable ({e.message}); not used")
                continue
            if questions:
                return questions, qpath
        return {}, None

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        questions: dict[Any, dict[str, Any]] | None = None
        qpath: Path | None = None
        unpaired = 0
        for line, rec in iter_jsonl(path, ctx):
            try:
                if not isinstance(rec, dict) or "question_id" not in rec:
                    ctx.warn("record has no question_id; skipped", line=line)
                    ctx.skip("malformed record")
                    continue
                qid = rec["question_id"]
                if not _is_answer(rec):
                    turns = _turns(rec.get("turns"))
                    if turns is None:
                        ctx.warn("question has no turns list; skipped", line=line)
                        ctx.skip("malformed record")
                        continue
                    yield Session(
                        external_id=f"question:{qid}",
                        format=self.name,
                        messages=[Message(role="user", text=t) for t in turns],
                        title=clip(turns[0], 80) if turns else None,
                        task=f"mt_bench/{qid}",
                        metadata={"kind": "question", "category": rec.get("category"), "question_id": qid},
                    )
                    continue
                if questions is None:
                    questions, qpath = self._questions(path, ctx)
                question = questions.get(qid) if isinstance(qid, (str, int)) else None
                user_turns = _turns(question.get("turns")) if question else None
                if user_turns is None:
                    unpaired += 1
                for c, choice in enumerate(rec["choices"]):
                    turns = _turns(choice.get("turns") if isinstance(choice, dict) else None)
                    if turns is None:
                        ctx.warn("answer choice has no turns list; skipped", line=line)
                        ctx.skip("malformed choice")
                        continue
                    messages: list[Message] = []
                    ts = epoch_iso(rec.get("tstamp"))
                    model = rec["model_id"] if isinstance(rec.get("model_id"), str) else None
                    for i, t in enumerate(turns):
                        if user_turns is not None and i < len(user_turns):
                            messages.append(Message(role="user", text=user_turns[i]))
                        messages.append(Message(role="assistant", text=t, model=model, timestamp=ts))
                    index = choice.get("index", c) if isinstance(choice, dict) else c
                    answer_id = rec["answer_id"] if isinstance(rec.get("answer_id"), str) else None
                    metadata = {
                        "kind": "answer",
                        "question_id": qid,
                        "answer_id": answer_id,
                        "choice": index,
                        "category": question.get("category") if question else None,
                        "question_file": str(qpath) if user_turns is not None and qpath else None,
                        "user_turns_missing": True if user_turns is None else None,
                    }
                    yield Session(
                        external_id=(
                            f"{answer_id}:{index}" if answer_id else f"{rec.get('model_id')}:{qid}:{index}"
                        ),
                        format=self.name,
                        messages=messages,
                        title=(clip(user_turns[0], 80) if user_turns else f"question {qid}"),
                        model=model,
                        started_at=ts,
                        task=f"mt_bench/{qid}",
                        global_id=bool(answer_id),
                        metadata={k: v for k, v in metadata.items() if v is not None},
                    )
            except RECORD_ERRORS as e:  # a record of unexpected shape: skipped, the rest kept
                ctx.bad_record(e, line=line)
        if unpaired:
            ctx.warn(
                f"{unpaired} answer(s) have no matching question (no question.jsonl beside the file "
                "or in the folder above, or it lacks those question_ids): imported the assistant "
                "turns only; put the question file next to it to get the user turns"
            )
