"""Helpers for the bad-input tests: run the CLI in-process, check the one-line error and
that the store survived."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from emery.cli.app import main

RELIABILITY = Path(__file__).resolve().parents[2] / "benchmarks" / "reliability"
if str(RELIABILITY) not in sys.path:
    sys.path.insert(0, str(RELIABILITY))

JOB = """
[dataset]
task = "word_problems"
n_train = 1
n_val = 1
n_test = 1

[lm.task]
model = "{model}"

[runtime]
workdir = "{workdir}"
"""


def run_cli(args: list[str]) -> int:
    """``emery ARGS`` in this process; its exit code."""
    with pytest.raises(SystemExit) as info:
        main(args)
    code = info.value.code
    return code if isinstance(code, int) else (0 if code is None else 1)


def job_config(
    folder: Path,
    model: str = "python/scripted_lm:answer_lm",
    *,
    name: str = "job",
    workdir: str = "work",
) -> Path:
    """A tiny word-problem job config in ``folder`` using ``model``."""
    path = folder / f"{name}.toml"
    path.write_text(JOB.format(model=model, workdir=(folder / workdir).as_posix()))
    return path


def one_error_line(stderr: str) -> str:
    """The single ``error:`` line, last on stderr, with no traceback (else fails)."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    errors = [line for line in lines if line.lower().startswith("error:")]
    assert len(errors) == 1, stderr
    assert lines[-1] == errors[0], stderr
    return errors[0]


def store_jobs(path: Path) -> list[tuple[str, str]]:
    """(job id, state) of every job in the SQLite store at ``path``, after checking that
    ``PRAGMA integrity_check`` passes."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return sorted(db.execute("SELECT id, state FROM jobs").fetchall())
