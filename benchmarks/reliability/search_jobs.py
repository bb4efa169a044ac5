"""Search jobs for the kill and fault suites: a small word-problems config per algorithm
with the scripted models, ``python -m emery`` as a subprocess, and the part of a finished
job's result that must not depend on interruptions (what ``outcome`` returns)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from scripted_lm import CALL_LOG_ENV, DELAY_ENV

HERE = Path(__file__).resolve().parent
ALGORITHMS = ("gepa", "mipro", "apo")
TASK_LM = "python/scripted_lm:task_lm"
REFLECTION_LM = "python/scripted_lm:reflection_lm"
COMPARED = (
    "state",
    "stop_reason",
    "seed_candidate",
    "best_candidate",
    "baseline_val",
    "best_val",
    "baseline_test",
    "best_test",
    "top_candidates",
    "candidates_total",
)
"""Result fields a resumed (or retried) job must share with an uninterrupted one."""
BUDGET_COMPARED = ("metric_calls", "proposals", "iterations")


def search_config(
    algorithm: str,
    workdir: Path,
    *,
    cache: bool = True,
    task: str = f'model = "{TASK_LM}"',
    reflection: str = f'model = "{REFLECTION_LM}"',
    metric_calls: int = 80,
    runtime: str = "",
) -> str:
    """A job config: ``algorithm`` on 8/8/6 word problems with the scripted models
    (``task`` and ``reflection`` are the bodies of ``[lm.task]`` and of the reflection and
    proposer models' tables), the response cache on or off."""
    roles = "".join(
        f"[lm.{role}]\n{reflection}\ncache = {str(cache).lower()}\n"
        for role in ("reflection", "proposer")
    )
    return (
        f'[job]\nalgorithm = "{algorithm}"\nseed = 3\n[job.budget]\nmetric_calls = {metric_calls}\n'
        '[dataset]\ntask = "word_problems"\nn_train = 8\nn_val = 8\nn_test = 6\n'
        f"[lm.task]\n{task}\ncache = {str(cache).lower()}\n{roles}"
        '[verifier]\nkind = "numeric"\n'
        f'[runtime]\nworkdir = "{workdir.as_posix()}"\nconcurrency = 4\n'
        f"cache = {str(cache).lower()}\n{runtime}"
    )


def emery_env(call_log: Path | None = None, delay_s: float = 0.0) -> dict[str, str]:
    """The environment of an ``emery`` subprocess: the scripted models importable, their
    calls logged to ``call_log``, each answered after ``delay_s``."""
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, DELAY_ENV: str(delay_s)}
    for name in ("EMERY_API_KEY", "EMERY_TASK_APP_KEY", "EMERY_STORE", CALL_LOG_ENV, "COLUMNS"):
        env.pop(name, None)
    if call_log is not None:
        env[CALL_LOG_ENV] = str(call_log)
    return env


def emery_command(*args: str) -> list[str]:
    """``python -m emery ARGS`` with this interpreter."""
    return [sys.executable, "-m", "emery", *args]


def run_emery(
    args: list[str], env: dict[str, str], cwd: Path, timeout_s: float = 300.0
) -> subprocess.CompletedProcess[str]:
    """Run ``emery ARGS`` to its end; its exit code, stdout and stderr."""
    return subprocess.run(
        emery_command(*args),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def only_job(store: Path) -> Any:
    """The one job of the SQLite store at ``store`` (a ``JobRecord``)."""
    from emery.store import SQLiteStore

    db = SQLiteStore(store)
    try:
        jobs = db.list_jobs(limit=None).items
        if len(jobs) != 1:
            raise AssertionError(f"{store}: {len(jobs)} jobs, expected one")
        return jobs[0]
    finally:
        db.close()


def outcome(store: Path) -> dict[str, Any]:
    """What must be the same however the store's one job got to its end."""
    job = only_job(store)
    result: dict[str, Any] = dict(job.result or {})
    shown = {name: result.get(name) for name in COMPARED}
    shown["state"] = job.state
    budget = result.get("budget") or {}
    shown["budget"] = {name: budget.get(name) for name in BUDGET_COMPARED}
    return shown


def differences(got: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """The names of the fields where ``got`` differs from ``expected``."""
    return [name for name in expected if got.get(name) != expected[name]]


def call_count(log: Path) -> int:
    """Complete lines in a call log (0 when there is none yet)."""
    try:
        return log.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def traceback_in(text: str) -> bool:
    """Whether a Python traceback was printed."""
    return "Traceback (most recent call last)" in text
