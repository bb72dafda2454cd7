"""Write tests/fixtures/gitleaks/examples.json: gitleaks' own literal examples of each rule.

    python scripts/gitleaks_examples.py GITLEAKS_GIT_DIR [COMMIT]

gitleaks generates its rule table (``config/gitleaks.toml``, vendored in
``context_forensics/store/gitleaks/``) from ``cmd/generate/config/rules/*.go``, where each rule's
function checks its regex against true positives (``tps``) and false positives (``fps``). Many
``tps`` are generated at build time (``utils.GenerateSampleSecret(s)``, ``secrets.NewSecret``);
this keeps only the string literals (a Go string, or literals joined by ``+``) of ``tps`` /
``fps`` slices, by rule id, read from the git directory at COMMIT (default: the vendored table's,
named in its README). ``tests/test_gitleaks_examples.py`` runs each converted rule on them.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "gitleaks" / "examples.json"
RULES_DIR = "cmd/generate/config/rules"
_VENDORED = re.compile(r"commit ([0-9a-f]{40})")

_FUNC = re.compile(r"^func \w+\(", re.M)
_RULE_ID = re.compile(r'RuleID:\s*"([^"]+)"')
_SLICE = re.compile(r"\b(tps|fps)\s*:?=\s*(?:\[\]string\{|append\(\s*\1\s*,)")


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "-C", git_dir, *args], capture_output=True, text=True, check=True).stdout


def _go_string(tok: str) -> str:
    if tok.startswith("`"):
        return tok[1:-1].replace("\r", "")  # a raw string: as written, carriage returns dropped
    return ast.literal_eval(tok)  # an interpreted string: Go's escapes are Python's


# a Go token inside a slice: a string, a comment, a bracket, a comma, anything else
_TOKEN = re.compile(r'`[^`]*`|"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/|[\[\](){},+]|\s+|[^\s`"\[\](){},+/]+|/',
                    re.S)


def _elements(src: str, at: int, close: str) -> list[str | None]:
    """The elements of the slice whose opening bracket ends just before ``at``: each a string
    (literals joined by ``+``) or None (an expression: generated)."""
    out: list[str | None] = []
    depth, parts, literal = 0, [], True
    for m in _TOKEN.finditer(src, at):
        tok = m.group()
        if tok.isspace() or tok.startswith("//") or tok.startswith("/*"):
            continue
        if depth == 0 and tok in (",", close):
            if parts or not literal:
                out.append("".join(parts) if literal and parts else None)
            parts, literal = [], True
            if tok == close:
                return out
            continue
        if tok in "([{":
            depth += 1
        elif tok in ")]}":
            depth -= 1
        if depth == 0 and tok[0] in "`\"":
            parts.append(_go_string(tok))
        elif tok != "+" or depth:
            literal = False
    raise ValueError("unterminated slice")


def extract(sources: dict[str, str]) -> dict[str, dict[str, list[str]]]:
    """``{rule id: {"tps": [...], "fps": [...]}}`` of the functions of ``sources`` (file name -> Go)."""
    rules: dict[str, dict[str, list[str]]] = {}
    for text in sources.values():
        starts = [m.start() for m in _FUNC.finditer(text)] + [len(text)]
        for a, b in zip(starts, starts[1:]):
            body = text[a:b]
            rid = _RULE_ID.search(body)
            if not rid:
                continue
            got: dict[str, list[str]] = {"tps": [], "fps": []}
            for m in _SLICE.finditer(body):
                close = "}" if m.group().endswith("{") else ")"
                got[m.group(1)] += [e for e in _elements(body, m.end(), close) if e is not None]
            if got["tps"] or got["fps"]:
                rules[rid.group(1)] = got
    return dict(sorted(rules.items()))


def main(argv: list[str]) -> int:
    git_dir = argv[0]
    readme = (ROOT / "context_forensics" / "store" / "gitleaks" / "README.md").read_text()
    commit = argv[1] if len(argv) > 1 else _VENDORED.search(readme).group(1)
    names = [n for n in _git(git_dir, "ls-tree", "--name-only", commit, RULES_DIR + "/").split()
             if n.endswith(".go") and not n.endswith("_test.go")]
    rules = extract({n: _git(git_dir, "show", f"{commit}:{n}") for n in names})
    doc = {"source": f"https://github.com/gitleaks/gitleaks/tree/{commit}/{RULES_DIR}", "commit": commit,
           "license": "Copyright (c) 2019 Zachary Rice. MIT License: context_forensics/store/gitleaks/LICENSE",
           "note": "the string literals of each rule's tps and fps slices; generated examples left out",
           "rules": rules}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    n_tp = sum(len(r["tps"]) for r in rules.values())
    n_fp = sum(len(r["fps"]) for r in rules.values())
    print(f"{OUT.relative_to(ROOT)}: {len(rules)} rules, {n_tp} true and {n_fp} false positives")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
