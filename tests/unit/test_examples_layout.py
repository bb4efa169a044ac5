"""Every example under ``examples/`` is a folder with a README.md and a valid job.toml."""

from __future__ import annotations

from pathlib import Path

import pytest
from examples_support import EXAMPLES

from emery.config.loading import load_config

FOLDERS = sorted(p for p in EXAMPLES.iterdir() if p.is_dir() and not p.name.startswith("."))


def test_the_examples_are_there() -> None:
    names = {p.name for p in FOLDERS}
    assert {"classification", "harness_agent", "langgraph_agent", "rag_rubric"} <= names


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_an_example_has_a_readme_and_a_valid_job(folder: Path) -> None:
    readme = folder / "README.md"
    assert readme.is_file()
    assert readme.read_text(encoding="utf-8").startswith("# ")
    config = load_config(folder / "job.toml")
    assert config.job.name
