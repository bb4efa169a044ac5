"""Storage faults, end to end through ``python -m emery``: a SQLite store truncated in the
middle or overwritten with garbage must make ``emery jobs list --store F`` print one
line, exit non-zero, print no traceback and leave the file as it was.

(The full disk at a step's commit and the server's 503 while the store is away are run
by ``tests/unit/test_store_full.py`` and ``tests/unit/test_server_store_away.py``.)

Usage: python benchmarks/reliability/storage_faults.py

Exits 1 when any case misses its expectation."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path


def _store(folder: Path) -> Path:
    path = folder / "emery.db"
    done = subprocess.run(
        [sys.executable, "-m", "emery", "jobs", "list", "--store", str(path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE filler (x TEXT)")
    conn.executemany("INSERT INTO filler VALUES (?)", [("x" * 1000,)] * 2000)
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


def _truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def _garbage(path: Path) -> None:
    with open(path, "r+b") as file:
        file.seek(path.stat().st_size // 3)
        file.write(bytes(range(256)) * 64)


def _header(path: Path) -> None:
    with open(path, "r+b") as file:
        file.write(b"\0" * 100)


CASES: dict[str, Callable[[Path], None]] = {
    "truncated": _truncate,
    "garbage": _garbage,
    "header": _header,
}


def run_case(name: str, damage: Callable[[Path], None]) -> list[str]:
    with tempfile.TemporaryDirectory() as folder:
        path = _store(Path(folder))
        damage(path)
        before = hashlib.sha256(path.read_bytes()).hexdigest()
        done = subprocess.run(
            [sys.executable, "-m", "emery", "jobs", "list", "--store", str(path)],
            capture_output=True,
            text=True,
        )
        after = hashlib.sha256(path.read_bytes()).hexdigest()
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    problems = []
    if done.returncode == 0:
        problems.append("exit 0")
    if len(lines) != 1:
        problems.append(f"{len(lines)} error lines")
    if "Traceback" in done.stderr + done.stdout:
        problems.append("a traceback")
    if before != after:
        problems.append("the file changed")
    shown = lines[0] if lines else "-"
    print(f"{name:10} exit {done.returncode}  {problems or 'ok'}  {shown}")
    return problems


def main() -> int:
    failed = [name for name, damage in CASES.items() if run_case(name, damage)]
    print(f"{len(CASES) - len(failed)} of {len(CASES)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
