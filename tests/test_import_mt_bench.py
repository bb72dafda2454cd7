"""FastChat MT-Bench question and answer files."""

from __future__ import annotations

from context_forensics import importers
from context_forensics.importers.base import read_head
from helpers import FIXTURES, corpus, parse

HERE = FIXTURES / "mt_bench"


def test_question_file():
    fmt, sessions, _ = parse(HERE / "question.jsonl")
    assert fmt == "mt_bench"
    q1, q2 = sessions
    assert q1.external_id == "question:1" and q1.task == "mt_bench/1"
    assert [(m.role, m.text) for m in q1.messages] == [("user", "What is 3*7?"), ("user", "Now double it.")]
    assert q2.messages[0].text == "Write hello world in C."  # Arena-Hard style {"content": ...} turn


def test_answers_pair_with_the_question_file_above():
    _, sessions, ctx = parse(HERE / "model_answer" / "model-x.jsonl")
    a1, a2, orphan = sessions  # the truncated last line is dropped with a warning
    assert [(m.role, m.text) for m in a1.messages] == [
        ("user", "What is 3*7?"), ("assistant", "21"), ("user", "Now double it."), ("assistant", "42")
    ]
    assert a1.external_id == "ansX1:0" and a1.global_id and a1.model == "model-x" and a1.task == "mt_bench/1"
    assert a1.started_at == "2023-11-14T22:13:20.500000+00:00"
    assert [m.role for m in a2.messages] == ["user", "assistant"]
    assert [m.role for m in orphan.messages] == ["assistant"] and orphan.metadata["user_turns_missing"]
    assert ctx.skipped["truncated line"] == 1
    assert any("no matching question" in w for w in ctx.warnings)
    assert importers.get("mt_bench").sidecars(HERE / "model_answer" / "model-x.jsonl") == [HERE / "question.jsonl"]


def test_answers_without_any_question_file():
    _, sessions, ctx = parse(HERE / "nested" / "deeper" / "answers.jsonl", "mt_bench")
    assert len(sessions) == 2  # one per choice
    assert [m.text for m in sessions[1].messages] == ["twenty-one", "forty-two"]
    assert {m.role for s in sessions for m in s.messages} == {"assistant"}
    assert sessions[0].external_id == "model-y:1:0" and not sessions[0].global_id
    assert any("1 answer(s) have no matching question" in w for w in ctx.warnings)  # 1 record, 2 choices


def test_corpus_questions_and_reference_answers():
    # question file: 80 lines, 2 turns each; reference answers: 30 lines (question_id 101..130),
    # 2 turns each, all paired with the sibling *question*.jsonl -> 4 messages per session.
    _, questions, _ = parse(corpus("mt-bench/fastchat/mt_bench_question.jsonl"))
    assert len(questions) == 80 and all(len(s.messages) == 2 for s in questions)
    _, answers, ctx = parse(corpus("mt-bench/fastchat/mt_bench_reference_answer_gpt-4.jsonl"))
    assert len(answers) == 30
    assert all([m.role for m in s.messages] == ["user", "assistant", "user", "assistant"] for s in answers)
    first = answers[0]
    assert first.task == "mt_bench/101" and first.model == "gpt-4"
    assert first.messages[1].text.startswith("If you have just overtaken the second person")
    assert not ctx.warnings


def test_sniff_claims_only_mt_bench_files():
    root = corpus("mt-bench").parent
    imp = importers.get("mt_bench")
    for p in sorted(root.rglob("*")):
        if p.is_file():
            assert imp.sniff(p, read_head(p)) == p.is_relative_to(root / "mt-bench"), p
