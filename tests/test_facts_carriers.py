"""Issue 30, facts follow-ups found reading ``ctxf facts`` verdicts against real logs:

1. a fact printed in a tool output stored as JSON text (Codex keeps a shell call's output as
   ``{"output": "...\\n...", "metadata": {...}}``) or on a ``grep -n`` line (``path:7:LINE``) is
   found (``matching.text.presence_text`` reads the output decoded, without line-number prefixes);
2. a text that is only a path, a URL, a name or a listing of files carries no sentence fact
   (``matching.clauses.not_a_sentence``);
3. Aider's prompts do not carry the rules of its system prompt they merely share topic words with
   (``matching.clauses`` rules 5 and 6: a restriction, the word share under ``TOPICAL``);
4. ``ctxf facts suggest`` proposes the person's words (``matching.person.human_text``), never a
   harness's clock, todo-list reminders, environment details or compaction prompt.

Unit tests, then the ``integration`` ones on the real MiniLM and on every corpus session concerned.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from context_forensics.analysis.facts import score_presence, suggest_facts
from context_forensics.cli import app
from context_forensics.embed import HashingEmbedder
from context_forensics.matching.clauses import dropped_clause, not_a_sentence, prose_words
from context_forensics.matching.person import human_text
from context_forensics.matching.text import decoded_result, presence_text, unnumbered
from context_forensics.matching.verbatim import verbatim_span
from context_forensics.records import Message
from context_forensics.store.db import Store
from helpers import FIXTURES

CODEX = FIXTURES / "facts" / "json_output.codex.jsonl"
ENV_URL = "NEXT_PUBLIC_LMSTUDIO_URL=http://localhost:1234"
UNCHANGED = "The Chat UI frontend stays unchanged: only the provider wiring moves to LM Studio."


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)

# ============================================================================ 1. JSON and grep output


def test_a_tool_result_stored_as_escaped_json_reads_decoded():
    out = {"output": "# LM Studio setup\n\nStart the local server.\n" + ENV_URL + "\n",
           "metadata": {"exit_code": 0, "duration_seconds": 0.1}}
    stored = json.dumps(out, separators=(",", ":"))
    assert "\\n" + ENV_URL in stored  # as stored, the escape glues "n" to the line: nNEXT_PUBLIC_...
    got = presence_text(Message("tool", stored, tool_call_id="call_1"))
    assert got.splitlines()[:4] == ["# LM Studio setup", "", "Start the local server.", ENV_URL]
    assert "exit_code: 0" in got and "output" not in got  # the harness's key is no word of the output
    assert verbatim_span(ENV_URL, got) is not None


@pytest.mark.parametrize("text", [
    '{"temperature": 35, "unit": "C"}',  # no escape: reads the same either way
    'not json {"a": "b\\nc"}',
    '{"a": "b\\nc"',  # broken JSON
    '"just a string\\n"',
])
def test_other_text_is_left_as_it_is(text):
    assert decoded_result(text) == text


def test_an_assistant_or_user_message_is_never_decoded():
    text = json.dumps({"output": "a\nb"})
    assert presence_text(Message("assistant", text)) == text


def test_grep_n_prefixes_are_left_out():
    grep = ("LM Studio setup.md:7:NEXT_PUBLIC_LMSTUDIO_URL=http://localhost:1234\n"
            "lib/chat.ts:12:  const url = process.env.NEXT_PUBLIC_LMSTUDIO_URL\n"
            "lib/chat.ts-13-  return fetch(url)\n")
    assert unnumbered(grep).splitlines() == [ENV_URL, "  const url = process.env.NEXT_PUBLIC_LMSTUDIO_URL",
                                             "  return fetch(url)"]
    one_file = "35:    >>> _line_type(\"READ SERR 3\")\n63:    _command_re = r\"READ [TS]ERR\"\n"
    assert unnumbered(one_file).splitlines() == ["    >>> _line_type(\"READ SERR 3\")",
                                                 "    _command_re = r\"READ [TS]ERR\""]
    # a numbered list's items (Pi's `grep -n` of a plan, pi/pi-mono): the item's number is no time of day
    plan = "17:- `src/modes/print-mode.ts` (new)\n38:5. **Simplify main.ts**: Move setup logic out\n"
    assert unnumbered(plan).splitlines() == ["- `src/modes/print-mode.ts` (new)",
                                             "5. **Simplify main.ts**: Move setup logic out"]


@pytest.mark.parametrize("text", [
    "10:30 stand-up\n11:00 review\n",  # times of day
    "2024-05-01: deploy\n2024-05-01: rollback\n",  # a column of dates repeats its first field
    "see notes.md:3: for the rule\nand then nothing else\nnor here\n",  # one line of three
    "12-14 people came\n15-20 left\n",  # ranges, no match line
])
def test_text_that_is_no_numbered_listing_is_left_as_it_is(text):
    assert unnumbered(text) == text

@pytest.mark.integration
def test_real_minilm_a_fact_in_a_codex_json_output_is_found(tmp_path, minilm, monkeypatch):
    """Before: the fact printed by `cat` (step 3) was found only at step 4, in the `rg -n` output
    that glued it less, and the sentence of the same file never; after: both from step 3, their
    source the `cat` output."""
    monkeypatch.setattr("context_forensics.embed.embedders.get_embedder", lambda *a, **k: minilm)
    r = run("facts", CODEX, "--db", tmp_path / "s.db", "--fact", ENV_URL, "--fact", UNCHANGED, "--json")
    assert r.exit_code == 0, r.output
    for f in json.loads(r.stdout)["facts"]:
        assert f["first_appeared"] == 3 and f["final_state"] == "present", f["fact"]
        assert f["sources"][0]["role"] == "tool" and f["sources"][0]["verbatim"]


def _json_lines(value):
    """Every line of every string of a decoded JSON value (the test's own walk)."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        for v in value:
            yield from _json_lines(v)
    elif isinstance(value, str):
        yield from value.splitlines()


_GREP = re.compile(r"^(?:[^\s:][^:\n]*[./][^:\n]*:\d+:|\d+:)(?P<line>.*)$")


@pytest.mark.integration
def test_every_line_of_a_corpus_json_or_grep_output_is_found_verbatim(corpus_ingest):
    """Over every session of the corpus: each line of three words or more of a tool output stored as
    JSON with escaped line breaks (Codex, Copilot CLI), and of each ``grep -n`` listing, is found by
    the verbatim lookup in what the message shows. Before, a line after an escaped line break (and
    a grep line's first word) was glued to what came before it."""
    db, _ = corpus_ingest
    checked = {"json": 0, "grep": 0}
    missed = []
    with Store.open(db) as st:
        for row in st.sessions():
            for sm in st.messages(row["id"]):
                m = sm.message
                if m.role != "tool" or not m.text:
                    continue
                shown = None
                lines = []
                body = m.text.strip()
                if body[:1] in "{[" and "\\n" in body:
                    try:
                        lines = [("json", ln) for ln in _json_lines(json.loads(body))]
                    except ValueError:
                        lines = []
                raw = [ln for _, ln in lines] or m.text.splitlines()
                numbered = [g.group("line") for g in map(_GREP.match, raw) if g]
                if len(numbered) * 2 >= len([x for x in raw if x.strip()]) > 0:
                    lines += [("grep", ln) for ln in numbered]
                for what, ln in lines:
                    if len(re.findall(r"[A-Za-z]{2,}", ln)) < 3 or (what == "json" and _GREP.match(ln)):
                        continue
                    shown = presence_text(m) if shown is None else shown
                    checked[what] += 1
                    if verbatim_span(ln.strip(), shown) is None:
                        missed.append((row["id"], sm.seq, ln))
    assert checked["json"] >= 100 and checked["grep"] >= 20, checked
    assert not missed, missed[:5]


# ============================================================================ 2. paths and listings


PATH_FACT = "The Chatbot UI frontend stays unchanged."


@pytest.mark.parametrize(("text", "kind"), [
    ("/home/user/projects/temp/chatbot-ui", "a path"),
    ("LM Studio configuration.md\nREADME.md\napp\ncomponents\nlib\npackage.json", "a listing of names"),
    ("- src/app.ts\n- src/lib/chat.ts", "a listing of names"),
    ("'dark-mode' : 'light-mode';", "code"),
    ("http://localhost:3000/chat", "a URL"),
])
def test_a_path_a_url_or_a_listing_carries_no_sentence(text, kind):
    got = not_a_sentence(PATH_FACT, text)
    assert got is not None and got.reason == f"{kind}, not a sentence: it cannot state '{PATH_FACT}'"


def test_prose_carries_and_a_fact_that_is_no_sentence_is_not_asked_for_prose():
    assert not_a_sentence(PATH_FACT, "Leave the chatbot UI frontend as it is.") is None
    assert not_a_sentence(ENV_URL, ENV_URL) is None  # a setting is matched by its own words
    assert not_a_sentence("Use Python 3.11", "/usr/bin/python3.11") is None  # two words of prose: no sentence
    assert prose_words("目前不知道為何 感覺軟體剛啟動時 記憶體佔用") == [
        "目前不知道為何", "感覺軟體剛啟動時", "記憶體佔用"]
    assert prose_words("Important:\nNever retry more than 3 times.") == ["Never", "retry", "more", "than", "times"]


def test_presence_turns_a_path_into_a_near_miss_that_says_why():
    texts = ["/home/user/projects/temp/chatbot-ui", "Chatbot UI frontend.md\nREADME.md\napp",
             "The Chatbot UI frontend stays unchanged, as agreed."]
    p = score_presence([PATH_FACT], texts, HashingEmbedder(), threshold=0.05)
    assert p.cosine[0, 0] >= 0.05 and p.cosine[0, 1] >= 0.05
    assert not np.isfinite(p.score[0, 0]) and p.dropped[0][0].reason.startswith("a path, not a sentence")
    assert not np.isfinite(p.score[0, 1]) and p.dropped[0][1].reason.startswith("a listing of names")
    assert np.isfinite(p.score[0, 2])


# ============================================================================ 3. Aider's topical matches

# Aider's system prompt (coders/editblock_prompts.py) against its own prompts that MiniLM scores
# at the 0.60 threshold or above (the cosine each scored on the corpus' Simple-Calulator session)
ONLY_BLOCKS = "ONLY EVER RETURN CODE IN A *SEARCH/REPLACE BLOCK*!"
NO_EDIT = "Don't try and edit any existing code without asking me to add the files to the chat!"


@pytest.mark.parametrize(("fact", "text", "cosine"), [
    (ONLY_BLOCKS, "# 1 SEARCH/REPLACE block failed to match!", 0.641),
    ("Do not include long runs of unchanging lines in *SEARCH/REPLACE* blocks.",
     "# 1 SEARCH/REPLACE block failed to match!", 0.666),
    ("All changes to files must use this *SEARCH/REPLACE block* format.",
     "To suggest changes to a file you MUST return a *file listing* that contains the entire content of the file.",
     0.614),
    ("Only create *SEARCH/REPLACE* blocks for files that the user has added to the chat!", NO_EDIT, 0.687),
    ("Please don't consider the above files or try to edit them any longer.",
     "Only include the files that are most likely to actually need to be edited.", 0.630),
    (NO_EDIT, "I have *added these files to the chat* so you can go ahead and edit them.", 0.80),
])
def test_a_text_that_shares_topic_words_does_not_carry_aiders_rule(fact, text, cosine):
    assert dropped_clause(fact, text, cosine) is not None


@pytest.mark.parametrize(("fact", "text", "cosine"), [
    (NO_EDIT, "If you need to edit any of these files, ask me to add them to the chat first.", 0.75),
    (ONLY_BLOCKS, "Only ever return code in a SEARCH/REPLACE block.", 0.66),
    ("Use at most 3 retries when a request fails.", "max_retries = 3  # never retry more than 3 times", 0.62),
])
def test_a_restatement_still_carries_it(fact, text, cosine):
    assert dropped_clause(fact, text, cosine) is None

# prompt, and the messages MiniLM took for them before (seq: the prompt or reply that only shares
# the rule's topic words: its reflection "# 1 SEARCH/REPLACE block failed to match!" (87), the
# whole-file format's "you MUST return a *file listing*" (83, 88), its file-list prompt (9, 115),
# replies naming a "REPLACE block" (89, 93)).
AIDER_SESSION = "aider/Simple-Calulator/.aider.llm.history"
AIDER_TOPICAL = {
    ONLY_BLOCKS: {87, 89},
    "All changes to files must use this *SEARCH/REPLACE block* format.": {83, 88},
    "Every *SEARCH/REPLACE block* must use this format:": {93},
    "Do not include long runs of unchanging lines in *SEARCH/REPLACE* blocks.": {87, 89},
    "Only create *SEARCH/REPLACE* blocks for files that the user has added to the chat!": {9, 115},
    "Please don't consider the above files or try to edit them any longer.": {9, 115},
}


@pytest.mark.integration
def test_real_minilm_aiders_prompts_are_no_source_of_the_rules_they_share_words_with(tmp_path, minilm, monkeypatch):
    from helpers import corpus

    monkeypatch.setattr("context_forensics.embed.embedders.get_embedder", lambda *a, **k: minilm)
    args = ["facts", corpus(AIDER_SESSION), "--db", tmp_path / "s.db", "--json"]
    for fact in AIDER_TOPICAL:
        args += ["--fact", fact]
    r = run(*args)
    assert r.exit_code == 0, r.output
    for f in json.loads(r.stdout)["facts"]:
        seqs = {s["seq"] for s in f["sources"]}
        assert not seqs & AIDER_TOPICAL[f["fact"]], (f["fact"], seqs & AIDER_TOPICAL[f["fact"]])
        assert any(s["verbatim"] for s in f["sources"])  # where the rule itself is written, it still is


# ============================================================================ 4. suggest: the person's words


def _cline_task() -> list[Message]:
    """Cline's opening as Cline 3.x stores it (the corpus' cline/Cline-Xray task_sample): the task,
    then its environment details with the clock and its focus-chain reminder."""
    return [Message("user", "<task>\nAdd a CSV export to the report page. Never change the report's "
                            "column order; export at most 10000 rows.\n</task>\n\n<environment_details>\n"
                            "# Current Time\n2/8/2026, 2:02:53 PM (America/New_York, UTC-5:00)\n\n"
                            "# Current Working Directory (c:/Users/dev/report) Files\nREADME.md\nsrc/\n\n"
                            "# task_progress RECOMMENDED\n\nWhen starting a new task, it is recommended to include "
                            "a todo list using the task_progress parameter.\n</environment_details>")]


def test_suggest_reads_the_task_not_clines_environment_details():
    got = [s.text for s in suggest_facts(_cline_task())]
    assert got == ["Never change the report's column order; export at most 10000 rows."]


def test_suggest_passes_over_harness_messages_to_the_persons_request():
    codex = [Message("user", "<environment_context>\n  <cwd>/home/dev/app</cwd>\n</environment_context>",
                     meta={"injected": True}),
             Message("user", "Wire the app to LM Studio; never touch the Chat UI frontend.")]
    assert [s.text for s in suggest_facts(codex)] == ["Wire the app to LM Studio; never touch the Chat UI frontend."]
    copilot = [Message("user", "<current_datetime>2026-04-24T01:11:16.237+08:00</current_datetime>\n\n"
                               "Do not edit any code, only research doc generators.\n\n<reminder>\nDefault tables "
                               "(todos, todo_deps) will be created.\n</reminder>",
                       meta={"typed_content": "Do not edit any code, only research doc generators."})]
    assert [s.text for s in suggest_facts(copilot)] == ["Do not edit any code, only research doc generators."]
    compaction = [Message("user", "<system-reminder>\nPostToolUse:Write hook additional context: [CREDO]\n"
                                  "</system-reminder>", meta={"is_meta": True}),
                  Message("user", "Your task is to create a detailed summary of the conversation so far. "
                                  "You MUST respond with ONLY the <summary>...</summary> block.")]
    assert suggest_facts(compaction) == []


def test_suggest_keeps_the_issue_a_swe_harness_quotes_not_its_instructions():
    mini = [Message("system", "You are a helpful assistant."),
            Message("user", "<pr_description>\nConsider the following PR description:\nThe parser must accept "
                            "lower-case QDP commands such as 'read serr 1 2'.\n</pr_description>\n\n<instructions>\n"
                            "Your response MUST include EXACTLY ONE bash code block.\n</instructions>")]
    assert [s.text for s in suggest_facts(mini)] == [
        "The parser must accept lower-case QDP commands such as 'read serr 1 2'."]


def test_a_time_stamp_is_no_suggestion():
    aider = [Message("system", "Act as an expert software developer.\nAlways use best practices when coding.\n"
                               "Current date: 2025-05-04")]
    assert [s.text for s in suggest_facts(aider)] == ["Always use best practices when coding."]

@pytest.mark.integration
def test_no_corpus_suggestion_comes_from_what_a_harness_wrote(corpus_ingest):
    """Over every session of the corpus: a suggestion from a user message is words of its person
    (``human_text``) or of the issue a harness's template quotes, never a clock or a todo-list
    reminder. Before, Cline's "2/8/2026, 2:02:53 PM (America/New_York, UTC-5:00)" and "# task_progress
    RECOMMENDED", Aider's "Current date: 2025-05-04" and Claude Code's hook notes were proposed."""
    db, _ = corpus_ingest
    stamp = re.compile(r"\d{1,2}/\d{1,2}/\d{4}, \d{1,2}:\d{2}|Current date:|task_progress|hook additional context")
    user_suggestions = 0
    with Store.open(db) as st:
        for row in st.sessions():
            msgs = st.messages(row["id"])
            by_seq = {sm.seq: sm.message for sm in msgs}
            for s in suggest_facts(msgs):
                assert not stamp.search(s.text), (row["id"], s.text)
                if s.role == "user":
                    user_suggestions += 1
                    m = by_seq[s.seq]
                    quoted = re.search(r"<pr_description>(.*?)</pr_description>|^ISSUE:(.*?)^INSTRUCTIONS:",
                                       m.text or "", re.S | re.M)
                    said = human_text(m) or (next(g for g in quoted.groups() if g) if quoted else "")
                    assert s.text in said, (row["id"], s.seq, s.text)
    assert user_suggestions >= 50


# The corpus' aider/Simple-Calulator session (Aider 0.82, editblock format): rules of its system
