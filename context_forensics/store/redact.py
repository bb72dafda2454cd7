"""Secrets out of the store: high-confidence credentials in what an importer produces are
replaced by a typed placeholder (``[redacted:openai-key]``) before anything is written.

One rule table (``RULES``), built on the published shapes gitleaks and the providers document:
provider keys by their prefixes (OpenAI, Anthropic, Google, Groq, Hugging Face, xAI,
OpenRouter), GitHub / GitLab / Slack / Stripe tokens, AWS access key ids and secret keys, JWTs,
PEM private-key blocks, ``Authorization:`` header values, and ``password=`` / ``token:`` /
``api_key=`` style assignments whose value looks like a secret (not ``None``, not
``<your password>``, not ``$VAR`` or ``self.token``). Precision first: a rule matches a shape
that is a credential, or a credential's name next to a value that is neither code nor a
placeholder. The config adds patterns (``storage.redact_patterns``).

``Redactor`` walks everything that gets stored: message text, tool-call arguments, parts, meta,
a session's title and metadata, ingest warnings. It counts what it replaced, by type (never
the secret itself). Token counts must not move (the replay counts the text the log held): for
a message it changes, ``measure`` — given by a layer that may tokenize (``tokens/originals``,
through the API) — records the original's token sums in ``meta["redaction"]``, and the
counter reads them there. Hashes the importer took of the original content (an Inspect call's
``input_hashes``, a request's ``tools_hash``) are mapped to the redacted content's.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..hashing import content_hash, json_text, short_id
from ..records import Message, Session, ToolCall
from .gitleaks_rules import entropy, found
from .secret_values import _mostly_one_char, assigned, not_a_path, plausible, url_password

PLACEHOLDER = "[redacted:{}]"
META_KEY = "redaction"  # meta["redaction"] = {"secrets": {type: n}, "tokens": {scheme: n}}


# ---------------------------------------------------------------- a provider key's checks
# (a value assigned to a credential's name: ``secret_values``)


def _random_tail(prefix_len: int, min_entropy: float = 3.0) -> Callable[[str], bool]:
    """A provider key's part after its prefix is random: not ``xxxx…``, not ``0000…``. (A
    partial, not a closure: a redactor crosses process and Ray boundaries with an audit task.)"""
    return functools.partial(_tail_is_random, prefix_len, min_entropy)


def _tail_is_random(prefix_len: int, min_entropy: float, value: str) -> bool:
    tail = value[prefix_len:]
    return not _mostly_one_char(tail) and entropy(tail) >= min_entropy and "xxxx" not in tail.lower()


def _aws_id(value: str) -> bool:
    return not value.endswith("EXAMPLE") and entropy(value[4:]) >= 3.0


def _aws_secret(value: str) -> bool:
    return "EXAMPLE" not in value and entropy(value) >= 3.5


def _mixed_case(value: str) -> bool:  # hf_ + 34 letters: random case, unlike an identifier
    tail = value[3:]
    return sum(c.isupper() for c in tail) >= 6 and sum(c.islower() for c in tail) >= 6


def _aws_prose(value: str) -> bool:  # a secret key is random base64: both cases and a digit
    return (_aws_secret(value) and any(c.isupper() for c in value) and any(c.islower() for c in value)
            and any(c.isdigit() for c in value))


def _after_colon(value: str) -> bool:  # a Telegram bot token's part after the bot id is random
    return _tail_is_random(value.index(":") + 1, 3.5, value)


def _pem_body(value: str) -> bool:  # a header alone (code that looks for one) is no key
    body = value.split("-----", 2)[-1]
    return sum(c.isalnum() or c in "+/" for c in body.replace("\\n", "")) >= 64


# ---------------------------------------------------------------- the rule table


@dataclass(frozen=True)
class Rule:
    """One kind of secret: ``name`` is the placeholder's type, ``group`` the part replaced
    (0: the whole match), ``keywords`` literals one of which the text must hold for the regex
    to run (lower-cased text when ``icase``), ``check`` a test of the replaced value."""

    name: str
    regex: re.Pattern[str]
    keywords: tuple[str, ...]
    group: int | str = 0
    icase: bool = False
    check: Callable[..., bool] | None = None
    check_match: bool = False  # check(value, the whole match) instead of check(value)
    # gitleaks' rules (``gitleaks_rules``): keywords looked for in the lower-cased text, the regex run
    # on the text as it is; ``group`` -1: the first group that matched (else the whole match);
    # check(value, the whole match, its line)
    lower_keys: bool = False
    check_line: bool = False


_E = r"(?![A-Za-z0-9])"
_Q = r"(?:\\{0,3}[\"'])?"  # an optional quote, escaped when the text is JSON inside JSON (once or twice)
_SEP = rf"{_Q}[ \t]*(?::=|=>|=|:)[ \t]*{_Q}"
# A value: quoted, up to its closing quote (no space, no escape); else up to a quote, a separator,
# a bracket or an escape.
_VALUE = (r"(?:(?<=\")[^\"\\\s]{1,512}(?=\\{0,3}\")|(?<=')[^'\\\s]{1,512}(?=\\{0,3}')"
          r"|[^\s\"'`\\,;&|<>(){}\[\]]{1,512})")
_PEM_BODY = r"(?:[A-Za-z0-9+/=:,. \t\r\n-]|\\+[nrt])"  # base64 and headers, raw or JSON-escaped newlines


def _key(prefix: str) -> str:
    """``prefix`` not inside a longer word. The check comes after the literal so that the regex
    starts with it: the engine then skips to each occurrence instead of trying every position."""
    return f"{prefix}(?<![A-Za-z0-9]{prefix})"


def _ends(word: str, *before: str) -> str:
    """``word`` ending a name that ends with one of ``before`` + ``word`` (``api_key``, ``apikey``):
    starts with the literal ``word``, the rest looked behind (one fixed width each)."""
    return word + "(?:" + "|".join(f"(?<={b}{sep}{word})" for b in before for sep in ("", "_", "-")) + ")"


def _r(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _assign(name: str, key: str, keywords: tuple[str, ...], check: Callable[[str, str], bool] = assigned) -> Rule:
    """``KEY = value`` / ``"key": "value"`` / ``key: value`` for a name ending in ``key`` (matched on
    the lower-cased text), the value replaced when it looks like a secret (``secret_values``)."""
    return Rule(name, _r(rf"{key}{_E}(?!_){_SEP}({_VALUE})"), keywords, group=1, icase=True, check=check,
                check_match=True)


RULES: tuple[Rule, ...] = (
    # Blocks and structured tokens first: what they hold is then no longer seen by the rules after.
    Rule("private-key", _r(
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
        rf"(?:{_PEM_BODY}{{0,16384}}?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|{_PEM_BODY}{{0,16384}})"),
        ("PRIVATE KEY",), check=_pem_body),
    Rule("jwt",
         _r(rf"{_key('eyJ')}[A-Za-z0-9_-]{{15,}}\.eyJ[A-Za-z0-9_-]{{15,}}\.[A-Za-z0-9_-]{{16,}}(?![A-Za-z0-9_-])"),
         ("eyJ",)),
    Rule("anthropic-key", _r(rf"{_key('sk-ant-')}[a-z]{{2,8}}[0-9]{{2}}-[A-Za-z0-9_-]{{20,}}"), ("sk-ant-",),
         check=_random_tail(14)),
    Rule("openrouter-key", _r(rf"{_key('sk-or-v1-')}[a-f0-9]{{64}}{_E}"), ("sk-or-",)),
    Rule("openai-key", _r(
        rf"{_key('sk-')}(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{{20,}}|[A-Za-z0-9_-]{{8,}}T3BlbkFJ[A-Za-z0-9_-]{{8,}}"
        rf"|[A-Za-z0-9]{{48}}(?![A-Za-z0-9_-]))"), ("sk-",), check=_random_tail(3)),
    Rule("api-key", _r(rf"{_key('sk-')}[a-f0-9]{{32}}(?![A-Za-z0-9_-])"), ("sk-",)),  # DeepSeek-style
    Rule("google-api-key", _r(rf"{_key('AIza')}[0-9A-Za-z_-]{{35}}(?![0-9A-Za-z_-])"), ("AIza",),
         check=_random_tail(4)),
    Rule("groq-key", _r(rf"{_key('gsk_')}[A-Za-z0-9]{{48,64}}{_E}"), ("gsk_",), check=_random_tail(4)),
    Rule("huggingface-token", _r(rf"{_key('hf_')}[A-Za-z]{{34}}(?![A-Za-z0-9_])"), ("hf_",), check=_mixed_case),
    Rule("xai-key", _r(rf"{_key('xai-')}[A-Za-z0-9]{{70,100}}{_E}"), ("xai-",), check=_random_tail(4)),
    Rule("github-token", _r(rf"{_key('gh[pousr]_')}[A-Za-z0-9]{{36,251}}{_E}"), ("gh",), check=_random_tail(4)),
    Rule("github-token", _r(rf"{_key('github_pat_')}[A-Za-z0-9_]{{40,255}}{_E}"), ("github_pat_",),
         check=_random_tail(11)),
    Rule("gitlab-token", _r(rf"{_key('glpat-')}[A-Za-z0-9_-]{{20,}}"), ("glpat-",), check=_random_tail(6)),
    Rule("slack-webhook", _r(r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9+/_-]{20,})"),
         ("hooks.slack.com",), group=1),
    Rule("slack-token", _r(rf"{_key('xox[abposre]-')}(?:[0-9]{{1,13}}-){{1,3}}[A-Za-z0-9-]{{8,}}"), ("xox",),
         check=_random_tail(5)),
    Rule("slack-token", _r(rf"{_key('xapp-')}[0-9]-[A-Z0-9]+-[0-9]+-[a-z0-9]+"), ("xapp-",), check=_random_tail(5)),
    Rule("stripe-key", _r(rf"(?<![A-Za-z0-9])[sr]k_(?:live|test|prod)_[A-Za-z0-9]{{16,}}{_E}"),
         ("_live_", "_test_", "_prod_"), check=_random_tail(8)),
    Rule("google-oauth-secret", _r(rf"{_key('GOCSPX-')}[A-Za-z0-9_-]{{28}}(?![A-Za-z0-9_-])"), ("GOCSPX-",),
         check=_random_tail(7)),
    # a bot id (8-10 digits), a colon, 35 characters starting AA (Telegram Bot API)
    Rule("telegram-bot-token", _r(r"(?<![0-9:])[0-9]{8,10}:AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])"), (":AA",),
         check=_after_colon),
    # Azure storage connection string: AccountKey= 64 bytes in base64
    Rule("azure-storage-key", _r(r"AccountKey=([A-Za-z0-9+/]{86}==)"), ("AccountKey=",), group=1,
         check=_random_tail(0, 4.0)),
    Rule("aws-access-key-id", _r(r"A(?:KIA|SIA|BIA|CCA)(?<![A-Z0-9]A[A-Z]{3})[A-Z0-9]{16}(?![A-Z0-9])"),
         (), check=_aws_id),  # no keywords: the regex, an upper-case A first, is as quick a scan as four
    # The rules below match the lower-cased text (``icase``); the value replaced is the original's.
    Rule("aws-secret", _r(rf"secret[_-]?access[_-]?key{_SEP}([a-z0-9/+]{{40}})(?![a-z0-9/+=])"), ("secret",),
         group=1, icase=True, check=_aws_secret),
    Rule("aws-secret", _r(rf"aws[_-]?secret[_-]?key{_SEP}([a-z0-9/+]{{40}})(?![a-z0-9/+=])"), ("secret",),
         group=1, icase=True, check=_aws_secret),
    # In prose: "the AWS secret key is X", "secret access key for aws: X" (40 characters, no label)
    Rule("aws-secret", _r(r"(?:aws[^\n]{0,64}?(?:secret|key)|secret[^\n]{0,64}?aws)[^\n]{0,64}?(?<![a-z0-9/+])"
                          r"([a-z0-9/+]{40})(?![a-z0-9/+=])"), ("aws",), group=1, icase=True, check=_aws_prose),
    # A presigned URL's signature (AWS SigV4 query auth, Google Cloud Storage V4): whoever holds the URL
    # can use it until it expires (up to 7 days). The key id in X-Amz-Credential is the rule above's.
    Rule("url-signature", _r(r"[?&](?:x-amz|x-goog)-signature=([0-9a-f]{64})(?![0-9a-f])"), ("-signature=",),
         group=1, icase=True),
    # Credentials in a URL's user info: scheme://user:PASSWORD@host
    Rule("url-password", _r(r"://(?<=[a-z0-9+.-]://)[^\s:/@\"'<>]{0,128}:([^\s/@\"'<>]{1,256})@(?=[\w\[])"),
         ("://",), group=1, icase=True, check=url_password, check_match=True),
    # Header values: Authorization: Bearer X / Basic X / X (also a YAML list item, as cassettes write it)
    Rule("auth-header", _r(
        rf"authorization{_Q}[ \t]*[:=][ \t]*(?:\r?\n[ \t]*-[ \t]+)?{_Q}(?:(?:bearer|basic|token|bot|digest)[ \t]+)?"
        r"([a-z0-9._~+/=-]{8,})"),
        ("authoriz",), group=1, icase=True, check=plausible),
    # --password VALUE / --api-key VALUE on a command line
    *(Rule(kind, _r(rf"--(?<![\w-]--)[a-z0-9-]*(?:{flag})[ \t]+[\"']?({_VALUE})"), keys, group=1, icase=True,
           check=plausible)
      for kind, flag, keys in (("password", "password|passwd", ("passw",)), ("api-key", "api-key|apikey", ("key",)),
                               ("secret", "secret", ("secret",)), ("token", "token", ("token",)))),
    # mysql -pVALUE (joined: "-p VALUE" asks for the password, VALUE is the database); sshpass -p VALUE
    Rule("password", _r(rf"(?:mysql|mariadb)[^\n|;&]{{0,200}}?[ \t]-p{_Q}({_VALUE})"), ("mysql", "mariadb"),
         group=1, icase=True, check=assigned, check_match=True),
    Rule("password", _r(rf"sshpass[ \t]+-p[ \t]*{_Q}({_VALUE})"), ("sshpass",), group=1, icase=True,
         check=assigned, check_match=True),
    # NAME=VALUE / "name": "value" / name: value, NAME ending in a credential's name
    _assign("password", r"pass(?:word|wd|phrase)", ("passw", "passphrase")),
    _assign("password", "pwd", ("pwd",), not_a_path),
    _assign("api-key", _ends("key", "api"), ("key",)),
    _assign("secret", _ends("key", "secret", "private", "signing", "encryption", "master", "access"), ("key",)),
    _assign("secret", "secret", ("secret",)),
    # not a presigned URL's X-Amz-Credential / X-Goog-Credential: a key id (the AWS rule's) and a scope
    _assign("secret", "credential(?<!x-amz-credential)(?<!x-goog-credential)", ("credential",)),
    # not a browser origin-trial token: public by design (every page that uses one serves it in a meta tag);
    # not a CSRF token, a public token, a Maven io.jsonwebtoken coordinate (gitleaks' generic rule's allowlist)
    _assign("token", "token(?<!origintrialtoken)(?<!csrf.token)(?<!csrftoken)(?<!xsrf.token)(?<!xsrftoken)"
            "(?<!public.token)(?<!publictoken)(?<!jsonwebtoken)", ("token",)),
)


def custom_rule(name: str, pattern: str) -> Rule:
    """A rule from the config (``storage.redact_patterns``): the group named ``secret``, else
    the first group, else the whole match is replaced. Raises ``re.error`` for a bad regex and
    ValueError for one that matches the empty string."""
    rx = re.compile(pattern)
    if rx.fullmatch("") is not None:
        raise ValueError("it matches the empty string")
    group: int | str = "secret" if "secret" in rx.groupindex else (1 if rx.groups else 0)
    return Rule(name, rx, (), group)


# ---------------------------------------------------------------- redacting


MeasureFn = Callable[[Message, tuple[str, ...]], dict[str, int]]
"""The original message's token sums by counting scheme (``api/redaction.Originals``), given the
model names its session and the message recorded (the schemes a replay of it uses by default)."""
ToolsMeasureFn = Callable[[Any, tuple[str, ...]], dict[str, int]]
"""The original tool definitions' token counts by tools scheme, given the same model names."""


