"""What looks like a secret: the tests ``store/redact.py``'s name-and-value rules put a value to
before replacing it (``password = VALUE``, ``--password VALUE``, ``scheme://user:VALUE@host``).

A name says a credential may follow; the value decides. Not a credential: code (``self.token``,
``b64encode``, ``Uint8Array``), a word, a placeholder or a reference (``<password>``, ``${PW}``,
``changeme``), a path (``pwd``), and a common password (``admin123``, ``P@ssw0rd``,
``Welcome1!``): the first guesses of every password list, which test fixtures, documented
defaults and tutorials use, and which protect nothing. Measured on code an agent reads and writes
(``tests/test_redact_passwords.py``: Python, JS/TS, Go, Rust, Elixir, Ruby, Java, config, SQL,
shell, prose, as raw text, as Claude Code's Read result and inside its tool calls' JSON).
"""

from __future__ import annotations

import re
from collections import Counter

from .gitleaks_rules import entropy

# Parts of a value that mark it a placeholder, an example or a reference, not a credential.
_PLACEHOLDER_BITS = ("xxxx", "****", "...", "…", "your", "example", "sample", "dummy", "placeholder",
                     "changeme", "change_me", "redacted", "insert", "replace", "fake", "test", "demo",
                     "secret", "password", "passwd", "token", "apikey", "api_key", "api-key", "<", ">",
                     "${", "{{", "%(", "%s", "env[", "environ", "getenv", "process.env")
_WORDS = frozenset(("none", "null", "nil", "true", "false", "undefined", "required", "optional",
                    "string", "str", "bytes", "int", "bool", "object", "any", "unknown", "empty"))
# Code, not a value: a dotted chain of names (self.token, os.environ.get, cfg.key2), words joined
# by _ or - (django_tests_secret_key).
_CODE = re.compile(r"[A-Za-z_$][A-Za-z_$]*[0-9]*(?:\.[A-Za-z_$][A-Za-z_$]*[0-9]*)+|[A-Za-z_]+(?:[-_][A-Za-z_]+)*")
# A name in code, digits in it too (b64encode, sha256_crypt.hash, String::from_utf8, Uint8Array)
_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::)[A-Za-z_$][\w$]*)*", re.ASCII)
_NAME_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_HEX = re.compile(r"[0-9a-f]{16,}|[0-9A-F]{16,}")


def _mostly_one_char(s: str) -> bool:
    return bool(s) and max(Counter(s).values()) > len(s) / 2


def plausible(value: str, min_len: int = 8) -> bool:
    """Whether an assigned value looks like a credential rather than code, a word or a placeholder.

    At least ``min_len`` characters, a letter and a digit (or, without a digit, 16+ mixed-case
    characters of high entropy), no placeholder / reference marker, not a dotted or snake_case
    identifier, not a path, not a common password (``common_password``).
    """
    if len(value) < min_len or len(value) > 4096:
        return False
    low = value.lower()
    if low in _WORDS or value[0] in "$%{<[*#/~.@&\\-" or any(b in low for b in _PLACEHOLDER_BITS):
        return False
    if _CODE.fullmatch(value):  # self.token, os.environ.get, django_tests_secret_key
        return False
    digits = sum(c.isdigit() for c in value)
    letters = sum(c.isalpha() for c in value)
    if not letters:
        return False  # a number: a port, a count
    if not digits:
        upper = sum(c.isupper() for c in value)
        if len(value) < 16 or upper < 2 or upper == letters or entropy(value) < 3.5:
            return False
    return entropy(value) >= 2.5 and not _mostly_one_char(value) and not common_password(value)


def identifier(value: str) -> bool:
    """A name in code rather than a random string: made of words (camelCase, snake_case, dotted,
    ``::``) of 3+ letters on average, with no more runs of digits than words (``b64encode``,
    ``sha256_crypt.hash``, ``Uint8Array``, ``String::from_utf8``; not ``h7Gk2pQ9xZ4w``, not hex)."""
    if not _IDENTIFIER.fullmatch(value) or _HEX.fullmatch(value):
        return False
    words = _NAME_WORD.findall(value)
    return bool(words) and len(re.findall(r"[0-9]+", value)) <= len(words) and \
        sum(map(len, words)) >= 3 * len(words)


