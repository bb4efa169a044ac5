"""Corpus cases: emery init on bad data, and config overrides on the command line."""

from __future__ import annotations

from cases import Case, job

ROW = '{"question": "1+1?", "answer": 2}\n'


def cliinit_cases() -> list[Case]:
    """emery init, --set, --dataset and --env-file given something they cannot use."""
    config = {"job.toml": job()}
    return [
        Case("init data missing", ["init", "none.jsonl"], "data file not found"),
        Case("init data empty", ["init", "rows.jsonl"], "no rows", {"rows.jsonl": ""}),
        Case(
            "init data bad line",
            ["init", "rows.jsonl"],
            "invalid json",
            {"rows.jsonl": ROW + "{oops\n"},
        ),
        Case("init data one column", ["init", "rows.csv"], "gold output", {"rows.csv": "q\n1\n"}),
        Case("init unknown task", ["init", "chess"], "unknown built-in task"),
        Case(
            "init output exists",
            ["init", "rows.jsonl"],
            "--force",
            {"rows.jsonl": ROW, "emery.toml": "# mine\n"},
        ),
        Case("set without value", ["train", "job.toml", "--set", "job.name"], "KEY=VALUE", config),
        Case(
            "set unknown key",
            ["train", "job.toml", "--set", "job.bugdet.metric_calls=5"],
            "did you mean 'budget'",
            config,
        ),
        Case(
            "set bad value",
            ["train", "job.toml", "--set", "job.budget.metric_calls=lots"],
            "job.budget.metric_calls",
            config,
        ),
        Case(
            "dataset option missing file",
            ["eval", "job.toml", "--dataset", "none.csv"],
            "data file not found",
            config,
        ),
        Case(
            "env file missing",
            ["train", "job.toml", "--env-file", "keys.env"],
            "file not found",
            config,
        ),
        Case(
            "env file bad line",
            ["train", "job.toml"],
            ".env:1",
            {**config, ".env": "OPENAI_API_KEY sk-1\n"},
        ),
    ]
