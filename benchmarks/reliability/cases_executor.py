"""Bad executor names: ``[runtime] executor`` that names no built-in executor, or a
``module:attr`` that cannot be imported or is not an ``ExecutorKind``."""

from __future__ import annotations

from cases import Case, job, train


def _executor(name: str) -> str:
    return job(extra=f'executor = "{name}"\n')


def executor_cases() -> list[Case]:
    """Every case of this file: each is refused before its job is stored."""
    return [
        train(
            "executor name unknown",
            "runtime.executor: unknown executor 'rey'; known executors: local, ray, runners",
            _executor("rey"),
        ),
        train(
            "executor module missing",
            "runtime.executor: cannot import module 'no_such_executors'",
            _executor("no_such_executors:EXECUTOR"),
        ),
        train(
            "executor module fails on import",
            "runtime.executor: importing module 'raises_on_import' failed",
            _executor("raises_on_import:EXECUTOR"),
        ),
        train(
            "executor reference not an executor kind",
            "is a function; expected ExecutorKind",
            _executor("scripted_lm:answer_lm"),
        ),
    ]
