"""The polarity rule (``context_forensics.matching.polarity``): flips it must see, and same-polarity
paraphrases, double negations and bounds it must leave alone (a false flip hides a fact)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from context_forensics.matching.polarity import (
    AFFIRMED,
    NEGATED,
    OPTIONAL,
    PERMITTED,
    REQUIRED,
    analyse,
    clause_spans,
    content_stems,
    polarity_conflict,
    stem,
)

RENAME = "Do not rename any public function."

FLIPS = [
    (RENAME, "You may rename any public function."),  # the pair
    ("You may rename any public function.", RENAME),
    (RENAME, "Rename any public function you like."),  # a bare imperative
    (RENAME, "Feel free to rename any public function."),
    (RENAME, "You may rename any public function, but do not rename private helpers."),  # the clause that pairs
    ("Always run the tests.", "Never run the tests."),
    ("You must update the changelog.", "You may update the changelog."),  # modal: must vs may
    ("You must update the changelog.", "You don't have to update the changelog."),  # a negated need: optional
    ("Nobody in the group can eat peanuts.", "Everyone in the group can eat peanuts."),  # a negated subject
    ("Never push directly to the main branch.", "Pushed the hotfix straight to main."),  # an action against a ban
    ("Never push directly to the main branch.", "git push origin main"),
    ("Do not rename, move or delete any public function.", "Move any public function you like."),  # a list
    ("The tests are passing.", "The tests are not passing."),
    ("Run the tests with coverage.", "Run the tests without coverage."),
    ("Never delete user data.", "Deleting user data is allowed after 30 days."),  # predicative permission
    ("The order has been paid.", "I spoke to the customer, but she has not paid yet."),
]

SAME = [
    (RENAME, "Avoid renaming any public function."),  # "avoid" negates
    (RENAME, "Renaming public functions is forbidden."),  # a predicative ban covers its subject
    (RENAME, "Public functions must not be renamed."),
    (RENAME, "You are not allowed to rename public functions."),
    (RENAME, "You may rename private helpers, but do not rename any public function."),
    (RENAME, "Do not rename any public function, but you may rename private helpers."),
    ("Never fail to run the tests.", "Always run the tests."),  # double negation
    ("Always run the tests before committing.", "Never commit without running the tests first."),  # never ... without
    ("You don't need to update the changelog.", "Updating the changelog is optional."),
    ("Do not send any email without the user's explicit confirmation.",
     "Only send emails after the user has explicitly confirmed."),  # a condition, not a ban
    ("Never push directly to the main branch.", "Reminder: direct pushes to the main branch are not allowed."),
    ("Never move public functions.", "Do not rename, move or delete any public function."),
    ("Nobody in the group can eat peanuts.", "No one in the group may eat peanuts."),
    # bounds are not negations
    ("Keep every reply to the user under 300 words.", "Please keep your answers brief, no longer than 300 words each."),
    ("Use at most 3 retries when a request fails.", "Retry a failed request no more than three times."),
    # other verbs: nothing shared to compare, the embedding decides
    ("The payments API allows at most 20 requests per second.", "Do not exceed twenty requests per second."),
    ("Keep the public function apply_discount backwards compatible.",
     "Don't break backwards compatibility of apply_discount."),
    ("Never modify files under tests/.", "Files under tests/ are read-only for you."),
    ("The database must stay on PostgreSQL 15.", "We are pinned to PostgreSQL 15; do not upgrade the database."),
    # a fact inside a compound sentence: the negated clause is about something else
    ("The total budget is capped at 4,500 euros.",
     "We are eight, the total budget is capped at 4,500 euros for the whole group, and nobody can eat peanuts."),
]


@pytest.mark.parametrize("fact,text", FLIPS)
def test_flips_are_seen(fact, text):
    assert polarity_conflict(fact, text) is not None


@pytest.mark.parametrize("fact,text", SAME)
def test_same_polarity_is_left_alone(fact, text):
    assert polarity_conflict(fact, text) is None


def test_the_reason_quotes_both_phrases_and_stances():
    c = polarity_conflict(RENAME, "You may rename any public function.")
    assert c.reason == "polarity differs: 'Do not rename' vs 'You may rename'"
    assert (c.fact_stance, c.text_stance, c.word) == (NEGATED, PERMITTED, "renam")
    assert c.to_dict()["reason"] == c.reason
    c = polarity_conflict("You must update the changelog.", "You don't have to update the changelog.")
    assert (c.fact_stance, c.text_stance) == (REQUIRED, OPTIONAL)
    assert c.text_phrase == "You don't have to update"


def test_stances_of_groups():
    def stance(text, word):
        for clause in analyse(text):
            if stem(word) in clause.stance:
                return clause.stance[stem(word)][0]
        return None

    assert stance("Never fail to run the tests.", "run") == AFFIRMED
    assert stance("You must not rename it.", "rename") == NEGATED
    assert stance("You need not rename it.", "rename") == OPTIONAL
    assert stance("There is no need to rename it.", "rename") == OPTIONAL
    assert stance("Renaming is required.", "renaming") == REQUIRED
    assert stance("You can't rename it.", "rename") == NEGATED
    assert stance("Do not deploy until the tests pass.", "deploy") == AFFIRMED  # a condition
    assert stance("Deploy on Fridays.", "deploy") == AFFIRMED  # implicit


def test_clauses_cut_at_punctuation_and_clause_words_but_not_at_and():
    text = "Do not rename or delete X, and nobody can eat peanuts; but the budget is 4.5k. Done"
    parts = [text[a:b].strip() for a, b in clause_spans(text)]
    assert parts == ["Do not rename or delete X", "and nobody can eat peanuts", "but the budget is 4.5k", "Done"]
    assert content_stems("Renaming the public functions") == {"renam", "public", "function"}


def test_flip_between_two_free_texts_either_way_round_and_only_while_short():
    from context_forensics.matching.polarity import MAX_FLIP_TEXT, polarity_flip

    did, did_not = "I renamed the public functions.", "I did not rename the public functions."
    assert polarity_flip(did, did_not).reason == "polarity differs: 'renamed' vs 'I did not rename'"
    assert polarity_flip(did_not, did) is not None
    assert polarity_flip(did_not, "I kept the public function names unchanged.") is None
    long = did + " " + "More notes follow. " * (MAX_FLIP_TEXT // 19)
    assert len(long) > MAX_FLIP_TEXT and polarity_flip(long, did_not) is None


_WORDS = ("not never no nobody without avoid fail forget to must may can have need optional forbidden "
          "allowed is are be do don't can't rename renaming push main the a , ; : . and or but unless "
          "than more 3 X's").split()


@given(st.lists(st.sampled_from(_WORDS), max_size=25), st.lists(st.sampled_from(_WORDS), max_size=25))
def test_any_word_salad_is_judged_without_error_and_phrases_come_from_the_texts(a, b):
    fact, text = " ".join(a), " ".join(b)
    c = polarity_conflict(fact, text)
    if c is not None:
        assert c.fact_phrase in " ".join(fact.split()) and c.text_phrase in " ".join(text.split())
        assert c.fact_stance != c.text_stance
    for clause in analyse(text):
        assert 0 <= clause.start < clause.end <= len(text)


def test_a_text_never_conflicts_with_itself():
    """Issue 30: a stem the fact says both ways round ("For unrelated changes, ... No unrelated
    changes were implemented.") was compared with the text's flipped clause only, so a verbatim
    copy conflicted with its fact; every clause holding the stem now competes."""
    fact = "For unrelated changes, new beads with label:refinement were created. No unrelated changes were implemented."
    assert polarity_conflict(fact, fact) is None
    assert polarity_conflict("Do not push to main; push to a branch.", "Do not push to main; push to a branch.") is None


@given(st.lists(st.sampled_from(_WORDS), max_size=25))
def test_any_word_salad_agrees_with_itself(a):
    text = " ".join(a)
    assert polarity_conflict(text, text) is None
