"""Score a candidate on examples: the one batch loop, its rollouts run by an ``Executor``
(in this process by default); one failure never fails the batch."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, cast

from emery.core.example_result import ExampleResult, FailureKind
from emery.core.models import Candidate, ChatMessage, Example, Split
from emery.core.rollouts import Rollout, RolloutConfig
from emery.core.work_clock import WorkTimeExceeded, within_work_time
from emery.evaluation.eval_result import EvalResult
from emery.evaluation.executor import Done, Executor, LocalExecutor
from emery.evaluation.rollouts import RolloutMaker, RolloutOutcome
from emery.lm.base import LM, Completion, TokenUsage
from emery.lm.provider_errors import provider_stop_in
from emery.lm.usage import usage_scope
from emery.lm.wrapper import LMWrapper
from emery.systems.base import RunContext, System, SystemRun
from emery.systems.capabilities import CallsThroughProxy
from emery.tracing.adapters import trace_excerpt
from emery.tracing.lm import TracedLM
from emery.tracing.processor import RolloutTracing
from emery.tracing.recorder import NullRecorder, RolloutRecorder
from emery.tracing.registry import RolloutProxy
from emery.tracing.scope import AttemptScope
from emery.verifiers.base import Verdict, Verifier

log = logging.getLogger(__name__)

TRACE_CHARS = 1500
UNREADABLE_FEEDBACK = "The reply could not be read: "
"""The start of the feedback of a run whose reply the parser could not read (scored 0)."""


class VerifierTimeout(Exception):
    """The verifier gave no verdict within the rollout's time limit (``timeout_s``)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the verifier gave no verdict within {seconds:g} s (timeout_s)")


class TallyLM(LMWrapper):
    """Counts the calls and tokens one run spends through a shared LM."""

    def __init__(self, inner: LM) -> None:
        super().__init__(inner)
        self.calls = 0
        self.failed_calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        try:
            completion = await self.inner.complete(messages, **params)
        except Exception:
            self.failed_calls += 1
            raise
        self.calls += 1
        if not completion.cached:
            self.prompt_tokens += completion.usage.prompt_tokens
            self.completion_tokens += completion.usage.completion_tokens
        return completion

    def usage(self) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens
        )


def unreadable_reply(run: SystemRun, outcome: RolloutOutcome) -> str | None:
    """The parser's message when the run ended on a reply it could not read (the rollout
    succeeded: a wrong answer, not a failure), else None."""
    if outcome.rollout.status != "succeeded" or run.failure != "unreadable":
        return None
    return run.error


def failure_kind(outcome: RolloutOutcome, tally: TallyLM) -> FailureKind | None:
    """Why a rollout failed (None when it succeeded): out of time, a task-model call that
    raised, an output the system called unusable, or any other exception (raised, or
    reported as the run's ``failure``)."""
    if outcome.rollout.status == "succeeded":
        return None
    last = outcome.attempts[-1].status if outcome.attempts else "failed"
    if last in ("timeout", "unresponsive"):
        return "timeout"
    if tally.failed_calls:
        return "model"
    if outcome.run is not None and outcome.run.error is not None:
        failure = outcome.run.failure
        return "output" if failure == "unreadable" else failure  # unreadable: never failed
    return "error"


