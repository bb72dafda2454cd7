"""The importer registry: every format module or package of ``importers`` registers its
importers once; the modules formats share (``_*``) and ``base`` register none."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pytest

from context_forensics import importers
from context_forensics.errors import InputError
from context_forensics.importers import ImportContext
from context_forensics.importers._documents import DocumentImporter

SUBMODULES = list(pkgutil.iter_modules(importers.__path__))
FORMAT_MODULES = {m.name for m in SUBMODULES if not m.name.startswith("_") and m.name != "base"}
HELPER_MODULES = sorted(m.name for m in SUBMODULES if m.name.startswith("_"))
PROVIDERS = ["anthropic_messages", "generic_json", "openai_chat", "openai_responses"]


def _owner(imp: importers.Importer) -> str:
    """The format module (``importers.<name>``) an importer's class is defined in or under."""
    return type(imp).__module__.split(".")[2]


def test_every_format_module_registers_and_nothing_else_does():
    registry = importers.registry()
    assert {_owner(imp) for imp in registry.values()} == FORMAT_MODULES
    assert len({type(imp) for imp in registry.values()}) == len(registry)  # one instance per class
    assert all(name == imp.name for name, imp in registry.items())


def test_the_shared_modules_register_nothing():
    """Imported alone, in a fresh interpreter, the modules formats share register no importer."""
    code = (
        "import importlib, sys\n"
        "from context_forensics.importers import base\n"
        "for name in sys.argv[1:]:\n"
        "    importlib.import_module('context_forensics.importers.' + name)\n"
        "print(sorted(base.registered()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, *HELPER_MODULES], capture_output=True, text=True, check=True)
    assert HELPER_MODULES and out.stdout.strip() == "[]"


def test_the_provider_importers_share_one_document_reader():
    registry = importers.registry()
    shared = sorted(name for name, imp in registry.items() if isinstance(imp, DocumentImporter))
    assert shared == PROVIDERS
    for name in shared:
        assert "parse" not in type(registry[name]).__dict__  # DocumentImporter.parse, not a copy


@pytest.mark.parametrize("fmt", PROVIDERS)
@pytest.mark.parametrize("text, error, hint", [
    ('{"note": "no messages, items or turns here"}', "not_a_record", "force another format with --format"),
    ("42", "not_a_document", None),
])
def test_a_document_that_holds_no_record_is_an_error_naming_the_file(fmt, text, error, hint, tmp_path):
    path = tmp_path / "doc.json"
    path.write_text(text)
    imp = importers.get(fmt)
    with pytest.raises(InputError) as e:
        list(imp.parse(path, ImportContext(path=path)))
    assert (e.value.message, e.value.where, e.value.hint) == (getattr(imp, error), str(path), hint)


@pytest.mark.parametrize("fmt", ["anthropic_messages", "openai_chat", "openai_responses"])
def test_a_record_that_is_no_object_is_skipped_with_its_line(fmt, tmp_path):
    good = {
        "anthropic_messages": {"custom_id": "a", "params": {"model": "claude", "messages": [
            {"role": "user", "content": "hi"}]}},
        "openai_chat": {"custom_id": "a", "body": {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}},
        "openai_responses": {"id": "a", "input": [{"role": "user", "content": "hi"}], "model": "gpt-4o"},
    }[fmt]
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(good) + "\n7\n" + json.dumps(good) + "\n")
    ctx = ImportContext(path=path)
    sessions = list(importers.get(fmt).parse(path, ctx))
    assert [s.metadata.get("line") for s in sessions] == [1, 3]
    assert ctx.warnings == [f"{path}:2: record is not an object; skipped"]
    assert ctx.skipped["malformed record"] == 1
