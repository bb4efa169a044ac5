"""The throughput benchmark keeps every side's figures when one side stalls or fails: each
side runs under a deadline and a stall is a result (issue 19, #9)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "throughput"))

from sides import SideResult, run_side

FIGURES = 'print(\'{"rollouts": 30, "wall_s": 1.5, "cpu_s": 0.3}\')'


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_side_that_answers_gives_its_figures() -> None:
    result = run_side(python(FIGURES), deadline_s=30)
    assert result == SideResult("ok", rollouts=30, wall_s=1.5, cpu_s=0.3)
    assert result.rate_cell(limit=40) == "20 (0.50)"
    assert result.cpu_cell() == "10.00"


def test_a_stalled_side_is_killed_at_its_deadline_with_its_children() -> None:
    # The side starts a child that would outlive it; both must be gone at the deadline.
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    result = run_side(python(code), deadline_s=1.0)
    assert time.monotonic() - started < 10
    assert result.status == "stalled"
    assert result.rate_cell(limit=40) == "stalled (no result in 1 s)"
    assert result.cpu_cell() == "-"


def test_a_failing_side_is_a_result_too() -> None:
    crashed = run_side(python("raise SystemExit('peer broke')"), deadline_s=30)
    assert crashed.status == "failed"
    assert crashed.reason == "peer broke"
    silent = run_side(python("print('no figures')"), deadline_s=30)
    assert silent.status == "failed"
