"""A SQLite store truncated in the middle or overwritten with garbage is refused at open
with one line (``PRAGMA quick_check``), never read half-way; nothing is written to it."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from emery.cli.app import main
from emery.core.errors import StoreError
from emery.store import SQLiteStore, backends


def store_file(folder: Path) -> Path:
    """An emery store with enough pages that damage in its middle hits real data."""
    path = folder / "emery.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE filler (x TEXT)")
    conn.executemany("INSERT INTO filler VALUES (?)", [("x" * 1000,)] * 2000)
    conn.execute("CREATE INDEX filler_x ON filler (x)")
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


def truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def garbage(path: Path) -> None:
    with open(path, "r+b") as file:
        file.seek(path.stat().st_size // 3)
        file.write(bytes(range(256)) * 64)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def _fresh_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "_CHECKED", set())


@pytest.mark.parametrize("damage", [truncate, garbage], ids=["truncated", "garbage"])
def test_jobs_list_on_a_damaged_store_prints_one_line_and_writes_nothing(
    tmp_path: Path, damage: Callable[[Path], None], capsys: pytest.CaptureFixture[str]
) -> None:
    path = store_file(tmp_path)
    damage(path)
    before = digest(path)
    with pytest.raises(SystemExit) as exit_info:
        main(["jobs", "list", "--store", str(path)])
    assert exit_info.value.code not in (0, None)
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert f"the store {path} is damaged" in lines[0]
    assert "restore it from a backup" in lines[0]
    assert "Traceback" not in captured.err + captured.out
    assert digest(path) == before


def test_a_damaged_store_is_refused_when_opened_from_python(tmp_path: Path) -> None:
    path = store_file(tmp_path)
    garbage(path)
    with pytest.raises(StoreError, match="is damaged"):
        SQLiteStore(path)


def test_a_sound_store_is_checked_once_per_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = store_file(tmp_path)
    checks: list[Path] = []
    real = backends._quick_check

    def counted(conn: object, file: Path, url: str) -> None:
        checks.append(file)
        real(conn, file, url)

    monkeypatch.setattr(backends, "_quick_check", counted)
    SQLiteStore(path).close()
    SQLiteStore(path).close()
    assert len(checks) == 2  # asked twice, the PRAGMA run once
    assert {path.resolve()} == backends._CHECKED