def assigned(value: str, match: str) -> bool:
    """``name = value``'s check: ``plausible``, and when the value is not quoted (a code position,
    as in ``password = b64encode(raw)`` or ``password: Uint8Array;``), not an ``identifier``."""
    quoted = len(match) > len(value) and match[-len(value) - 1] in "\"'"
    return plausible(value) and (quoted or not identifier(value))


def not_a_path(value: str, match: str) -> bool:
    """``pwd = value``'s check (``pwd`` is also the working directory): ``assigned``, and no path."""
    return "/" not in value and "\\" not in value and assigned(value, match)


# ---------------------------------------------------------------- common passwords

# The words the most common passwords are made of (the top of every breach list), as written
# and in leetspeak (P@ssw0rd, p4ssw0rd, adm1n): a value that is one of them, then a simple digit
# run and a symbol at most, is a documented default or a fixture, not a secret.
_COMMON = frozenset((
    "pass", "passw", "password", "passwd", "pwd", "pw", "admin", "administrator", "root", "toor", "user",
    "guest", "login", "letmein", "welcome", "qwerty", "qwertyuiop", "asdf", "asdfgh", "zxcvbn", "abc",
    "abcd", "abcdef", "hello", "hunter", "master", "monkey", "dragon", "shadow", "sunshine", "iloveyou",
    "trustno", "football", "baseball", "superman", "princess", "default", "changeit", "changeme", "mypass",
    "mypassword", "postgres", "mysql", "redis", "secret", "test", "tester", "demo", "sample", "example",
    "foobar", "foo", "bar", "baz", "qazwsx", "q1w2e3r4", "1q2w3e4r", "1qaz2wsx", "zaq12wsx", "azerty",
))
_LEET = str.maketrans("013457@$!", "oieastasi")
_SUFFIX = "0123456789!@#$%&*.?_-"
# one or two words (Welcome, ValidPass, admin), a symbol or none, a simple digit run, a symbol or none
_WORDY = re.compile(r"(?P<w>[A-Za-z][a-z]*(?:[A-Z][a-z]+)?)[!@#$%&*._-]?(?P<d>[0-9]+)[!@#$%&*.?]?")


def _simple_digits(d: str) -> bool:
    """One or two digits, a year, a run of one digit, or a sequence (123, 4321, 2345)."""
    if len(d) <= 2 or len(set(d)) == 1 or re.fullmatch(r"(?:19|20)[0-9]{2}", d):
        return True
    steps = {(int(b) - int(a)) % 10 for a, b in zip(d, d[1:])}
    return steps in ({1}, {9})


def common_password(value: str) -> bool:
    """One of the first guesses of any password list: a keyboard walk (``1q2w3e4r``); a common
    word, in leetspeak too, then up to 6 digits or symbols (``P@ssw0rd!``, ``adm1n123``); or one or
    two words (a quarter of their letters vowels, as words have) then a simple digit run
    (``admin123``, ``Welcome1!``, ``ValidPass1!``, ``bob12345``, ``Summer2024!``)."""
    stem = value.rstrip(_SUFFIX)
    if value.lower() in _COMMON or stem.translate(_LEET).lower() in _COMMON and len(value) - len(stem) <= 6:
        return True
    m = _WORDY.fullmatch(value)
    if not m or not _simple_digits(m["d"]):
        return False
    word = m["w"].lower()
    return sum(c in "aeiouy" for c in word) * 4 >= len(word)


def url_password(value: str, match: str) -> bool:
    """A URL's user info is a credential's place: any password but a placeholder, a word, a
    common password, an upper-case placeholder (``USER:PASS@HOST``), or the user name again
    (``postgres:postgres@``, a default). ``match``: ``://user:password@``."""
    user = match[3:].split(":", 1)[0]
    low = value.lower()
    return (len(value) >= 4 and low not in _WORDS and low != user.lower() and value[0] not in "$%{<*"
            and not any(b in low for b in _PLACEHOLDER_BITS) and not _mostly_one_char(value)
            and not common_password(value) and not re.fullmatch(r"[A-Z_]+", value))
