"""``forensics_config.yaml``: found, parsed and validated with errors that name the fix.

Lookup order: ``--config``, then ``$CTXF_CONFIG``, then ``./forensics_config.yaml``, then the
built-in defaults. Validation is strict: an unknown key, a wrong type, a negative limit, an
unknown tokenizer or strategy is an error naming the file, the key path and the allowed values;
so is a model name the model table cannot place (a mapping's ``base``, an audit rule's
``model``), with the closest known names.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import yaml

from ..errors import ConfigError
from .audit_rules import parse_audit
from .models import check_mapping
from .strict_yaml import key_line, load_strict

if TYPE_CHECKING:
    from _typeshed import DataclassInstance
from .schema import (
    EMBEDDING_BACKENDS,
    STRATEGIES,
    TOKENIZERS,
    Config,
    DriftConfig,
    EmbeddingConfig,
    ModelConfig,
    RedactPattern,
    StorageConfig,
    Thresholds,
)

CONFIG_ENV = "CTXF_CONFIG"
DEFAULT_FILE = "forensics_config.yaml"


# ---------------------------------------------------------------- validation

Check = Callable[[Any, str], Any]


class _V:
    """Small validators that raise ConfigError with the key path and what is allowed."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, key: str, message: str, hint: str | None = None) -> ConfigError:
        return ConfigError(message, where=f"{self.source}: {key}", hint=hint)

    def integer(self, value: Any, key: str, *, minimum: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"must be an integer, got {type(value).__name__} {value!r}")
        if value < minimum:
            raise self.fail(key, f"must be ≥ {minimum}, got {value}")
        return value

    def number(self, value: Any, key: str, *, lo: float | None = None, hi: float | None = None) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(key, f"must be a number, got {type(value).__name__} {value!r}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise self.fail(key, f"must be between {lo} and {hi}, got {value}")
        return float(value)

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {value!r}")
        return value

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"must be a non-empty string, got {value!r}")
        return value

    def choice(self, value: Any, key: str, allowed: tuple[str, ...]) -> str:
        if value not in allowed:
            raise self.fail(key, f"unknown value {value!r}", hint="allowed: " + ", ".join(allowed))
        return value

    def mapping(self, value: Any, key: str, allowed: tuple[str, ...] | None) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(key, f"must be a mapping, got {type(value).__name__}")
        if allowed is not None:
            for k in value:
                if k not in allowed:
                    raise self.fail(
                        f"{key}.{k}" if key else str(k),
                        "unknown key",
                        hint="allowed keys: " + ", ".join(allowed),
                    )
        return value


def _fields(cls: type[DataclassInstance]) -> tuple[str, ...]:
    return tuple(cls.__dataclass_fields__)


def validate(data: Any, source: str) -> Config:
    """Turn parsed YAML into a ``Config`` or raise ``ConfigError``."""
    v = _V(source)
    if not isinstance(data, dict):  # a list or a bare word: no key to name, so say what the file must be
        raise ConfigError(f"a config is a mapping of sections, got {type(data).__name__} {str(data)[:40]!r}",
                          where=source, hint="the file holds sections such as `storage:` and `model_mappings:` "
                          "(see forensics_config.yaml)")
    top = v.mapping(data, "", _fields(Config)[:-1])

    models: dict[str, ModelConfig] = {}
    for name, spec in v.mapping(top.get("model_mappings"), "model_mappings", None).items():
        key = f"model_mappings.{name}"
        spec = v.mapping(spec, key, _fields(ModelConfig))
        out: dict[str, Any] = {}
        if "tokenizer" in spec:
            out["tokenizer"] = v.choice(spec["tokenizer"], f"{key}.tokenizer", TOKENIZERS)
        if "context_limit" in spec:
            out["context_limit"] = v.integer(spec["context_limit"], f"{key}.context_limit", minimum=1)
        if "eviction_strategy" in spec:
            out["eviction_strategy"] = v.choice(
                spec["eviction_strategy"], f"{key}.eviction_strategy", STRATEGIES
            )
        if "preserve_system" in spec:
            out["preserve_system"] = v.boolean(spec["preserve_system"], f"{key}.preserve_system")
        if "reserved_output" in spec:
            out["reserved_output"] = v.integer(spec["reserved_output"], f"{key}.reserved_output")
        if "params" in spec:
            out["params"] = v.mapping(spec["params"], f"{key}.params", None)
        if "base" in spec:
            out["base"] = v.string(spec["base"], f"{key}.base")
        m = ModelConfig(**out)
        # against the model table: a known base, a window for a new model, reserved < limit
        check_mapping(str(name), m, source)
        models[str(name)] = m

    th = v.mapping(top.get("analysis_thresholds"), "analysis_thresholds", _fields(Thresholds))
    thresholds = Thresholds(
        **{k: v.number(val, f"analysis_thresholds.{k}", lo=0.0, hi=1.0) for k, val in th.items()}
    )

    st = v.mapping(top.get("storage"), "storage", _fields(StorageConfig))
    storage_kw: dict[str, Any] = {}
    if "type" in st:
        storage_kw["type"] = v.choice(st["type"], "storage.type", ("sqlite",))
    if "path" in st:
        storage_kw["path"] = v.string(st["path"], "storage.path")
    if "max_sessions" in st:
        storage_kw["max_sessions"] = v.integer(st["max_sessions"], "storage.max_sessions", minimum=1)
    if "redact" in st:
        storage_kw["redact"] = v.boolean(st["redact"], "storage.redact")
    if "redact_patterns" in st:
        storage_kw["redact_patterns"] = _redact_patterns(v, st["redact_patterns"])
    if "redact_originals" in st:
        storage_kw["redact_originals"] = v.choice(st["redact_originals"], "storage.redact_originals", ("model", "all"))

    em = v.mapping(top.get("embedding"), "embedding", _fields(EmbeddingConfig))
    emb_kw: dict[str, Any] = {}
    if "model" in em:
        emb_kw["model"] = v.string(em["model"], "embedding.model")
    if "cache_enabled" in em:
        emb_kw["cache_enabled"] = v.boolean(em["cache_enabled"], "embedding.cache_enabled")
    if "cache_ttl_hours" in em:
        emb_kw["cache_ttl_hours"] = v.number(em["cache_ttl_hours"], "embedding.cache_ttl_hours", lo=0)
    if "backend" in em:
        emb_kw["backend"] = v.choice(em["backend"], "embedding.backend", EMBEDDING_BACKENDS)

    facts = top.get("facts")
    if facts is None:
        facts = []
    if not isinstance(facts, list):
        raise v.fail("facts", f"must be a list of strings, got {type(facts).__name__}",
                     hint="facts:\n  - Never push directly to main.")
    fact_list = tuple(" ".join(v.string(f, f"facts[{i}]").split()) for i, f in enumerate(facts))

    dr = v.mapping(top.get("drift"), "drift", _fields(DriftConfig))
    drift_kw: dict[str, Any] = {}
    if "goal" in dr:
        drift_kw["goal"] = v.string(dr["goal"], "drift.goal")
    if "window_size" in dr:
        drift_kw["window_size"] = v.integer(dr["window_size"], "drift.window_size", minimum=1)
    for k in ("on_topic_similarity", "off_topic_similarity"):
        if k in dr:
            drift_kw[k] = v.number(dr[k], f"drift.{k}", lo=-1.0, hi=1.0)
    drift = DriftConfig(**drift_kw)
    if drift.on_topic_similarity <= drift.off_topic_similarity:
        raise v.fail("drift.on_topic_similarity",
                     f"must be above drift.off_topic_similarity ({drift.off_topic_similarity}), "
                     f"got {drift.on_topic_similarity}")

    return Config(
        model_mappings=models,
        analysis_thresholds=thresholds,
        storage=StorageConfig(**storage_kw),
        embedding=EmbeddingConfig(**emb_kw),
        drift=drift,
        facts=fact_list,
        audit=_audit_section(top.get("audit"), source, models),
        source=source,
    )


