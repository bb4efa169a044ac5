"""Bad ``[job] objectives`` and ``select`` values (the costs a winner may be chosen by and
the rule that chooses it): each names the key and says what is valid."""

from __future__ import annotations

from cases import PROGRAM, Case, job, train


def _job(lines: str) -> str:
    return job(extra=f"[job]\n{lines}\n") + PROGRAM


def costfront_cases() -> list[Case]:
    """Every case of this file."""
    tokens = 'objectives = ["score", "tokens"]\n'
    return [
        train(
            "objectives unknown name",
            "job.objectives: unknown objective 'tokenz'",
            _job('objectives = ["score", "tokenz"]'),
        ),
        train(
            "objectives without the score",
            'job.objectives: the objectives must include "score"',
            _job('objectives = ["tokens"]'),
        ),
        train("objectives not a list", "job.objectives", _job('objectives = "tokens"')),
        train(
            "select unknown rule",
            "job.select: unknown rule 'cheapest'",
            _job('select = "cheapest"'),
        ),
        train(
            "select cheapest_within without a cost objective",
            "job.select: 'cheapest_within:0.02' needs a cost among the objectives",
            _job('select = "cheapest_within:0.02"'),
        ),
        train(
            "select cheapest_within margin not a number",
            "job.select: 'cheapest_within:two': expected a score margin",
            _job(tokens + 'select = "cheapest_within:two"'),
        ),
        train(
            "select cheapest_within margin above one",
            "job.select: 'cheapest_within:5': the margin is a score difference from 0 to 1",
            _job(tokens + 'select = "cheapest_within:5"'),
        ),
        train(
            "select budget unknown cost",
            "job.select: 'budget:dollars=1': write budget:<cost>=<limit>",
            _job('select = "budget:dollars=1"'),
        ),
        train(
            "select budget negative limit",
            "job.select: 'budget:tokens=-5': a limit cannot be negative",
            _job('select = "budget:tokens=-5"'),
        ),
    ]
