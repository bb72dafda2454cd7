"""The redactor every ingest of the API runs (``store/redact.py``), from the config.

On unless ``redact=False`` or the config's ``storage.redact: false``; the config's
``storage.redact_patterns`` join the built-in rules. The store cannot tokenize (tokens come
after it in the flow), so this layer hands it the functions that count a redacted message's
original text (``tokens/originals.py``): token figures are the log's, not the placeholders'.
The tokenizers load only when a file holds a secret.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..config.schema import Config
    from ..records import Message
    from ..store.redact import Redactor


def _message_sums(m: Message) -> dict[str, int]:
    from ..tokens.originals import message_sums

    return message_sums(m)


def _tools_sums(tools: Any) -> dict[str, int]:
    from ..tokens.originals import tools_sums

    return tools_sums(tools)


def redactor(cfg: Config, redact: bool | None = None) -> Redactor | bool:
    """The store's redactor for ``cfg`` (``redact`` None: ``storage.redact``), or False when off."""
    if not (cfg.storage.redact if redact is None else redact):
        return False
    from ..store.redact import Redactor, custom_rule

    extra = [custom_rule(p.name, p.regex) for p in cfg.storage.redact_patterns]
    return Redactor(extra, measure=_message_sums, measure_tools=_tools_sums)
