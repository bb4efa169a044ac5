"""Configs and names that ``emery train`` and ``POST /api/jobs`` share and no store can
hold: data nested hundreds of levels deep in a section no schema reads, and job names that
are not valid unicode."""

from __future__ import annotations

import json

from cases import SCRIPTED, Case, job, train

DEPTH = 300
"""Past what pydantic writes (about 250 levels), far inside what JSON and TOML read."""


def _json_job(**top: object) -> str:
    """A job config as JSON, with ``top`` as more top-level tables."""
    data = {
        "dataset": {"task": "word_problems", "n_train": 1, "n_val": 1, "n_test": 1},
        "lm": {"task": {"model": SCRIPTED}},
        "runtime": {"workdir": "work"},
        **top,
    }
    return json.dumps(data)


def server_cases() -> list[Case]:
    """Deep nesting in another algorithm's settings (JSON and TOML), a lone surrogate in
    ``job.name`` (a ``\\ud800`` JSON escape) and in ``--name`` (a byte that is not UTF-8)."""
    deep_json = "{" + '"a": {' * DEPTH + '"leaf": 1' + "}" * (DEPTH + 1)
    deep_toml = "{a = " * DEPTH + "1" + "}" * DEPTH
    return [
        train(
            "server: JSON config nested 300 deep",
            "nested over 64 levels",
            _json_job(algorithm={"gepa": "DEEP"}).replace('"DEEP"', deep_json),
            "job.json",
        ),
        train(
            "server: TOML config nested 300 deep",
            "nested over 64 levels",
            job(extra=f"[algorithm.gepa]\nextra = {deep_toml}\n"),
        ),
        train(
            "server: lone surrogate in job.name",
            "job.name is not valid unicode",
            _json_job(job={"name": "NAME"}).replace('"NAME"', '"x\\ud800"'),
            "job.json",
        ),
        Case(
            "server: --name not UTF-8",
            ["train", "job.toml", "--name", "run-\udcff"],
            "the job name is not valid unicode",
            {"job.toml": job()},
        ),
    ]
