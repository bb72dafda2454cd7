"""The redactor every ingest of the API runs (``store/redact.py``), from the config.

On unless ``redact=False`` or the config's ``storage.redact: false``; the config's
``storage.redact_patterns`` join the built-in rules. The store cannot tokenize (tokens come
after it in the flow), so this layer hands it the functions that count a redacted message's
original text (``tokens/originals.py``): token figures are the log's, not the placeholders'.
The tokenizers load only when a file holds a secret: by default those of the session's model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..config.schema import Config
    from ..store.redact import Redactor


@dataclass(frozen=True)
class Originals:
    """The store's ``measure`` / ``measure_tools`` (``tools``): a redacted message's original token
    sums under the schemes ``storage.redact_originals`` names (``tokens/originals.py``), given the
    model names its session and the message recorded. A module-level class: ingest workers
    rebuild the redactor from it."""

    config: Config | None = None
    every: bool = False
    tools: bool = False

    @property
    def key(self) -> str:
        """What the stored counts depend on (the redactor's fingerprint: a change reads files again).
        Not the config's model mappings: a replay under a scheme ingest did not count flags the
        message as counted as stored, and editing a mapping does not read every file again."""
        return "all" if self.every else "model"

    def __call__(self, obj: Any, models: tuple[str, ...]) -> dict[str, int]:
        from ..tokens.originals import counters, message_sums, tools_sums

        using = counters(models, self.config, every=self.every)
        return tools_sums(obj, using) if self.tools else message_sums(obj, using)


def redactor(cfg: Config, redact: bool | None = None) -> Redactor | bool:
    """The store's redactor for ``cfg`` (``redact`` None: ``storage.redact``), or False when off."""
    if not (cfg.storage.redact if redact is None else redact):
        return False
    from ..store.redact import Redactor, custom_rule

    extra = [custom_rule(p.name, p.regex) for p in cfg.storage.redact_patterns]
    every = cfg.storage.redact_originals == "all"
    return Redactor(extra, measure=Originals(cfg, every), measure_tools=Originals(cfg, every, tools=True))
