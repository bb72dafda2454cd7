"""The schema of the config's ``audit:`` section: the rules, their parameters and defaults.

It lives with the configuration (not in ``audit/``) so that loading a config validates its
rules without importing the audit, which itself reads the configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..errors import ConfigError
from .models import check_name
from .schema import Config

DRIFT_BANDS = ("FRESH", "MILD", "MODERATE", "SEVERE", "CRITICAL")
# The checks of `ctxf check` (analysis/check: CHECKS holds them in this order), named here for the
# `consistent` rule's validation: the config loads without importing the analyses.
CHECK_NAMES = ("prompt_vs_window", "recorded_shrink", "calibration", "totals", "compactions", "summary_counts", "edits",
               "tool_pairs", "final_window", "facts")


@dataclass(frozen=True)
class RuleConfig:
    name: str
    params: dict[str, Any]
    fail: bool = False
    model: str | None = None  # None: the session's recorded model
    policy: str | None = None  # None: "recorded" without a model, the model's policy with one


RULE_PARAMS: dict[str, dict[str, Any]] = {
    "max_utilization": {"threshold": None},  # None: analysis_thresholds.min_context_utilization_alert
    "no_overflow": {},
    # facts None: the config's facts list; exhaustive: embed every chunk (else only the candidates)
    "facts_must_persist": {"facts": None, "exhaustive": False},
    "max_drift": {"verdict": "SEVERE", "goal": None},
    "max_compactions": {"max": 0},
    "max_tool_output_share": {"max": 0.5},
    "no_orphan_tool_results": {},
    "divergence": {},
    # None: the config's facts:, else the sentences `facts suggest` proposes (explain's constraints)
    "context_caused_failure": {"facts": None, "goal": None, "only_failed": True},
    # checks None: every check of `ctxf check` that needs no embedding model (analysis/check)
    "consistent": {"checks": None},
}
DEFAULT_RULES = ("max_utilization", "no_overflow", "max_compactions", "max_tool_output_share",
                 "no_orphan_tool_results", "facts_must_persist", "max_drift", "divergence", "consistent")
# context_caused_failure is not a default: it runs `ctxf explain` per session (named in audit.rules, it runs)
_COMMON = ("fail", "model", "policy")


def parse_audit(raw: Any, source: str, config: Config | None = None, *,
                mappings: dict[str, Any] | None = None) -> list[RuleConfig]:
    """Rules from an ``audit:`` config section (``{rules: {name: {params…, fail, model, policy}}}``).

    No section means every rule with its defaults, none failing the build. A rule's ``model``
    must be one the model table or the config's ``model_mappings`` (``config``, or ``mappings``
    while the config is being loaded) can place.
    """
    def fail(key: str, msg: str, hint: str | None = None) -> ConfigError:
        return ConfigError(msg, where=f"{source}: {key}", hint=hint)

    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise fail("audit", "must be a mapping", hint="audit:\n  rules:\n    no_overflow: {model: gpt-4o, fail: true}")
    for k in raw:
        if k != "rules":
            raise fail(f"audit.{k}", "unknown key", hint="allowed keys: rules")
    rules_raw = raw.get("rules")
    if rules_raw is None:
        rules_raw = {name: {} for name in DEFAULT_RULES}
    if not isinstance(rules_raw, dict):
        raise fail("audit.rules", "must be a mapping of rule name to its settings")
    out = []
    for name, spec in rules_raw.items():
        key = f"audit.rules.{name}"
        if name not in RULE_PARAMS:
            raise fail(key, "unknown rule", hint="known rules: " + ", ".join(RULE_PARAMS))
        spec = {} if spec is None else spec
        if not isinstance(spec, dict):
            raise fail(key, "must be a mapping of settings (or empty)")
        allowed = (*RULE_PARAMS[name], *_COMMON)
        for k in spec:
            if k not in allowed:
                raise fail(f"{key}.{k}", "unknown key", hint="allowed keys: " + ", ".join(allowed))
        if "fail" in spec and not isinstance(spec["fail"], bool):
            raise fail(f"{key}.fail", "must be true or false")
        for k in ("model", "policy"):
            if k in spec and spec[k] is not None and not isinstance(spec[k], str):
                raise fail(f"{key}.{k}", "must be a string")
        if spec.get("model") is not None:
            known = config if config is not None else Config(model_mappings=dict(mappings or {}))
            check_name(spec["model"], known, where=f"{source}: {key}.model")
        params = {**RULE_PARAMS[name], **{k: v for k, v in spec.items() if k not in _COMMON}}
        _check_params(name, params, key, fail)
        out.append(RuleConfig(name, params, bool(spec.get("fail", False)), spec.get("model"), spec.get("policy")))
    return out


def _check_params(name: str, p: dict[str, Any], key: str, fail: Callable[..., ConfigError]) -> None:
    def number(k: str, lo: float, hi: float | None) -> None:
        v = p[k]
        if v is None and k == "threshold":
            return
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < lo or (hi is not None and v > hi):
            raise fail(f"{key}.{k}", f"must be a number between {lo} and {hi if hi is not None else '∞'}, got {v!r}")

    if name == "max_utilization":
        number("threshold", 0, 10)
    elif name == "max_compactions":
        if isinstance(p["max"], bool) or not isinstance(p["max"], int) or p["max"] < 0:
            raise fail(f"{key}.max", f"must be an integer ≥ 0, got {p['max']!r}")
    elif name == "max_tool_output_share":
        number("max", 0, 1)
    elif name == "max_drift":
        if p["verdict"] not in DRIFT_BANDS:
            raise fail(f"{key}.verdict", f"unknown verdict {p['verdict']!r}", hint="one of " + ", ".join(DRIFT_BANDS))
    elif name == "consistent":
        c = p["checks"]
        quick = [n for n in CHECK_NAMES if n != "facts"]  # the facts check needs facts: facts_must_persist
        if c is not None and (not isinstance(c, list) or not all(isinstance(x, str) and x in quick for x in c)):
            raise fail(f"{key}.checks", f"must be a list of check names, got {c!r}", hint="known checks: "
                       + ", ".join(quick))
    elif name in ("facts_must_persist", "context_caused_failure"):
        if name == "context_caused_failure":
            if not isinstance(p["only_failed"], bool):
                raise fail(f"{key}.only_failed", "must be true or false")
            if p["goal"] is not None and not (isinstance(p["goal"], str) and p["goal"].strip()):
                raise fail(f"{key}.goal", "must be a non-empty string")
        if name == "facts_must_persist" and not isinstance(p["exhaustive"], bool):
            raise fail(f"{key}.exhaustive", "must be true or false")
        f = p["facts"]
        if f is not None and (not isinstance(f, list) or not all(isinstance(x, str) and x.strip() for x in f)):
            raise fail(f"{key}.facts", "must be a list of non-empty strings")
