"""Storage faults, end to end through ``python -m emery``: a SQLite store truncated in the
middle or overwritten with garbage must make ``emery jobs list --store F`` print one
line, exit non-zero, print no traceback and leave the file as it was.

(The full disk at a step's commit and the server's 503 while the store is away are run
by ``tests/unit/test_store_full.py`` and ``tests/unit/test_server_store_away.py``.)

The store and the damage are the unit test's (``tests/unit/test_store_damaged.py``); this
adds a store whose header was zeroed and runs each case as a user would, in a process.

Usage: python benchmarks/reliability/storage_faults.py

Exits 1 when any case misses its expectation."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "unit"))

from test_store_damaged import digest, garbage, store_file, truncate


def _header(path: Path) -> None:
    with open(path, "r+b") as file:
        file.write(b"\0" * 100)


CASES: dict[str, Callable[[Path], None]] = {
    "truncated": truncate,
    "garbage": garbage,
    "header": _header,
}


def run_case(name: str, damage: Callable[[Path], None]) -> list[str]:
    with tempfile.TemporaryDirectory() as folder:
        path = store_file(Path(folder))
        damage(path)
        before = digest(path)
        done = subprocess.run(
            [sys.executable, "-m", "emery", "jobs", "list", "--store", str(path)],
            capture_output=True,
            text=True,
        )
        after = digest(path)
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
