"""Corpus cases: stores of other programs, damaged stores, empty job ids and settings that
are not finite numbers."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from cases import Case, job, train


def sqlite_file(*statements: str) -> bytes:
    """The bytes of a SQLite database made by ``statements``."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "made.db"
        db = sqlite3.connect(path)
        with db:
            for statement in statements:
                db.execute(statement)
        db.close()
        return path.read_bytes()


def _store(name: str, expect: str, content: bytes, command: list[str]) -> Case:
    return Case(
        f"store: {name}",
        [*command, "--store", "other.db"],
        expect,
        {"job.toml": job(), "other.db": content},
    )


def store_cases() -> list[Case]:
    """Databases that are not emery stores, and an emery store that is damaged."""
    foreign = sqlite_file(
        "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)",
        "INSERT INTO users (name) VALUES ('ada')",
    )
    with_jobs = sqlite_file("CREATE TABLE jobs (id INTEGER PRIMARY KEY, title TEXT)")
    bad_version = sqlite_file(
        "CREATE TABLE emery_meta (key VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL)",
        "INSERT INTO emery_meta VALUES ('schema_version', 'two')",
    )
    return [
        _store("another program's database", "not an emery store", foreign, ["train", "job.toml"]),
        _store("another program's jobs table", "not an emery store", with_jobs, ["jobs", "list"]),
        _store("schema version not a number", "not a number", bad_version, ["jobs", "list"]),
    ]


def id_cases() -> list[Case]:
    """Empty and blank job ids, which as prefixes would match every job."""
    return [
        Case(f"{' '.join(command)} {shown} job id", [*command, blank], "job id is empty")
        for command in (["jobs", "cancel"], ["jobs", "pause"], ["jobs", "show"], ["report"])
        for blank, shown in (("", "empty"), ("  ", "blank"))
    ]


def _setting(name: str, text: str) -> Case:
    return train(f"setting not finite: {name}", "finite number", text)


def setting_cases() -> list[Case]:
    """Bounded settings given ``inf`` or ``nan`` (a bound like ``gt=0`` lets inf through)."""
    rl = '[job]\ntype = "rl"\n[rl]\n'
    sft = '[job]\ntype = "sft"\n[sft]\n'
    return [
        _setting("rl learning_rate = inf", job(extra=rl + "learning_rate = inf\n")),
        _setting("rl temperature = inf", job(extra=rl + "temperature = inf\n")),
        _setting("rl beta = inf", job(extra=rl + "beta = inf\n")),
        _setting("sft learning_rate = inf", job(extra=sft + "learning_rate = inf\n")),
        _setting("runtime timeout_s = inf", job(extra="timeout_s = inf\n")),
        _setting("budget wall_time_s = inf", job(extra="[job.budget]\nwall_time_s = inf\n")),
        _setting("lm timeout_s = inf", job(lm="timeout_s = inf")),
    ]


def inputs_cases() -> list[Case]:
    """Every case of this file."""
    return [*store_cases(), *id_cases(), *setting_cases()]
