"""The docs site (mkdocs.yml, docs/) and the README: the site builds with warnings as errors and loads
nothing from the internet; every example output and generated table in README.md and docs/ is
what the code prints today (scripts/docs_examples.py --check); the README stays short and its
links land on pages that exist."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
SCRIPT = ROOT / "scripts" / "docs_examples.py"


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=900)


def _module():
    spec = importlib.util.spec_from_file_location("docs_examples", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_tables_are_current():
    """docs/formats.md's table is the importer registry's, docs/configuration.md's the config schema's."""
    r = _script("--check", "--tables-only")
    assert r.returncode == 0, r.stderr


@pytest.mark.integration
def test_example_outputs_are_current():
    """Every `<!-- example: ... -->` block holds what the command prints now (the real commands, run
    on sample_logs/ in an 80-column terminal; explain, facts and drift load the packaged MiniLM)."""
    r = _script("--check")
    assert r.returncode == 0, r.stderr


def test_a_drifted_block_is_named_with_the_command_that_regenerates_it(tmp_path, monkeypatch, capsys):
    mod = _module()
    page = tmp_path / "docs" / "formats.md"
    page.parent.mkdir()
    (tmp_path / "README.md").write_text("# x\n")
    page.write_text("# Formats\n\n<!-- generated: formats -->\n| format |\n| `gone_format` |\n<!-- /generated -->\n")
    monkeypatch.setattr(mod, "ROOT", tmp_path)
    assert mod.main(["--check", "--tables-only"]) == 1
    err = capsys.readouterr().err
    assert "docs/formats.md:3: generated table 'formats' drifted" in err
    assert "-| `gone_format` |" in err  # the diff shows what changed
    assert "python scripts/docs_examples.py --tables-only" in err
    assert "gone_format" in page.read_text()  # --check changes nothing
    assert mod.main(["--tables-only"]) == 0  # regenerating writes the registry's table
    assert "gone_format" not in page.read_text() and "| `claude_code` |" in page.read_text()
    assert mod.main(["--check", "--tables-only"]) == 0


def test_an_example_marker_with_an_unknown_option_is_refused():
    with pytest.raises(SystemExit, match="unknown option 'colour'"):
        _module().parse_opts("fresh,colour")


def test_a_config_key_without_documentation_stops_the_generator(monkeypatch):
    mod = _module()
    doc = dict(mod.CONFIG_DOC)
    del doc["drift.window_size"]
    monkeypatch.setattr(mod, "CONFIG_DOC", doc)
    with pytest.raises(SystemExit, match=r"undocumented keys \['drift.window_size'\]"):
        mod.config_table()


def test_commands_are_shown_wrapped_at_80_columns():
    shown = _module().shown_command(["explain", "sample_logs/agent-overflow/shopcart-tiered-discounts.openai.json",
                                     "--model", "gemma-7b", "--fact", "Never modify files under tests/."])
    lines = shown.split("\n")
    assert lines[0] == "$ ctxf explain \\" and all(len(line) <= 80 for line in lines)
    assert "--model gemma-7b" in shown and "--fact 'Never modify files under tests/.'" in shown


def test_the_readme_is_short_and_its_links_land_on_pages():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    links = re.findall(r"\]\(((?:docs/)[^)#]+)(?:#[^)]*)?\)", readme)
    assert len(links) >= 15
    for link in links:
        assert (ROOT / link).is_file(), f"README links to {link}, which does not exist"
    for heading in ("## Two commands", "## Install", "## A five-command tour", "## Exit codes"):
        assert heading in readme


def test_every_page_is_in_the_navigation():
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]

    def pages(items):
        for item in items:
            for value in item.values():
                yield from (pages(value) if isinstance(value, list) else [value])

    listed = set(pages(nav))
    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert listed == on_disk


# What a browser loads from a page: scripts, styles, images, frames, fonts.
_LOADS = re.compile(r"<(?:script|img|iframe|source|audio|video|embed)\b[^>]*\ssrc=[\"']?((?:https?:)?//[^\"' >]+)"
                    r"|<link\b[^>]*\shref=[\"']?((?:https?:)?//[^\"' >]+)"
                    r"|@import\s+(?:url\()?[\"']?((?:https?:)?//[^\"')]+)"
                    r"|url\(\s*[\"']?((?:https?:)?//[^\"')]+)", re.I)


def test_the_site_builds_strict_and_offline(tmp_path):
    # its build time is not asserted (docs/development.md): a timed test flakes on a busy machine
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, r.stderr
    pages = list(site.rglob("*.html"))
    assert len(pages) >= 20 and (site / "api.html").is_file()
    assert "context_forensics.api.replay" in (site / "api.html").read_text()  # the reference from docstrings
    external = []
    for f in [*pages, *site.rglob("*.css")]:
        for m in _LOADS.finditer(f.read_text(errors="replace")):
            external.append(f"{f.relative_to(site)}: {next(g for g in m.groups() if g)}")
    assert not external, external
    assert not [f for f in site.rglob("*") if f.is_file() and b"fonts.googleapis" in f.read_bytes()]
