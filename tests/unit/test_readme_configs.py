"""Every TOML config the README and ``docs/`` show, and the packaged demo config, is a valid
job config; every Python block there compiles.

A fragment that holds only some sections is merged into a minimal complete config; keys a
comment offers beside a key (``# also: a, b``) are tried in its place.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from emery.algorithms.registry import ALGORITHM_MODULES, checked_settings, parse_settings
from emery.config import JobConfig
from emery.config.loading import parse_config
from emery.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
DEMO = REPO / "src" / "emery" / "demos" / "word_problems.toml"
MINIMAL: dict[str, Any] = {"dataset": {"task": "word_problems"}}
PLUGINS = REPO / "examples" / "custom_algorithm"
"""The plug-ins the docs name by ``module:attr`` (``docs/plugins.md``)."""

TOML_BLOCK = re.compile(r"^```toml\n(.*?)^```", re.MULTILINE | re.DOTALL)
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
SECTION = re.compile(r"^\[+([\w.]+)\]+")
ALSO = re.compile(r"^(\w+)\s*=\s*(.+?)\s*#.*?\balso:?\s+(.+)$")


def readme_blocks(pattern: re.Pattern[str] = TOML_BLOCK) -> list[str]:
    """The blocks ``pattern`` finds in the README, then in each page of ``docs/``."""
    return [block for page in PAGES for block in pattern.findall(page.read_text("utf-8"))]


def validate(data: dict[str, Any]) -> JobConfig:
    """``data`` (completed by ``MINIMAL``) as a job config, algorithm settings included."""
    config = parse_config({**MINIMAL, **data})
    checked_settings(config.job.algorithm, config.algorithm)
    for name in set(config.algorithm) & set(ALGORITHM_MODULES):
        parse_settings(name, config.algorithm[name])
    return config


@pytest.fixture(autouse=True)
def _plugins_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))


def alternatives(block: str) -> list[tuple[list[str], str, str, str]]:
    """``(section path, key, value, alternative key)`` for each ``# also:`` name."""
    found: list[tuple[list[str], str, str, str]] = []
    section: list[str] = []
    for line in block.splitlines():
        if header := SECTION.match(line):
            section = header.group(1).split(".")
        elif also := ALSO.match(line):
            key, value, names = also.groups()
            for name in re.findall(r"\b[a-z_]+\b", names.split(";")[0]):
                found.append((section, key, value, name))
    return found


def test_the_readme_shows_toml_configs() -> None:
    assert readme_blocks()


@pytest.mark.parametrize("block", readme_blocks())
def test_each_readme_config_is_valid(block: str) -> None:
    validate(tomllib.loads(block))


@pytest.mark.parametrize("block", readme_blocks())
def test_keys_a_readme_comment_offers_exist(block: str) -> None:
    unknown: list[str] = []
    for section, key, value, name in alternatives(block):
        data = tomllib.loads(block)
        table = data
        for part in section:
            table = table[part]
        del table[key]
        table[name] = tomllib.loads(f"v = {value}")["v"]
        try:
            validate(data)
        except ConfigError as exc:  # a value of the wrong type for this key is fine
            if "unknown key" in str(exc):
                unknown.append(f"[{'.'.join(section)}] {name}: {exc}")
    assert unknown == []


@pytest.mark.parametrize("block", readme_blocks(PYTHON_BLOCK))
def test_each_python_block_compiles(block: str) -> None:
    compile(block, "<docs>", "exec")


def test_the_docs_show_configs_and_code() -> None:
    assert len(readme_blocks()) > 10
    assert readme_blocks(PYTHON_BLOCK)


def test_the_demo_config_is_valid() -> None:
    config = validate(tomllib.loads(DEMO.read_text(encoding="utf-8")))
    assert config.job.algorithm == "mipro"


def test_an_unknown_key_fails() -> None:
    block = readme_blocks()[0]
    with pytest.raises(ConfigError, match=r"unknown key 'job\.budget\.lm_calls'"):
        validate(tomllib.loads(block.replace("[job.budget]\n", "[job.budget]\nlm_calls = 3\n")))
