"""The evaluator as algorithms see it: a cache of stored results in front, a budget behind."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from emery.core.events import CandidateEvaluated, Event, RolloutsFailed
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, Example, Split
from emery.evaluation.budget import Budget
from emery.evaluation.eval_result import EvalResult
from emery.evaluation.evaluator import Evaluator
from emery.evaluation.health import ErrorPolicy, ErrorWatch, failure_counts, unreadable_count
from emery.evaluation.known_results import EvalKey as EvalKey
from emery.evaluation.known_results import KnownResults
from emery.evaluation.progress import BatchCounter, ProgressSink


def eval_key(candidate_id: str, example_id: str, split: str | None) -> EvalKey:
    return (candidate_id, example_id, split or "")


class EvaluationService:
    """Scores candidates, reusing any result already known and charging only for new rollouts.

    ``known`` holds the results stored for this job's evaluation scope (same system
    version, task model and verifier; the newest in memory, ``known_results``);
    ``new_results`` collects what this service ran since the engine last drained it, so the
    engine can store them with the step's other writes.
    ``on_progress`` (when set) hears of each new rollout as it finishes (``progress``).
    ``prepaid`` holds finished results of an abandoned step (a pause; given again to the
    service of a resumed job): its repeat takes them instead of running them again, and
    charges and reports them as new, exactly as the first try did, so a resumed search
    spends its budget as an uninterrupted one.
    """

    def __init__(
        self,
        evaluator: Evaluator,
        budget: Budget,
        *,
        known: dict[EvalKey, ExampleResult] | KnownResults | None = None,
        prepaid: dict[EvalKey, ExampleResult] | None = None,
        emit: Callable[[Event], None] | None = None,
        errors: ErrorPolicy | None = None,
        on_progress: ProgressSink | None = None,
    ) -> None:
        self.evaluator = evaluator
        self.budget = budget
        self.known = known if isinstance(known, KnownResults) else KnownResults(known)
        self.prepaid: dict[EvalKey, ExampleResult] = dict(prepaid or {})
        self.new_results: list[ExampleResult] = []
        self.emit = emit
        self.errors = ErrorWatch(errors) if errors is not None else None
        self.on_progress = on_progress

    def cached(self, candidate: Candidate, example: Example, split: Split) -> ExampleResult | None:
        return self.known.get(eval_key(candidate.id, example.id, split))

    async def evaluate(
        self,
        candidate: Candidate,
        examples: Sequence[Example],
        split: Split,
        *,
        charge: bool = True,
        concurrency: int | None = None,
    ) -> EvalResult:
        """Results for every example, in order. Raises BudgetExhausted before running if the
        misses cost more metric calls than remain (``charge=False`` for reporting runs), and
        ``RolloutErrors`` when, with an error policy, a charged batch shows rollouts failing
        for errors, not answers (``health.ErrorWatch``). ``concurrency``: the rollouts at
        once for this batch (default: the evaluator's)."""
        missing = [e for e in examples if self.cached(candidate, e, split) is None]
        unique_missing = list({e.id: e for e in missing}.values())
        if charge:
            self.budget.charge_metric_calls(len(unique_missing))
        gate = self.budget.gate if charge else None
        await self._run(candidate, unique_missing, split, gate=gate, concurrency=concurrency)
        fresh = [self.known[eval_key(candidate.id, e.id, split)] for e in unique_missing]
        results = [self.known[eval_key(candidate.id, e.id, split)] for e in examples]
        outcome = EvalResult(candidate_id=candidate.id, split=split, results=results)
        self._report(candidate, outcome, len(unique_missing))
        if charge and self.errors is not None:
            self.errors.check(candidate, split, results, fresh)
        return outcome

    async def _run(
        self,
        candidate: Candidate,
        examples: Sequence[Example],
        split: Split,
        *,
        gate: Callable[[], None] | None = None,
        concurrency: int | None = None,
    ) -> None:
        """Run ``examples`` (taking prepaid results instead of running again, their model
        usage charged to the meter as the first run's was), keeping each result as it
        finishes, so that a step cut short keeps its finished runs; ``gate`` is asked
        before each rollout (the LM limits and the wall time)."""
        keep = self._keep
        if self.on_progress is not None and examples:
            counter = BatchCounter(self.on_progress, candidate.id, split or "", len(examples))

            def keep(result: ExampleResult) -> None:
                self._keep(result)
                counter.add(result)

        to_run = []
        for example in examples:
            prepaid = self.prepaid.pop(eval_key(candidate.id, example.id, split), None)
            if prepaid is None:
                to_run.append(example)
            else:
                self.budget.meter.add(prepaid.lm_usage)
                keep(prepaid)
        if to_run:
            await self.evaluator.evaluate(
                candidate, to_run, split, on_result=keep, gate=gate, concurrency=concurrency
            )

    def _keep(self, result: ExampleResult) -> None:
        key = eval_key(result.candidate_id, result.example_id, result.split)
        self.known.pin(key, result)  # not stored until the engine drains it
        self.new_results.append(result)

    def _report(self, candidate: Candidate, outcome: EvalResult, new: int) -> None:
        """``candidate_evaluated`` with its failure and unreadable counts;
        ``rollouts_failed`` when some of the seed's new rollouts failed."""
        if self.emit is None:
            return
        split = outcome.split or ""
        failed, timeouts = failure_counts(outcome.results)
        n = len(outcome.results)
        self.emit(
            Event.of(
                CandidateEvaluated(
                    candidate_id=candidate.id,
                    split=split,
                    score=outcome.mean,
                    n=n,
                    new_rollouts=new,
                    failed=failed,
                    timeouts=timeouts,
                    unreadable=unreadable_count(outcome.results),
                )
            )
        )
        if failed and new and candidate.lineage.operation == "seed":
            first = next(r for r in outcome.results if r.error is not None)
            self.emit(
                Event.of(
                    RolloutsFailed(
                        candidate_id=candidate.id,
                        split=split,
                        n=n,
                        failed=failed,
                        timeouts=timeouts,
                        example_id=first.example_id,
                        error=first.error or "",
                    )
                )
            )

    def share(self, candidate: Candidate, results: Sequence[ExampleResult]) -> int:
        """Keep copies of another candidate's ``results`` as ``candidate``'s own, charged
        nothing: runs ``candidate`` would repeat call for call (``algorithms.restate_sharing``).
        They are stored with the next drain, as new runs are; how many were kept."""
        for result in results:
            self._keep(result.model_copy(update={"candidate_id": candidate.id}))
        return len(results)

    def discard_pending(self) -> None:
        """Set aside the results run since the last drain (an abandoned step) as prepaid:
        the step's repeat charges them again but does not run them again."""
        for result in self.new_results:
            key = eval_key(result.candidate_id, result.example_id, result.split)
            self.known.pop(key, None)
            self.prepaid[key] = result
        self.new_results = []

    def drain(self) -> list[ExampleResult]:
        """The results run since the last drain (for the engine to store): stored from then
        on, they may leave memory (``KnownResults``)."""
        drained, self.new_results = self.new_results, []
        self.known.unpin(eval_key(r.candidate_id, r.example_id, r.split) for r in drained)
        return drained
