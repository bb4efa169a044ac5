"""Bad ``source_job`` settings of SFT and RL jobs (a training job on an earlier prompt
job's best prompt, issue 35): an unknown job, a job that optimized another system. The
case's store holds one succeeded prompt job named ``seed`` (the built-in word-problems
program, stage ``solve``); each ends with one error line naming the setting and stores
no job."""

from __future__ import annotations

from cases import PROGRAM, Case, job, train

MODEL = "local/smollm2-135m"
"""Training tunes a local model (not pulled in a case's folder: the checks come first)."""


def _training(kind: str, source: str, system: str = "") -> str:
    return (
        job(model=MODEL, extra=system)
        + f'\n[job]\ntype = "{kind}"\n\n[{kind}]\nsource_job = "{source}"\n'
    )


def together_cases() -> list[Case]:
    """Each names ``sft.source_job`` or ``rl.source_job`` and what is wrong with it."""
    cases = []
    for kind in ("sft", "rl"):
        cases += [
            train(
                f"{kind} source_job: unknown job",
                f"{kind}.source_job: no job 'j-nothing'",
                _training(kind, "j-nothing"),
            ),
            train(
                f"{kind} source_job: another system",
                "optimized the components solve, this job's system has answer",
                _training(kind, "seed", PROGRAM),
            ),
        ]
    return cases
