"""gitleaks' rules, converted (``store/gitleaks_rules.py``: RE2 to Python ``re``, keywords, entropy,
allowlists), against gitleaks' own literal examples (``tests/fixtures/gitleaks/examples.json``,
``scripts/gitleaks_examples.py``): each rule finds every true positive and none of the false
positives, as gitleaks' ``utils.Validate`` asks of the Go original (one rule alone, with the
table's global allowlist). 84 converted rules have literal examples (243 true and 221 false
positives); 76 of those false positives are met by the regex and turned down only by the entropy
floor or an allowlist, so the checks are exercised as well as the regexes.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from context_forensics.store.gitleaks_rules import LEFT_OUT, TABLE
from context_forensics.store.redact import Redactor, Rule, gitleaks_table

EXAMPLES = json.loads((Path(__file__).parent / "fixtures" / "gitleaks" / "examples.json").read_text())
RULES = {r.name: r for r in gitleaks_table()}
# In gitleaks' sources with examples, not in its table: commented out of cmd/generate/config/main.go.
NOT_IN_THE_TABLE = {"gcp-service-account", "square-secret"}
_REDACTOR = Redactor()


def _finds(rule: Rule, text: str) -> bool:
    """Whether ``rule`` alone finds a secret in ``text`` (its keywords, then its regex and check)."""
    low = text.lower()
    if rule.keywords and not any(k in low for k in rule.keywords):
        return False
    return _REDACTOR._apply(rule, text, text) != text


def test_the_examples_are_of_the_vendored_table():
    assert EXAMPLES["commit"] in (TABLE.parent / "README.md").read_text()
    ids = set(EXAMPLES["rules"])
    assert ids - set(RULES) == NOT_IN_THE_TABLE | (LEFT_OUT & ids)
    assert len(ids & set(RULES)) == 84


@pytest.mark.parametrize("rule_id", sorted(set(EXAMPLES["rules"]) & set(RULES)))
def test_each_converted_rule_finds_its_true_positives_and_not_its_false_ones(rule_id):
    rule, ex = RULES[rule_id], EXAMPLES["rules"][rule_id]
    missed = [t for t in ex["tps"] if not _finds(rule, t)]
    found = [t for t in ex["fps"] if _finds(rule, t)]
    assert missed == [] and found == []


def test_the_checks_are_what_turns_down_some_false_positives():
    """Without its entropy floor and allowlists a rule would find some of its false positives:
    the examples test the checks, not only the regexes."""
    bare = [t for rid in set(EXAMPLES["rules"]) & set(RULES) for t in EXAMPLES["rules"][rid]["fps"]
            if _finds(dataclasses.replace(RULES[rid], check=None), t)]
    assert len(bare) == 76


# ctxf's assignment rules (``redact._assign``) stand in for gitleaks' ``generic-api-key``: its
# false positives are theirs to leave. One is left out by its value: yarn's public Algolia search
# key (yarnpkg/berry#6201), a 32-hex ``apiKey`` that gitleaks allows by a stopword of that very
# value; ctxf redacts it, as it would any key of that shape beside ``apiKey``.
GENERIC_FPS_REDACTED = {',apiKey:"6fe4476ee5a1832882e326b506d14126",'}


def test_ctxf_own_assignment_rules_leave_the_generic_rule_false_positives():
    r = Redactor()
    found = {t for t in EXAMPLES["rules"]["generic-api-key"]["fps"] if r.text(t) != t}
    assert found == GENERIC_FPS_REDACTED  # before: also csrf-token=, publicToken =, io.jsonwebtoken:
