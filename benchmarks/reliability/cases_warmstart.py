"""Bad ``[job] warm_start`` settings: an unknown job, another system, an algorithm that
cannot start from one, a training job, no candidates. The case's store holds one
succeeded job named ``seed`` (the built-in word-problems program, stage ``solve``)."""

from __future__ import annotations

from cases import PROGRAM, Case, job, train


def _warm(section: str, system: str = "") -> str:
    return job(extra=system) + f"\n[job]\n{section}\n"


def warmstart_cases() -> list[Case]:
    """Each ends with one error line naming job.warm_start (or the setting); no job is
    stored."""
    return [
        train(
            "warm_start: unknown job",
            "job.warm_start: no job 'j-nothing'",
            _warm('algorithm = "gepa"\nwarm_start = "j-nothing"'),
        ),
        train(
            "warm_start: another system",
            "optimized the components solve, this system has answer",
            _warm('algorithm = "gepa"\nwarm_start = "seed"', PROGRAM),
        ),
        train(
            "warm_start: the baseline",
            "algorithm 'baseline' cannot start from an earlier job's candidates",
            _warm('warm_start = "seed"'),
        ),
        train(
            "warm_start: no candidates wanted",
            "warm_start_candidates",
            _warm('algorithm = "gepa"\nwarm_start = "seed"\nwarm_start_candidates = 0'),
        ),
        train(
            "warm_start: an sft job",
            "warm_start seeds a prompt search",
            _warm('type = "sft"\nwarm_start = "seed"') + '\n[sft]\ndata = "chat.jsonl"\n',
        ),
    ]
