"""Corpus cases: dataset files, and command-line flags and stores."""

from __future__ import annotations

from cases import PROGRAM, Case, data, job

ROW = '{"id": "a", "input": {"question": "1+1?"}, "expected": "2"}\n'


def dataset_cases() -> list[Case]:
    """Dataset files a user can get wrong."""
    return [
        Case(
            "dataset missing",
            ["train", "job.toml"],
            "not found",
            {"job.toml": job('path = "none.jsonl"') + PROGRAM},
        ),
        Case(
            "dataset a folder",
            ["train", "job.toml"],
            "not found",
            {"job.toml": job('path = "rows.jsonl"') + PROGRAM, "rows.jsonl/x": ""},
        ),
        data("dataset unknown format", "unknown dataset format", "rows.txt", ROW),
        data("dataset empty", "no rows", "rows.jsonl", ""),
        data("JSONL invalid line", "invalid json", "rows.jsonl", ROW + "{oops\n"),
        data("JSONL line not an object", "json object", "rows.jsonl", "[1, 2]\n"),
        data("JSONL not UTF-8", "not utf-8", "rows.jsonl", b'{"id": "\xff"}\n'),
        data("JSONL binary", "not utf-8", "rows.jsonl", bytes(range(256))),
        data("CSV not UTF-8", "not utf-8", "rows.csv", b"id,question\na,\xe9t\xe9\n"),
        data("CSV extra values", "more values", "rows.csv", "id,question\na,b,c\n"),
        data("CSV empty", "no rows", "rows.csv", ""),
        data("CSV without an expected column", "expected value", "rows.csv", "id,question\na,b\n"),
        data("JSON dataset not UTF-8", "not utf-8", "rows.json", b'[{"id": "\xff"}]'),
        data("JSON dataset invalid", "invalid json", "rows.json", "[{"),
        data("JSON dataset a number", "list of rows", "rows.json", "42"),
        data(
            "JSON dataset nested too deeply",
            "nested too deeply",
            "rows.json",
            "[" * 100_000 + "]" * 100_000,
        ),
        data("duplicate ids", "repeats", "rows.jsonl", ROW + ROW),
        data("row input not an object", "input", "rows.jsonl", '{"id": "a", "input": 5}\n'),
        data(
            "unknown split",
            "split",
            "rows.jsonl",
            '{"id": "a", "input": {"q": 1}, "split": "holdout"}\n',
        ),
        Case(
            "dataset unreadable",
            ["train", "job.toml"],
            "permission denied",
            {"job.toml": data("", "", "rows.jsonl", ROW).files["job.toml"], "rows.jsonl": ROW},
            {"rows.jsonl": 0},
        ),
    ]


def _store(
    name: str, expect: str, location: str, files: dict[str, str | bytes] | None = None
) -> Case:
    return Case(
        f"store: {name}",
        ["train", "job.toml", "--store", location],
        expect,
        {"job.toml": job(), **(files or {})},
    )


def flag_cases() -> list[Case]:
    """Stores and flags a user can get wrong."""
    return [
        _store("not SQLite", "not an emery store", "junk.db", {"junk.db": "hello\n"}),
        _store("in /proc", "cannot be opened", "/proc/emery.db"),
        _store("folder in /proc", "cannot create the store's folder", "/proc/none/emery.db"),
        _store("a folder", "is a folder", "."),
        _store("file in the way", "a file is in the way", "job.toml/emery.db"),
        _store("PostgreSQL not listening", "cannot connect", "postgresql://u@127.0.0.1:1/db"),
        _store("PostgreSQL bad port", "invalid store url", "postgresql://u@127.0.0.1:port/db"),
        _store("unknown scheme", "unknown store", "mysql://u@h/db"),
        _store("read-only (URI)", "read-only", "sqlite:///file:{store}?mode=ro&uri=true"),
        Case(
            "store: read-only file",
            ["jobs", "list", "--store", "ro/emery.db"],
            "read-only",
            {"ro/emery.db": b""},
            {"ro/emery.db": 0o444, "ro": 0o555},
        ),
        Case(
            "bad --stream-format",
            ["train", "job.toml", "--stream-format", "fancy"],
            "stream-format",
            {"job.toml": job()},
        ),
        Case(
            "negative --poll-timeout",
            ["train", "job.toml", "--poll-timeout", "-1"],
            "poll-timeout",
            {"job.toml": job()},
        ),
        Case(
            "unknown flag", ["train", "job.toml", "--fast"], "no such option", {"job.toml": job()}
        ),
        Case("jobs show unknown job", ["jobs", "show", "j-nope"], "j-nope"),
        Case("jobs resume unknown job", ["jobs", "resume", "j-nope"], "j-nope"),
        Case("jobs pause unknown job", ["jobs", "pause", "j-nope"], "j-nope"),
        Case("jobs cancel unknown job", ["jobs", "cancel", "j-nope"], "j-nope"),
        Case("jobs events unknown job", ["jobs", "events", "j-nope"], "j-nope"),
        Case("candidates unknown job", ["candidates", "j-nope"], "j-nope"),
        Case("report unknown job", ["report", "j-nope"], "j-nope"),
        Case("export unknown job", ["export", "j-nope"], "j-nope"),
        Case("eval unknown task", ["eval", "--task", "chess"], "chess"),
        Case("eval no config", ["eval"], "config"),
        Case("train no config here", ["train"], "no config"),
        Case("models pull unknown", ["models", "pull", "gpt-9"], "gpt-9"),
        Case(
            "serve on 0.0.0.0 without a key", ["proxy", "--host", "0.0.0.0"], "without an api key"
        ),
        Case(
            "taskapp on 0.0.0.0 without a key",
            ["taskapp", "serve", "scripted_lm:answer_lm", "--host", "0.0.0.0"],
            "without an api key",
        ),
        Case("serve bad port", ["proxy", "--port", "70000"], "port"),
    ]
