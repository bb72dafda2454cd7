"""``forensics_config.yaml``: found, parsed and validated with errors that name the fix.

Lookup order: ``--config``, then ``$CTXF_CONFIG``, then ``./forensics_config.yaml``, then the
built-in defaults. Validation is strict: an unknown key, a wrong type, a negative limit, an
unknown tokenizer or strategy is an error naming the file, the key path and the allowed values;
so is a model name the model table cannot place (a mapping's ``base``, an audit rule's
``model``), with the closest known names.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from ..errors import ConfigError

CONFIG_ENV = "CTXF_CONFIG"
DEFAULT_FILE = "forensics_config.yaml"

# Tokenizers a model entry may name. Exact ones count like the provider; the others are
# the closest offline encoding and every figure computed with them is labelled "estimated".
TOKENIZERS = ("o200k_base", "cl100k_base", "llama3", "qwen3", "claude", "gemini", "approx")
# Overflow behaviours (one module each under policies/, see the replay issue).
STRATEGIES = (
    "reject",
    "left_truncation",
    "sliding_window",
    "middle_out",
    "tool_result_clearing",
    "auto_compaction",
    "local_global_attention",
    "recorded",
)


@dataclass(frozen=True)
class ModelConfig:
    """One ``model_mappings`` entry. A figure left out (None) comes from ``base`` (a table
    model), else from the table entry of the mapping's own name, else, for a brand-new model,
    from ``models.NEW_MODEL_DEFAULTS`` (which has no window: a new model must give
    ``context_limit``). ``models.check_mapping`` validates the result at load."""

    tokenizer: str | None = None
    context_limit: int | None = None
    eviction_strategy: str | None = None
    preserve_system: bool | None = None
    reserved_output: int | None = None
    params: dict[str, Any] = field(default_factory=dict)  # policy parameters
    base: str | None = None  # a table model whose figures the keys left out take


@dataclass(frozen=True)
class Thresholds:
    fact_presence_cosine: float = 0.6
    divergence_cosine: float = 0.85
    min_context_utilization_alert: float = 0.9


@dataclass(frozen=True)
class StorageConfig:
    type: str = "sqlite"
    path: str = "./forensics_data/sessions.db"
    max_sessions: int = 100_000


@dataclass(frozen=True)
class EmbeddingConfig:
    model: str = "all-MiniLM-L6-v2"
    cache_enabled: bool = True
    cache_ttl_hours: float = 0  # 0 = never expires


@dataclass(frozen=True)
class DriftConfig:
    """``ctxf drift``: the goal, the window, and the similarity -> score mapping (drift.py)."""

    goal: str | None = None  # None: the session's opening (system prompt + first user message)
    window_size: int = 5  # judged assistant messages per step
    # Calibrated on MiniLM (drift.py docstring): a window at on_topic_similarity scores 75 (the
    # lowest MILD), one at off_topic_similarity scores 35 (the lowest SEVERE); linear between.
    on_topic_similarity: float = 0.28
    off_topic_similarity: float = 0.14


@dataclass(frozen=True)
class Config:
    model_mappings: dict[str, ModelConfig] = field(default_factory=dict)
    analysis_thresholds: Thresholds = field(default_factory=Thresholds)
    storage: StorageConfig = field(default_factory=StorageConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    drift: DriftConfig = field(default_factory=DriftConfig)
    facts: tuple[str, ...] = ()  # facts `ctxf facts` tracks in every session (see facts.py)
    audit: Any = None  # the `audit:` section, validated by audit.parse_audit (rules and their settings)
    source: str = "<built-in defaults>"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("source")
        return d


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


def _fields(cls: type) -> tuple[str, ...]:
    return tuple(cls.__dataclass_fields__)


def validate(data: Any, source: str) -> Config:
    """Turn parsed YAML into a ``Config`` or raise ``ConfigError``."""
    from .models import check_mapping  # the model table imports this module

    v = _V(source)
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

    em = v.mapping(top.get("embedding"), "embedding", _fields(EmbeddingConfig))
    emb_kw: dict[str, Any] = {}
    if "model" in em:
        emb_kw["model"] = v.string(em["model"], "embedding.model")
    if "cache_enabled" in em:
        emb_kw["cache_enabled"] = v.boolean(em["cache_enabled"], "embedding.cache_enabled")
    if "cache_ttl_hours" in em:
        emb_kw["cache_ttl_hours"] = v.number(em["cache_ttl_hours"], "embedding.cache_ttl_hours", lo=0)

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


def _audit_section(raw: Any, source: str, mappings: dict[str, ModelConfig]) -> Any:
    from ..audit.runner import parse_audit  # validates now, so `ctxf config check` catches audit mistakes

    parse_audit(raw, source, mappings=mappings)
    return raw


def find_config(explicit: str | Path | None = None) -> Path | None:
    """The config file to use, or None for the built-in defaults."""
    if explicit:
        p = Path(explicit)
        if not p.is_file():
            raise ConfigError("config file not found", where=str(p), hint="check the --config path")
        return p
    env = os.environ.get(CONFIG_ENV)
    if env:
        p = Path(env)
        if not p.is_file():
            raise ConfigError(
                "config file not found", where=f"{p} (from ${CONFIG_ENV})", hint=f"unset {CONFIG_ENV} or fix it"
            )
        return p
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
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"invalid YAML: {problem}", where=where) from None
    return validate(data if data is not None else {}, str(path))
