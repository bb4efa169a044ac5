"""Bad ``proposals_per_step`` values of GEPA and APO (children proposed per step)."""

from __future__ import annotations

from cases import PROGRAM, Case, job, train


def _setting(algorithm: str, value: str) -> str:
    return (
        job(
            extra=f'[job]\nalgorithm = "{algorithm}"\n[algorithm.{algorithm}]\n'
            f"proposals_per_step = {value}\n"
        )
        + PROGRAM
    )


def parallel_cases() -> list[Case]:
    """Every case of this file."""
    return [
        train("gepa proposals_per_step zero", "proposals_per_step", _setting("gepa", "0")),
        train("apo proposals_per_step negative", "proposals_per_step", _setting("apo", "-2")),
        train("gepa proposals_per_step text", "proposals_per_step", _setting("gepa", '"four"')),
    ]
