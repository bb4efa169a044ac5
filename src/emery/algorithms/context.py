"""Assemble a ``SearchContext`` from a system, data, a verifier and models."""

from __future__ import annotations

import time
from collections.abc import Mapping

from emery.algorithms.base import SearchContext, StepLog
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, Dataset
from emery.core.rollouts import RolloutConfig
from emery.evaluation.budget import Budget, BudgetConfig, BudgetUsage, Clock
from emery.evaluation.evaluator import Evaluator
from emery.evaluation.executor import Executor
from emery.evaluation.health import ErrorPolicy
from emery.evaluation.known_results import KnownResults
from emery.evaluation.progress import ProgressSink
from emery.evaluation.service import EvalKey, EvaluationService
from emery.lm.base import LM
from emery.lm.usage import UsageMeter
from emery.systems.base import System
from emery.tracing.recorder import RolloutRecorder
from emery.verifiers.base import Verifier


def build_search_context(
    *,
    system: System,
    dataset: Dataset,
    verifier: Verifier,
    lms: Mapping[str, LM],
    budget: BudgetConfig | None = None,
    meter: UsageMeter | None = None,
    seed: int = 0,
    concurrency: int = 8,
    seed_candidate: Candidate | None = None,
    known: dict[EvalKey, ExampleResult] | KnownResults | None = None,
    prepaid: dict[EvalKey, ExampleResult] | None = None,
    budget_usage: BudgetUsage | None = None,
    rollouts: RolloutConfig | None = None,
    recorder: RolloutRecorder | None = None,
    job_id: str | None = None,
    errors: ErrorPolicy | None = None,
    clock: Clock = time.perf_counter,
    executor: Executor | None = None,
    on_progress: ProgressSink | None = None,
) -> SearchContext:
    """A context whose evaluations run ``system`` with ``lms["task"]`` and score with ``verifier``.

    ``known`` preloads stored results (free cache hits) and ``prepaid`` the finished runs
    of a step a pause cut short; ``budget_usage`` continues the spending of a resumed job.
    ``rollouts`` (attempts, time limits), ``recorder`` (where rollouts, attempts and spans
    go, e.g. ``StoreRecorder(store, job_id)``) and ``executor`` (where a batch's rollouts
    run; default: this process) are passed to the evaluator; ``errors`` says when failing
    rollouts stop the search; ``on_progress`` hears each new rollout as it finishes;
    ``clock`` times the steps against the wall-time budget.

    The algorithm's models (``ctx.lms``) ask the budget before each call, and the
    evaluator before each rollout, so the LM token and cost limits and the wall time stop
    a step mid-way (``Budget.gate``); the evaluator's own task model is not guarded (a
    refused call inside a rollout would read as a failed run).
    """
    meter = meter or UsageMeter()
    tracked = Budget(budget or BudgetConfig(), meter, budget_usage, clock=clock)
    log = StepLog()
    return SearchContext(
        dataset=dataset,
        system=system,
        seed_candidate=seed_candidate or system.seed_candidate(),
        evaluations=EvaluationService(
            Evaluator(
                system,
                verifier,
                lms["task"],
                concurrency=concurrency,
                rollouts=rollouts,
                recorder=recorder,
                job_id=job_id,
                executor=executor,
            ),
            tracked,
            known=known,
            prepaid=prepaid,
            emit=log.add,
            errors=errors,
            on_progress=on_progress,
        ),
        lms={role: tracked.guard(lm) for role, lm in lms.items()},
        budget=tracked,
        seed=seed,
        log=log,
    )
