"""A store this user may not reach or write (issue 50, item 1): ``emery runner`` and every
other command that opens one end with one line naming the store and what is in the way
(a folder it may not enter, the file or folder it may not write), exit 2, and leave the
store as it was; never a PermissionError traceback."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from bad_input_support import one_error_line, run_cli
from sqlalchemy.exc import OperationalError

import emery.store.errors as store_errors_module
from emery.core.errors import StoreError
from emery.store import SQLiteStore
from emery.store.errors import store_errors

COMMANDS = {
    "runner": ["runner", "--idle-exit-s", "0"],
    "jobs list": ["jobs", "list"],
    "workers": ["workers"],
}


def a_store(folder: Path) -> Path:
    folder.mkdir()
    path = folder / "emery.db"
    SQLiteStore(path).close()
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("command", COMMANDS)
def test_a_store_in_a_folder_it_may_not_enter(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = a_store(tmp_path / "locked")
    stat = Path.stat

    def denied(self: Path, **kwargs: Any) -> os.stat_result:
        if "locked" in self.parts and self.name != "locked":
            raise PermissionError(13, "Permission denied", str(self))
        return stat(self, **kwargs)

    monkeypatch.setattr(Path, "stat", denied)  # what a folder without x permission does
    assert run_cli([*COMMANDS[command], "--store", str(path)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert f"the store {path} cannot be reached" in line
    assert f"may not enter its folder {path.parent}" in line


def readonly() -> OperationalError:
    orig = sqlite3.OperationalError("attempt to write a readonly database")
    return OperationalError("INSERT INTO workers ...", {}, orig)


def test_a_read_only_store_says_what_it_may_not_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = a_store(tmp_path / "ro")
    url = f"sqlite:///{path}"

    def access(denied: Path) -> Any:
        def check(target: Any, mode: int, **kwargs: Any) -> bool:
            return not (Path(target) == denied and mode & os.W_OK)

        return check

    monkeypatch.setattr(store_errors_module.os, "access", access(path.parent))
    with pytest.raises(StoreError) as folder, store_errors(url):
        raise readonly()
    assert str(folder.value) == (
        f"the store {path} is read-only: this user may not write its folder {path.parent},"
        " where SQLite keeps the store's -wal and -shm files (check the permissions)"
    )
    monkeypatch.setattr(store_errors_module.os, "access", access(path))
    with pytest.raises(StoreError, match=f"this user may not write {path} "), store_errors(url):
        raise readonly()
    monkeypatch.setattr(store_errors_module.os, "access", lambda *a, **k: True)
    with pytest.raises(StoreError, match="is read-only: emery must write to it"), store_errors(url):
        raise readonly()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes any file")
@pytest.mark.parametrize(
    ("mode", "expect"), [(0o600, "may not enter its folder"), (0o500, "may not write its folder")]
)
def test_a_runner_on_a_store_it_may_not_write(
    mode: int, expect: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = a_store(tmp_path / "locked")
    before = digest(path)
    os.chmod(path.parent, mode)
    try:
        assert run_cli(["runner", "--store", str(path), "--idle-exit-s", "0"]) == 2
    finally:
        os.chmod(path.parent, 0o755)
    assert expect in one_error_line(capsys.readouterr().err)
    assert digest(path) == before  # nothing written, nothing lost
