"""The configuration's shape: the dataclasses a validated ``forensics_config.yaml`` becomes,
and the names its keys may take. No validation here (``settings``) and no model table
(``models``): both build on these types."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Tokenizers a model entry may name (tokens/tokenizers.py: TOKENIZER_ENCODINGS, then the vendor
# VOCABULARIES). Exact ones count like the provider; a vendor vocabulary counts with the
# vendor's own file but is "estimated" until recorded usage confirms it; the others are the
# closest offline encoding and every figure computed with them is labelled "estimated".
TOKENIZERS = ("o200k_base", "cl100k_base", "llama3", "qwen3", "claude", "gemini", "approx",
              "mistral-v1", "mistral-v2", "mistral-v3", "mistral-v7", "tekken-v3", "tekken", "deepseek-v3")
# What may run the embedding model (embed/embedders.py: BACKENDS).
EMBEDDING_BACKENDS = ("auto", "onnx", "torch")
# Overflow behaviours (one module each under policies/, see the replay issue).
STRATEGIES = (
    "reject",
    "left_truncation",
    "sliding_window",
    "middle_out",
    "tool_result_clearing",
    "auto_compaction",
    "local_global_attention",
    "constraint_selection",
    "goal_anchoring",
    "rolling_summary",
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
class RedactPattern:
    """One ``storage.redact_patterns`` entry: matches of ``regex`` (its group named ``secret``,
    else its first group, else the whole match) become ``[redacted:NAME]``."""

    name: str
    regex: str


@dataclass(frozen=True)
class StorageConfig:
    type: str = "sqlite"
    # None: not set in a config file; the store is then $CTXF_DB, ./forensics_data/sessions.db when
    # it exists, else the user-level store (config/location.py)
    path: str | None = None
    max_sessions: int = 100_000
    redact: bool = True  # replace secrets before they are stored (store/redact.py)
    redact_patterns: tuple[RedactPattern, ...] = ()  # besides the built-in rules
    # a redacted message's original token sums: under the log's model (its tokenizer and chat
    # format; the tokenizers a replay of the session loads anyway), or under every scheme
    redact_originals: str = "model"


@dataclass(frozen=True)
class EmbeddingConfig:
    model: str = "all-MiniLM-L6-v2"
    cache_enabled: bool = True
    cache_ttl_hours: float = 0  # 0 = never expires
    # what runs the model: onnx (ONNX Runtime, exported once into ctxf's cache), torch, or auto
    # (onnx when onnxruntime is importable and the export exists or can be made, else torch)
    backend: str = "auto"


@dataclass(frozen=True)
class DriftConfig:
    """``ctxf drift``: the goal, the window, and the similarity signal's scale (analysis/drift/verdicts.py)."""

    goal: str | None = None  # None: the session's opening (system prompt + first user message)
    window_size: int = 5  # judged assistant messages per step
    # The similarity signal's scale (analysis/drift/verdicts.py): a window at on_topic_similarity reads 1, one at
    # off_topic_similarity 0; the calibrated model's similarity weight is in these units (MiniLM's levels).
    on_topic_similarity: float = 0.28
    off_topic_similarity: float = 0.14


@dataclass(frozen=True)
class Config:
    model_mappings: dict[str, ModelConfig] = field(default_factory=dict)
    analysis_thresholds: Thresholds = field(default_factory=Thresholds)
    storage: StorageConfig = field(default_factory=StorageConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    drift: DriftConfig = field(default_factory=DriftConfig)
    facts: tuple[str, ...] = ()  # facts `ctxf facts` tracks in every session (see analysis/facts/)
    audit: Any = None  # the `audit:` section, validated by audit.parse_audit (rules and their settings)
    source: str = "<built-in defaults>"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("source")
        return d
