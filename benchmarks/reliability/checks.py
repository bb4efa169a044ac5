"""Set up a corpus case in a folder, and check how it ended: one ``error:`` line last on
stderr, no traceback, a non-zero exit, and the store intact."""

from __future__ import annotations

import os
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from cases import SCRIPTED, Case, job

LIVE_STATES = ("created", "queued", "running")


@dataclass(frozen=True)
class Outcome:
    """How one case ended and what was wrong with it (nothing: it passed)."""

    case: Case
    code: int
    error_line: str
    problems: list[str]


def seed_config(folder: Path) -> Path:
    """The config of the job every case's store holds before the case runs."""
    path = folder / "seed.toml"
    path.write_text(job(model=SCRIPTED).replace('workdir = "work"', f'workdir = "{folder}/w"'))
    return path


def checkpoint(store: Path) -> None:
    """Fold the write-ahead log into the store file, so a copy of the file is complete."""
    with sqlite3.connect(store) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def store_rows(path: Path) -> list[tuple[str, str]]:
    """(job id, state) of each job; raises AssertionError unless the integrity check passes."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        verdict = db.execute("PRAGMA integrity_check").fetchone()
        if verdict != ("ok",):
            raise AssertionError(f"integrity_check: {verdict}")
        return sorted(db.execute("SELECT id, state FROM jobs").fetchall())


def prepare(case: Case, folder: Path, template: Path) -> tuple[Path, list[str]]:
    """Write the case's files and a copy of the seeded store; its store path and args."""
    folder.mkdir(parents=True, exist_ok=True)
    store = folder / "store" / "emery.db"
    store.parent.mkdir()
    shutil.copy(template, store)
    for name, content in case.files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    for name, mode in sorted(case.modes.items(), key=lambda item: -len(item[0])):
        os.chmod(folder / name, mode)
    return store, [arg.replace("{store}", str(store)) for arg in case.args]


def restore_modes(case: Case, folder: Path) -> None:
    """Undo ``case.modes`` so the folder can be removed."""
    for name in case.modes:
        os.chmod(folder / name, 0o755)


def check(
    case: Case, code: int, stderr: str, store: Path, before: list[tuple[str, str]]
) -> Outcome:
    """What went wrong with a finished case, if anything."""
    problems = []
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.lower().startswith("error:")]
    if code == 0:
        problems.append("exit code 0")
    if "Traceback" in stderr:
        problems.append("traceback")
    if len(errors) != 1 or lines[-1] != errors[0]:
        problems.append(f"not one error line last: {lines[-3:]}")
    elif case.expect.lower() not in errors[0].lower():
        problems.append(f"expected {case.expect!r}")
    try:
        after = store_rows(store)
    except (AssertionError, sqlite3.Error) as exc:
        problems.append(f"store: {exc}")
    else:
        if not set(before) <= set(after):
            problems.append("store: a job changed or vanished")
        live = [state for _, state in after if state in LIVE_STATES]
        if live:
            problems.append(f"store: a job left {live[0]}")
    return Outcome(case, code, errors[0] if errors else "", problems)
