"""Bad ``failure_share`` values of GEPA (the share of a reflection's minibatch drawn from
the parent's failures)."""

from __future__ import annotations

from cases import PROGRAM, Case, job, train


def _setting(value: str) -> str:
    return (
        job(extra=f'[job]\nalgorithm = "gepa"\n[algorithm.gepa]\nfailure_share = {value}\n')
        + PROGRAM
    )


def failaware_cases() -> list[Case]:
    """Every case of this file."""
    return [
        train("gepa failure_share above one", "failure_share", _setting("1.5")),
        train("gepa failure_share negative", "failure_share", _setting("-0.5")),
        train("gepa failure_share text", "failure_share", _setting('"half"')),
        train("gepa failure_share nan", "failure_share", _setting("nan")),
    ]