_PATTERN_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
_PATTERN_HINT = "storage:\n  redact_patterns:\n    - name: internal-token\n      regex: 'itk_[A-Za-z0-9]{32}'"


def _redact_patterns(v: _V, raw: Any) -> tuple[RedactPattern, ...]:
    """``storage.redact_patterns``: a list of {name, regex}; each regex compiles and cannot
    match the empty string (it would redact everywhere)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise v.fail("storage.redact_patterns", f"must be a list of {{name, regex}}, got {type(raw).__name__}",
                     hint=_PATTERN_HINT)
    out = []
    for i, item in enumerate(raw):
        key = f"storage.redact_patterns[{i}]"
        item = v.mapping(item, key, ("name", "regex"))
        for k in ("name", "regex"):
            if k not in item:
                raise v.fail(f"{key}.{k}", "is missing", hint=_PATTERN_HINT)
        name = v.string(item["name"], f"{key}.name")
        if not _PATTERN_NAME.fullmatch(name):
            raise v.fail(f"{key}.name", f"must be lower-case letters, digits and dashes (it names the "
                         f"placeholder [redacted:NAME]), got {name!r}")
        pattern = v.string(item["regex"], f"{key}.regex")
        try:
            rx = re.compile(pattern)
        except re.error as e:
            raise v.fail(f"{key}.regex", f"is not a valid regular expression: {e}",
                         hint="Python `re` syntax; quote it in single quotes in YAML") from None
        if rx.fullmatch("") is not None:
            raise v.fail(f"{key}.regex", f"matches the empty string: {pattern!r}",
                         hint="make it match at least one character (e.g. `+` instead of `*`)")
        out.append(RedactPattern(name, pattern))
    return tuple(out)


def _audit_section(raw: Any, source: str, mappings: dict[str, ModelConfig]) -> Any:
    parse_audit(raw, source, mappings=mappings)  # validates now, so `ctxf config check` catches audit mistakes
    return raw


def _given(p: Path, where: str, hint: str) -> Path:
    """A config path someone gave: anything readable but a folder (``/dev/null``, a pipe from
    ``<(...)``: an empty one is the defaults), else a ``ConfigError``."""
    if p.is_dir():
        raise ConfigError("is a folder, not a config file", where=where, hint=hint)
    if not p.exists():
        raise ConfigError("config file not found", where=where, hint=hint)
    return p


def find_config(explicit: str | Path | None = None) -> Path | None:
    """The config file to use, or None for the built-in defaults."""
    if explicit:
        p = Path(explicit)
        return _given(p, str(p), "check the --config path")
    env = os.environ.get(CONFIG_ENV)
    if env:
        p = Path(env)
        return _given(p, f"{p} (from ${CONFIG_ENV})", f"unset {CONFIG_ENV} or fix it")
    p = Path(DEFAULT_FILE)
    return p if p.is_file() else None


def load_config(explicit: str | Path | None = None) -> Config:
    path = find_config(explicit)
    if path is None:
        return Config()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read the config: {e}", where=str(path)) from None
    try:
        data = load_strict(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"invalid YAML: {problem}", where=where) from None
    try:
        return validate(data if data is not None else {}, str(path))
    except ConfigError as e:  # "FILE: key.path" -> "FILE:LINE: key.path", the line the key is on
        prefix = f"{path}: "
        if e.where and e.where.startswith(prefix):
            key = e.where[len(prefix):]
            line = key_line(text, key)
            if line is not None:
                e.where = f"{path}:{line}: {key}"
        raise
