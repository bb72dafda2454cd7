"""YAML the user writes (the config, facts files, calibration pairs), read strictly.

PyYAML's safe loader lets a mapping repeat a key and keeps the last value silently: two
``storage:`` blocks in ``forensics_config.yaml`` pass validation and the second wins. The loader
here refuses that at any depth, with the key and both lines, as a ``yaml.YAMLError`` whose
``problem_mark`` is the second occurrence, so each caller's existing ``invalid YAML`` error
names the file and place. A merge key (``<<: *base``) may still be overridden: that is its job.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError

MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKeyError(ConstructorError):
    """A mapping names one key twice."""


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a repeated mapping key."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, yaml.Node] = {}
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:
                    continue  # an unhashable key: the safe loader reports it itself
                if first is not key_node:
                    raise DuplicateKeyError(
                        None, None,
                        f"duplicate key {key!r} (at lines {first.start_mark.line + 1} and "
                        f"{key_node.start_mark.line + 1}; the second would silently replace the first)",
                        key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def load_strict(text: str) -> Any:
    """The document of ``text``, as ``yaml.safe_load`` reads it, but a repeated key is a ``DuplicateKeyError``."""
    return yaml.load(text, Loader=StrictLoader)  # noqa: S506 (a safe loader)


def key_line(text: str, key: str) -> int | None:
    """The line (1-based) of the setting a dotted key path names in ``text`` (``drift.window_size``,
    ``model_mappings.gpt-4.1.base``: a key holding dots is matched whole), or of its nearest
    parent that is there; None when not even the first key is found or the text does not parse."""
    try:
        node = yaml.compose(text, Loader=StrictLoader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError:
        return None
    line, rest = None, key
    while rest and isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            name = str(k.value)
            if rest == name or rest.startswith(name + "."):
                line, node, rest = k.start_mark.line + 1, v, rest[len(name) + 1:]
                break
        else:
            break
    return line
