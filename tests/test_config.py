"""Config lookup order and validation errors that name the file, key and allowed values."""

from __future__ import annotations

import pytest

from context_forensics.config.settings import STRATEGIES, TOKENIZERS, Config, load_config
from context_forensics.errors import ConfigError, ExitCode

REPO_CONFIG = __import__("pathlib").Path(__file__).parent.parent / "forensics_config.yaml"


def write(tmp_path, text, name="c.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_repo_config_is_valid():
    cfg = load_config(REPO_CONFIG)
    assert cfg.model_mappings["gpt-4o"].context_limit == 128000
    assert cfg.storage.path is None  # the store is found (config/location.py), not pinned to the working folder


def test_template_shape_is_accepted(tmp_path):
    p = write(tmp_path, """
model_mappings:
  gpt-4:
    tokenizer: cl100k_base
    context_limit: 8192
    eviction_strategy: left_truncation
    preserve_system: true
analysis_thresholds:
  fact_presence_cosine: 0.7
  divergence_cosine: 0.8
  min_context_utilization_alert: 0.85
storage:
  type: sqlite
  path: ./x.db
  max_sessions: 10
embedding:
  model: all-MiniLM-L6-v2
  cache_enabled: false
  cache_ttl_hours: 24
""")
    cfg = load_config(p)
    m = cfg.model_mappings["gpt-4"]
    assert (m.tokenizer, m.context_limit, m.eviction_strategy) == ("cl100k_base", 8192, "left_truncation")
    assert cfg.analysis_thresholds.fact_presence_cosine == 0.7
    assert cfg.storage.max_sessions == 10
    assert cfg.embedding.cache_enabled is False and cfg.embedding.cache_ttl_hours == 24


@pytest.mark.parametrize(
    "text, where, needle",
    [
        ("storage:\n  max_sesions: 3\n", "storage.max_sesions", "allowed keys: type, path, max_sessions"),
        ("bogus: 1\n", "bogus", "allowed keys: model_mappings"),
        ("model_mappings:\n  m:\n    tokenizer: nope\n", "model_mappings.m.tokenizer", ", ".join(TOKENIZERS)),
        ("model_mappings:\n  m:\n    eviction_strategy: drop\n", "model_mappings.m.eviction_strategy",
         ", ".join(STRATEGIES)),
        ("model_mappings:\n  m:\n    context_limit: -5\n", "model_mappings.m.context_limit", "must be ≥ 1"),
        ("model_mappings:\n  m:\n    context_limit: lots\n", "model_mappings.m.context_limit", "must be an integer"),
        ("model_mappings:\n  m:\n    context_limit: 100\n    reserved_output: 100\n",
         "model_mappings.m.reserved_output", "must be below context_limit"),
        ("analysis_thresholds:\n  divergence_cosine: 1.5\n", "analysis_thresholds.divergence_cosine",
         "between 0.0 and 1.0"),
        ("storage:\n  type: postgres\n", "storage.type", "allowed: sqlite"),
        ("embedding:\n  cache_enabled: maybe\n", "embedding.cache_enabled", "true or false"),
        ("model_mappings: [1, 2]\n", "model_mappings", "must be a mapping"),
    ],
)
def test_invalid_values_name_file_key_and_fix(tmp_path, text, where, needle):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    last = where.rsplit(".", 1)[-1]  # the line the key is on (issue 34: config errors give the line)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.strip().startswith(f"{last}:"))
    assert f"{p}:{line}: {where}" in msg
    assert needle in msg
    assert e.value.exit_code == ExitCode.USAGE


def test_yaml_syntax_error_has_line_and_column(tmp_path):
    p = write(tmp_path, "storage:\n  path: [unclosed\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert f"{p}:3:1" in str(e.value) and "invalid YAML" in str(e.value)


def test_lookup_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CTXF_CONFIG", raising=False)
    assert load_config().source == Config().source  # built-in defaults
    write(tmp_path, "storage:\n  max_sessions: 1\n", "forensics_config.yaml")
    assert load_config().storage.max_sessions == 1  # ./forensics_config.yaml
    env = write(tmp_path, "storage:\n  max_sessions: 2\n", "env.yaml")
    monkeypatch.setenv("CTXF_CONFIG", str(env))
    assert load_config().storage.max_sessions == 2  # $CTXF_CONFIG beats ./
    explicit = write(tmp_path, "storage:\n  max_sessions: 3\n", "explicit.yaml")
    assert load_config(explicit).storage.max_sessions == 3  # --config beats all
    monkeypatch.setenv("CTXF_CONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match="CTXF_CONFIG"):
        load_config()


def test_empty_file_means_defaults(tmp_path):
    assert load_config(write(tmp_path, "")).storage == Config().storage


# issue 31: a repeated key (at any depth) passed `ctxf config check` and the second silently won.
@pytest.mark.parametrize("text, key, lines", [
    ("storage:\n  path: ./a.db\nmodel_mappings: {}\nstorage:\n  path: ./b.db\n", "storage", (1, 4)),
    ("storage:\n  path: ./a.db\n  type: sqlite\n  path: ./b.db\n", "path", (2, 4)),
    ("model_mappings:\n  gpt-4:\n    context_limit: 8192\n    context_limit: 4096\n", "context_limit", (3, 4)),
    ("storage: {path: ./a.db, path: ./b.db}\n", "path", (1, 1)),
])
def test_duplicate_key_is_an_error_naming_key_and_both_lines(tmp_path, text, key, lines):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert f"duplicate key {key!r}" in msg and f"lines {lines[0]} and {lines[1]}" in msg
    assert msg.startswith(f"{p}:{lines[1]}:")
    assert e.value.exit_code == ExitCode.USAGE


def test_config_check_refuses_a_duplicate_block(tmp_path):
    from typer.testing import CliRunner

    from context_forensics.cli import app

    p = write(tmp_path, "storage:\n  path: ./a.db\nstorage:\n  path: ./b.db\n")
    r = CliRunner().invoke(app, ["config", "check", "--config", str(p)])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "duplicate key 'storage'" in r.output and "lines 1 and 3" in r.output


def test_merge_key_may_still_be_overridden(tmp_path):
    # `<<: *base` then an explicit key is YAML's way to override, not a duplicate
    p = write(tmp_path, "model_mappings:\n  a: &base\n    context_limit: 8192\n    tokenizer: cl100k_base\n"
                        "  b:\n    <<: *base\n    context_limit: 4096\n")
    cfg = load_config(p)
    assert cfg.model_mappings["b"].context_limit == 4096 and cfg.model_mappings["a"].context_limit == 8192


def test_a_policy_param_is_read_strictly_and_a_bad_one_is_a_usage_error():
    from context_forensics.cli.common import parse_params
    from context_forensics.errors import UsageError

    assert parse_params(["keep=3", "exclude_tools=[a, b]"]) == {"keep": 3, "exclude_tools": ["a", "b"]}
    with pytest.raises(UsageError, match=r"duplicate key 'a'"):
        parse_params(["keep={a: 1, a: 2}"])
    with pytest.raises(UsageError, match=r"--param 'keep=\[1': invalid YAML value"):
        parse_params(["keep=[1"])  # before: yaml's own error, an internal error


def test_a_key_path_is_found_on_its_line_a_dotted_key_whole_else_its_nearest_parent():
    from context_forensics.config.strict_yaml import key_line

    text = "model_mappings:\n  gpt-4.1-mini:\n    base: gpt-4o\n    context_limit: 9\naudit:\n  rules: {x: 1}\n"
    assert key_line(text, "model_mappings.gpt-4.1-mini.context_limit") == 4
    assert key_line(text, "model_mappings.gpt-4.1-mini.nope") == 2  # not there: its parent's line
    assert key_line(text, "audit.rules.x") == 6  # a flow mapping's key, on its line
    assert key_line(text, "storage.path") is None and key_line("a: [", "a") is None