class Evaluator:
    """Runs ``system`` under a candidate on examples and scores the outputs with ``verifier``.

    Each (candidate, example) is a rollout (``rollouts``: attempts, retries, time limits)
    whose spans go to ``recorder``. A system that ``CallsThroughProxy`` with ``needs_proxy``
    gets a per-attempt LM proxy URL from ``proxy`` (default: the process-wide embedded
    proxy). ``executor`` says where a batch's rollouts run (default: here, ``concurrency``
    at a time); ``run_one`` always runs in this process.
    """

    def __init__(
        self,
        system: System,
        verifier: Verifier,
        lm: LM,
        *,
        concurrency: int = 8,
        rollouts: RolloutConfig | None = None,
        recorder: RolloutRecorder | None = None,
        job_id: str | None = None,
        proxy: RolloutProxy | None = None,
        executor: Executor | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.system = system
        self.verifier = verifier
        self.lm = lm
        self.concurrency = concurrency
        self.tracing = RolloutTracing(recorder or NullRecorder())
        self.rollout_maker = RolloutMaker(self.tracing, rollouts, job_id=job_id, proxy=proxy)
        self.executor: Executor = executor or LocalExecutor()
        self._seed_components: dict[str, str] | None = None
        self._proxied: tuple[System, bool] | None = None

    @property
    def runner(self) -> RolloutMaker:
        """Deprecated name of ``rollout_maker`` (``RolloutHost.runner``); it goes in the next
        release."""
        return self.rollout_maker

    @property
    def recorder(self) -> RolloutRecorder:
        return self.tracing.recorder

    def close(self) -> None:
        """Release what the executor holds (a Ray actor pool); local: nothing."""
        self.executor.close()

    def _calls_through_proxy(self) -> bool:
        """Whether the system is ``CallsThroughProxy``, asked once per system (a runtime
        protocol check takes about 10 microseconds, on every rollout)."""
        if self._proxied is None or self._proxied[0] is not self.system:
            self._proxied = (self.system, isinstance(self.system, CallsThroughProxy))
        return self._proxied[1]

    def _prepare(self) -> dict[str, str] | None:
        if not self._calls_through_proxy():
            return None
        system = cast(CallsThroughProxy, self.system)
        if self.rollout_maker.proxy is None and system.needs_proxy:
            from emery.proxy.embedded import shared_proxy  # starts a server: only when needed

            self.rollout_maker.proxy = shared_proxy()
        if not system.rewrite_prompts:
            return None
        if self._seed_components is None:
            self._seed_components = dict(self.system.seed_candidate().components)
        return self._seed_components

    async def run_one(
        self,
        candidate: Candidate,
        example: Example,
        split: Split | None = None,
        *,
        rollout: Rollout | None = None,
    ) -> ExampleResult:
        """Run and score one example (as the next attempt of a queued ``rollout`` if given).
        Any exception becomes a 0 score with the error as feedback."""
        try:
            return await self.run_here(candidate, example, split, rollout)
        finally:
            self.tracing.flush()

    async def run_here(
        self,
        candidate: Candidate,
        example: Example,
        split: Split | None,
        queued: Rollout | None = None,
    ) -> ExampleResult:
        """``run_one`` without storing the trace (a batch stores its traces at its end)."""
        tally = TallyLM(self.lm)
        traced = TracedLM(tally)

        async def body(scope: AttemptScope) -> SystemRun:
            context = RunContext(
                lm=traced, example=example, split=split, rollout_id=scope.rollout_id
            )
            return await self.system.run(candidate, context)

        start = time.perf_counter()
        with usage_scope() as used:
            outcome = await self.rollout_maker.run(
                candidate,
                example,
                split,
                body,
                lm=tally,
                seed_components=self._prepare(),
                rollout=queued,
            )
            run = outcome.run or SystemRun()
            score, feedback, error, ranked = await self._score(example, run, outcome)
        # a succeeded rollout with an error: the verifier raised
        failure = None if error is None else (failure_kind(outcome, tally) or "verifier")
        unreadable = unreadable_reply(run, outcome)
        rollout = outcome.rollout
        rollout.score, rollout.output = score, run.output
        self.recorder.save_rollout(rollout)
        return ExampleResult(
            candidate_id=candidate.id,
            example_id=example.id,
            split=split,
            output=run.output,
            score=score,
            feedback=feedback,
            error=error,
            failure=failure,
            unreadable=unreadable,
            ranked=ranked,
            calls=run.calls,
            usage=tally.usage(),
            lm_calls=tally.calls,
            lm_usage=used.by_role(),
            latency_s=time.perf_counter() - start,
            rollout_id=rollout.id,
            rollout_status=rollout.status,
            attempts=rollout.attempt_count,
            span_count=outcome.span_count,
            trace=self._excerpt(outcome),
        )

    @staticmethod
    def _excerpt(outcome: RolloutOutcome) -> str:
        scope = outcome.scope
        if scope is None:
            return ""
        return trace_excerpt(scope.records, TRACE_CHARS)

    async def _score(
        self, example: Example, run: SystemRun, outcome: RolloutOutcome
    ) -> tuple[float, str, str | None, tuple[float, float] | None]:
        """(score, feedback, error, the verdict's rank pair): a failed rollout scores 0, and
        so does a reply the parser could not read (a wrong answer, no error: the feedback
        says why); a self-scored run keeps its reward; otherwise the verifier decides."""
        if outcome.rollout.status != "succeeded":
            error = outcome.error or "the run failed"
            log.debug("example %s failed: %s", example.id, error)  # a scored outcome, not a fault
            return 0.0, f"The run failed: {error}", error, None
        if (unreadable := unreadable_reply(run, outcome)) is not None:
            return 0.0, f"{UNREADABLE_FEEDBACK}{unreadable}", None, None
        if run.reward is not None:
            return (
                run.reward,
                run.feedback or f"The agent reported a reward of {run.reward:g}.",
                None,
                None,
            )
        try:
            verdict = await self._verdict(example, run)
        except Exception as exc:
            if (stop := provider_stop_in(exc)) is not None:
                raise stop from exc
            log.warning(
                "verifying example %s failed: %s",
                example.id,
                exc,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
            error = f"{type(exc).__name__}: {exc}"
            return 0.0, f"The run failed: {error}", error, None
        return verdict.score, verdict.feedback, None, verdict.ranked

    async def _verdict(self, example: Example, run: SystemRun) -> Verdict:
        """The verifier's verdict, within the rollout's time limit (its own time: waits on
        an in-process model not counted); past it, a ``VerifierTimeout``."""
        verdict = self.verifier.verify(example, run.output, run)
        limit = self.rollout_maker.config.timeout_seconds
        if limit is None:
            return await verdict
        try:
            return await within_work_time(verdict, limit)
        except WorkTimeExceeded:
            raise VerifierTimeout(limit) from None

    async def evaluate(
        self,
        candidate: Candidate,
        examples: Sequence[Example],
        split: Split | None = None,
        *,
        on_result: Callable[[ExampleResult], None] | None = None,
        gate: Callable[[], None] | None = None,
        concurrency: int | None = None,
    ) -> EvalResult:
        """Score ``candidate`` on ``examples`` (results in example order), ``on_result``
        hearing each result as it comes; ``gate`` (a budget's) is called before each chunk
        starts and stops the batch by raising; ``concurrency`` replaces the evaluator's for
        this batch.

        The executor's chunks go to at most ``lanes`` lane tasks that take them in order, so
        only as many rollouts exist at a time as run (not one waiting task per example:
        fewer objects for the garbage collector to walk on a large batch). An error or a
        cancel stops every lane, and with it the executor's work in flight.
        """
        results: list[ExampleResult | None] = [None] * len(examples)

        def done(offset: int, index: int, result: ExampleResult) -> None:
            results[offset + index] = result
            if on_result is not None:
                on_result(result)

        size = self.executor.chunk or max(len(examples), 1)  # None: the batch is one chunk
        offsets = range(0, len(examples), size)
        todo = ((offset, examples[offset : offset + size]) for offset in offsets)

        async def lane() -> None:
            for offset, chunk in todo:
                if gate is not None:
                    gate()
                tell: Done = partial(done, offset)
                await self.executor.run(self, candidate, chunk, split, tell)

        lanes = self.executor.lanes(concurrency or self.concurrency)
        width = len(offsets) if lanes is None else min(lanes, len(offsets))
        running = [asyncio.ensure_future(lane()) for _ in range(width)]
        try:
            await asyncio.gather(*running)
        finally:
            for task in running:  # on an error or a cancel, stop the other lanes too
                task.cancel()
            self.tracing.flush()
        finished = [result for result in results if result is not None]
        return EvalResult(candidate_id=candidate.id, split=split, results=finished)
