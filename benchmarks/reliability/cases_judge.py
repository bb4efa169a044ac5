"""Bad ``[verifier] scoring`` values (how a rubric or contrastive judge scores: its JSON
verdict or its probability of Yes): each names the key and says what is valid."""

from __future__ import annotations

from cases import PROGRAM, Case, job, train

RUBRIC = '[verifier]\nkind = "rubric"\n{scoring}\n[[verifier.criteria]]\nname = "correct"\n'


def _job(verifier: str) -> str:
    return job(extra=verifier) + PROGRAM


def judge_cases() -> list[Case]:
    """Every case of this file."""
    return [
        train(
            "judge scoring unknown",
            "verifier.scoring: unknown judge scoring 'probs'; known judge scorings: json, logprobs",
            _job(RUBRIC.format(scoring='scoring = "probs"')),
        ),
        train(
            "judge scoring not a string",
            "verifier.scoring: Input should be a valid string",
            _job(RUBRIC.format(scoring="scoring = 1")),
        ),
        train(
            "contrastive scoring unknown",
            "verifier.scoring: unknown judge scoring 'grade'; known judge scorings: json, logprobs",
            _job('[verifier]\nkind = "contrastive"\nscoring = "grade"\n'),
        ),
        train(
            "preference judge has no scoring",
            "verifier.scoring",
            _job('[verifier]\nkind = "preference"\nscoring = "logprobs"\n'),
        ),
    ]
