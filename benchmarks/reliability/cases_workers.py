"""Bad input to ``emery runner`` and to the code harness's workers."""

from __future__ import annotations

from cases import Case, job, train

NOT_A_FACTORY = '[system]\nkind = "code_harness"\nenvironment = "json:loads"\n'


def workers_cases() -> list[Case]:
    """A runner on a store that is not there; an environment that is a plain function."""
    return [
        Case(
            "runner: store not there",
            ["runner", "--store", "typo/emery.db", "--idle-exit-s", "0"],
            "no store at typo/emery.db",
        ),
        Case(
            "runner: sqlite URL not there",
            ["runner", "--store", "sqlite:///typo.db", "--idle-exit-s", "0"],
            "no store at typo.db",
        ),
        train(
            "harness: environment is not a factory",
            "not an environment class or factory",
            job() + NOT_A_FACTORY,
        ),
    ]
