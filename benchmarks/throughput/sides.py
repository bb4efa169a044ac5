"""Run one side of the throughput benchmark in its own process, under a deadline: a side
that stalls or fails becomes a result row, so the other sides' figures are kept."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SideResult:
    """How one side did at one concurrency: ``ok`` with its figures, ``stalled`` (killed at
    the deadline) or ``failed`` (a non-zero exit or no figures), with a reason."""

    status: str
    rollouts: float = 0.0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    reason: str = ""

    @property
    def rate(self) -> float:
        return self.rollouts / self.wall_s if self.status == "ok" and self.wall_s else 0.0

    def rate_cell(self, limit: float) -> str:
        """The table cell for the rate: ``R (ratio)``, or what went wrong."""
        if self.status == "ok":
            return f"{self.rate:.0f} ({self.rate / limit:.2f})"
        return f"{self.status} ({self.reason})"

    def cpu_cell(self) -> str:
        return f"{1000 * self.cpu_s / self.rollouts:.2f}" if self.status == "ok" else "-"


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


def run_side(command: list[str], deadline_s: float, *, cwd: Path | None = None) -> SideResult:
    """Run ``command`` (printing a JSON line ``{"rollouts", "wall_s", "cpu_s"}`` last) for
    at most ``deadline_s`` seconds, killing its whole process group if it overruns."""
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        start_new_session=True,  # the side and any children it starts die together
    )
    try:
        stdout, stderr = process.communicate(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        return SideResult("stalled", wall_s=deadline_s, reason=f"no result in {deadline_s:.0f} s")
    if process.returncode != 0:
        last = (stderr.strip().splitlines() or [f"exit {process.returncode}"])[-1]
        return SideResult("failed", reason=last[:200])
    try:
        figures = json.loads(stdout.strip().splitlines()[-1])
        return SideResult(
            "ok",
            rollouts=float(figures["rollouts"]),
            wall_s=float(figures["wall_s"]),
            cpu_s=float(figures["cpu_s"]),
        )
    except (IndexError, KeyError, TypeError, ValueError):
        return SideResult("failed", reason="no JSON figures on its last line")