class Redactor:
    """Replaces secrets in strings and in everything an importer produces; counts them by type.

    >>> r = Redactor()
    >>> r.text("OPENAI_API_KEY=sk-proj-" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7" * 3)
    'OPENAI_API_KEY=[redacted:openai-key]'
    >>> dict(r.counts)
    {'openai-key': 1}
    """

    def __init__(self, extra: Iterable[Rule] = (), *, measure: MeasureFn | None = None,
                 measure_tools: ToolsMeasureFn | None = None) -> None:
        self.extra = tuple(extra)  # the config's (``custom_rule``)
        self.rules = RULES + gitleaks_table() + self.extra
        self.measure = measure
        self.measure_tools = measure_tools
        self.counts: Counter[str] = Counter()
        self._digest = False  # placeholders with a digest of the secret (``path``)
        self._cur: Counter[str] = Counter()  # the current record's (a message, a session's title and metadata)
        self._plain = [r for r in self.rules if not r.icase and not r.lower_keys and r.keywords]
        self._icase = [r for r in self.rules if r.icase and not r.lower_keys]
        self._always = [r for r in self.rules if not r.keywords]
        self._table = [r for r in self.rules if r.lower_keys and r.keywords]  # gitleaks': last
        # Each keyword is looked for once per string (a C-level scan), not once per rule.
        self._plain_keys = tuple(dict.fromkeys(k for r in self._plain for k in r.keywords))
        self._icase_keys = tuple(dict.fromkeys(k for r in self._icase for k in r.keywords))
        table_keys = tuple(dict.fromkeys(k for r in self._table for k in r.keywords))
        # gitleaks' ~240 keywords: the short, common ones (sk, ey, key, api) by a scan each, the rest
        # by one scan of a trie (``keyword_finder``)
        self._table_by_key: dict[str, list[int]] = {}
        for i, r in enumerate(self._table):
            for k in r.keywords:
                self._table_by_key.setdefault(k, []).append(i)
        self._table_short = tuple(k for k in table_keys if len(k) <= 3)
        self._table_finder, self._table_prefixes = _finder(tuple(k for k in table_keys if len(k) > 3))
        self._hashes: dict[str, str] = {}  # original content hash -> redacted (this session's)
        self._session: Session | None = None  # the session being redacted (its model, read as messages come)
        # What the stored text depends on: the rules, and which original token counts are kept.
        self.fingerprint = short_id("redact", *(f"{r.name}={r.regex.pattern}" for r in self.rules),
                                    f"measure={getattr(measure, 'key', measure is not None)}",
                                    f"tools={getattr(measure_tools, 'key', measure_tools is not None)}")

    def reset(self) -> Counter[str]:
        """The counts so far (then zero: one file's counts at a time)."""
        out, self.counts = self.counts, Counter()
        return out

    # -- strings

    def text(self, s: str) -> str:
        """``s`` with every secret replaced by its placeholder."""
        if len(s) < 8:
            return s
        present = [k for k in self._plain_keys if k in s]
        if present:
            for rule in self._plain:
                if any(k in present for k in rule.keywords):
                    s = self._apply(rule, s, s)
        low = _lower(s)
        present = [k for k in self._icase_keys if k in low]
        if present:
            for rule in self._icase:
                if any(k in present for k in rule.keywords):
                    t = self._apply(rule, s, low)
                    if t is not s:
                        s, low = t, _lower(t)
        for rule in self._always:
            t = self._apply(rule, s, s)
            if t is not s:
                s, low = t, _lower(t)
        found = self._table_present(low)
        if found:  # the rules of the keywords found, in the table's order
            for i in sorted({i for k in found for i in self._table_by_key[k]}):
                s = self._apply(self._table[i], s, s)
        return s

    def _table_present(self, low: str) -> set[str]:
        """gitleaks' keywords in ``low``."""
        out = {k for k in self._table_short if k in low}
        if self._table_finder is not None:
            prefixes = self._table_prefixes
            for k in found(self._table_finder, low):
                out.update(prefixes[k])
        return out

    def path(self, p: str) -> str:
        """A file's path or name as it may be stored and printed: each secret in it replaced by its
        placeholder with a digest of the secret (``[redacted:github-token~3f2a1c9b]``), so that
        two files whose names differ only by their secret keep two sources (a session's id is
        made of its source). Not counted: the counts are of the file's content."""
        if len(p) < 8:
            return p
        counts, cur = self.counts.copy(), self._cur.copy()
        self._digest = True
        try:
            return self.text(p)
        finally:
            self._digest = False
            self.counts, self._cur = counts, cur

    def may_hold(self, s: str) -> bool:
        """Whether any rule could match in ``s`` (False: ``text(s)`` would return it unchanged).

        The provider shapes by a few scans (``_GATE``: two regexes anchored on ``-`` and ``_``
        with the character before it checked first, and the long literals); the rules matched
        on the lower-cased text by their own regexes, each starting with its keyword (so the
        engine skips to each occurrence, and a word like "token" in prose stops nothing)."""
        if any(g.search(s) for g in _GATE) or any(k in s for k in _GATE_LITERALS):
            return True
        if any(r.regex.search(s) for r in self._always):
            return True
        low = s.lower()  # a superset test: positions do not matter here
        if any(k in low for k in self._table_short) or (
                self._table_finder is not None and self._table_finder.search(low)):
            return True  # gitleaks' rules: their keywords, then text()
        return any(r.regex.search(low) for r in self._icase)

    def _apply(self, rule: Rule, s: str, seen: str) -> str:
        """Replace ``rule``'s matches in ``s``, found in ``seen`` (``s`` or its lower case, of the same length)."""
        out: list[str] = []
        at = 0
        group, check, name = rule.group, rule.check, rule.name
        for m in rule.regex.finditer(seen):
            if group == -1:  # the first group that matched, else the whole match
                a, b = next((sp for sp in m.regs[1:] if sp[0] >= 0 and sp[0] != sp[1]), m.span())
            else:
                a, b = m.span(group)
            if a < 0 or a == b:
                continue
            value = s[a:b]
            if check is not None:
                whole = s[m.start():m.end()]
                if rule.check_line:
                    ok = check(value, whole, s[s.rfind("\n", 0, m.start()) + 1:_line_end(s, m.end())])
                else:
                    ok = check(value, whole) if rule.check_match else check(value)
                if not ok:
                    continue
            out.append(s[at:a])
            out.append(PLACEHOLDER.format(f"{name}~{_digest(value)}" if self._digest else name))
            at = b
            self.counts[name] += 1
            self._cur[name] += 1
        if not out:
            return s
        out.append(s[at:])
        return "".join(out)

    def value(self, obj: Any) -> Any:
        """A JSON-able value with its strings (keys too) redacted; the same object when nothing changed."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            out, changed = {}, False
            for k, v in obj.items():
                k2 = self.text(k) if isinstance(k, str) else k
                v2 = self.value(v)
                changed = changed or k2 is not k or v2 is not v
                out[k2] = v2
            return out if changed else obj
        if isinstance(obj, (list, tuple)):
            items = [self.value(v) for v in obj]
            if all(a is b for a, b in zip(items, obj)):
                return obj
            return type(obj)(items) if isinstance(obj, tuple) else items
        return obj

    # -- records

    def message(self, m: Message) -> Message:
        """``m`` with its secrets replaced (the same object when it holds none)."""
        cur = self._cur
        cur.clear()
        # One look over the whole message first: most hold no secret, and then no field is walked.
        blob = "\0".join((m.text, *(c.arguments for c in m.tool_calls), json_text(list(m.parts)) if m.parts else "",
                          json_text(m.meta) if m.meta else ""))
        if not self.may_hold(blob):
            meta = self._meta(m.meta) if (self._hashes and m.meta and "request" in m.meta) else m.meta
            if meta is m.meta:
                return m
            return Message(m.role, m.text, m.kind, m.name, m.tool_calls, m.tool_call_id, m.parts, m.usage,
                           m.timestamp, m.model, meta)
        text = self.text(m.text)
        calls = m.tool_calls
        if calls:
            new = tuple(c if (a := self.text(c.arguments)) is c.arguments else ToolCall(c.name, a, c.id)
                        for c in calls)
            calls = calls if all(a is b for a, b in zip(new, calls)) else new
        parts = self.value(m.parts) if m.parts else m.parts
        meta = self._meta(m.meta) if m.meta else m.meta
        if not cur and meta is m.meta:
            return m
        meta = dict(meta)
        out = Message(m.role, text, m.kind, m.name, calls, m.tool_call_id, parts, m.usage, m.timestamp, m.model,
                      meta)
        if not cur:  # only hashes in meta were mapped
            return out
        record: dict[str, Any] = {"secrets": dict(sorted(cur.items()))}
        if out.hash != m.hash:  # what the model read changed: its token counts must not
            self._hashes[m.hash] = out.hash
            record["text_changed"] = True
            if self.measure is not None:
                record["tokens"] = self.measure(m, self._models(m))
        tools = _request_tools(m.meta)
        if tools is not None and self.measure_tools is not None and _request_tools(meta) != tools:
            record.setdefault("tokens", {}).update(self.measure_tools(tools, self._models(m)))
        meta[META_KEY] = record
        return out

    def _models(self, m: Message | None) -> tuple[str, ...]:
        """The model names recorded by the session being redacted and by ``m`` (read when a
        secret is met: an importer may name the session's model as its messages are read)."""
        names = (self._session.model if self._session is not None else None, m.model if m is not None else None)
        return tuple(dict.fromkeys(n for n in names if isinstance(n, str) and n.strip()))

    def _meta(self, meta: dict[str, Any]) -> dict[str, Any]:
        out = self.value(meta)
        request = out.get("request") if isinstance(out, dict) else None
        if isinstance(request, dict) and self._hashes:
            hashes, tools = request.get("input_hashes"), request.get("tools_hash")
            fix: dict[str, Any] = {}
            if isinstance(hashes, list) and any(h in self._hashes for h in hashes if isinstance(h, str)):
                fix["input_hashes"] = [self._hashes.get(h, h) if isinstance(h, str) else h for h in hashes]
            if isinstance(tools, str) and tools in self._hashes:
                fix["tools_hash"] = self._hashes[tools]
            if fix:
                out = {**out, "request": {**request, **fix}}
        return out

    def session(self, s: Session) -> Session:
        """Redact a session in place: title and metadata now, messages as the store reads them."""
        self._hashes = {}
        self._session = s
        # ids an importer may have made of the file's name: as ``path`` (a digest keeps them apart)
        s.external_id = self.path(s.external_id) if isinstance(s.external_id, str) else s.external_id
        if isinstance(s.parent_external_id, str):
            s.parent_external_id = self.path(s.parent_external_id)
        if isinstance(s.task, str):
            s.task = self.path(s.task)
        cur = self._cur
        cur.clear()
        if s.title:
            s.title = self.text(s.title)
        if s.metadata:
            tools = s.metadata.get("tools")
            meta = self.value(s.metadata)
            if meta is not s.metadata:
                meta = dict(meta)
                record: dict[str, Any] = {"secrets": dict(sorted(cur.items()))}
                if tools is not None and meta.get("tools") != tools:
                    # a request's tools_hash names the session's tool definitions by their content
                    self._hashes[content_hash(tools)] = content_hash(meta["tools"])
                    if self.measure_tools is not None:
                        record["tokens"] = self.measure_tools(tools, self._models(None))
                meta[META_KEY] = record
                s.metadata = meta
        s.messages = self._messages(s.messages)
        return s

    def _messages(self, messages: Iterable[Message]) -> Iterator[Message]:
        message = self.message
        for m in messages:
            yield message(m)


# The provider keys' prefixes (RULES' plain keywords) as few scans; test_redact checks that a
# sample of every rule gets through ``may_hold``.
_GATE = (
    re.compile(r"-(?<=[kitpabosre]-)(?:(?<=sk-)|(?<=xai-)|(?<=glpat-)|(?<=xapp-)|(?<=xox[abposre]-))"),
    re.compile(r"_(?<=[kfpousrted]_)(?:(?<=gsk_)|(?<=hf_)|(?<=gh[pousr]_)|(?<=github_pat_)|(?<=k_live_)"
               r"|(?<=k_test_)|(?<=k_prod_))"),
)
_GATE_LITERALS = ("eyJ", "AIza", "PRIVATE KEY", "hooks.slack.com", "GOCSPX-", ":AA", "AccountKey=")


def _digest(value: str) -> str:
    return hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()


def _line_end(s: str, at: int) -> int:
    end = s.find("\n", at)
    return len(s) if end < 0 else end


@functools.lru_cache(maxsize=4)
def _finder(keywords: tuple[str, ...]) -> tuple[re.Pattern[str] | None, dict[str, tuple[str, ...]]]:
    from .gitleaks_rules import keyword_finder, prefixes

    return (keyword_finder(keywords) if keywords else None), prefixes(keywords)


@functools.lru_cache(maxsize=1)
def gitleaks_table() -> tuple[Rule, ...]:
    """gitleaks' rules (``gitleaks_rules``, the vendored table) as ``Rule``s, each secret replaced by
    ``[redacted:<gitleaks id>]``; after ctxf's own, which have replaced what they know by then."""
    from .gitleaks_rules import GitleaksCheck, load

    return tuple(Rule(r["id"], r["regex"], r["keywords"], group=r["group"] or -1, lower_keys=True, check_line=True,
                      check=GitleaksCheck(r["id"], r["entropy"], r["allowlists"]))
                 for r in load())


def _lower(s: str) -> str:
    """``s`` lower-cased, character for character (the icase rules' matches index ``s``)."""
    low = s.lower()
    if len(low) != len(s):  # a character whose lower case is longer (İ): keep it as it is
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in s)
    return low


def _request_tools(meta: Any) -> Any:
    request = meta.get("request") if isinstance(meta, dict) else None
    return request.get("tools") if isinstance(request, dict) and request.get("tools") else None
