"""Score a candidate on examples with bounded concurrency; one failure never fails the batch."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from emery.core.models import Candidate, ChatMessage, Example, Split
from emery.evaluation.results import EvalResult, ExampleResult
from emery.lm.base import LM, Completion, TokenUsage
from emery.systems.base import RunContext, System, SystemRun
from emery.verifiers.base import Verifier

log = logging.getLogger(__name__)


class TallyLM:
    """Counts the calls and tokens one run spends through a shared LM."""

    def __init__(self, inner: LM) -> None:
        self.inner = inner
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    @property
    def model(self) -> str:
        return self.inner.model

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        **params: Any,
    ) -> Completion:
        completion = await self.inner.complete(
            messages, temperature=temperature, max_tokens=max_tokens, stop=stop, **params
        )
        self.calls += 1
        if not completion.cached:
            self.prompt_tokens += completion.usage.prompt_tokens
            self.completion_tokens += completion.usage.completion_tokens
        return completion

    def usage(self) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens
        )


class Evaluator:
    """Runs ``system`` under a candidate on examples and scores the outputs with ``verifier``."""

    def __init__(self, system: System, verifier: Verifier, lm: LM, *, concurrency: int = 8) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.system = system
        self.verifier = verifier
        self.lm = lm
        self.concurrency = concurrency

    async def run_one(
        self, candidate: Candidate, example: Example, split: Split | None = None
    ) -> ExampleResult:
        """Run and score one example. Any exception becomes a 0 score with the error as feedback."""
        lm = TallyLM(self.lm)
        start = time.perf_counter()
        run = SystemRun()
        try:
            run = await self.system.run(candidate, RunContext(lm=lm, example=example, split=split))
            if run.error is not None:
                score, feedback, error = 0.0, f"The run failed: {run.error}", run.error
            else:
                verdict = await self.verifier.verify(example, run.output, run)
                score, feedback, error = verdict.score, verdict.feedback, None
        except Exception as exc:
            log.warning(
                "example %s failed: %s", example.id, exc, exc_info=log.isEnabledFor(logging.DEBUG)
            )
            error = f"{type(exc).__name__}: {exc}"
            score, feedback = 0.0, f"The run failed: {error}"
        return ExampleResult(
            candidate_id=candidate.id,
            example_id=example.id,
            split=split,
            output=run.output,
            score=score,
            feedback=feedback,
            error=error,
            calls=run.calls,
            usage=lm.usage(),
            lm_calls=lm.calls,
            latency_s=time.perf_counter() - start,
        )

    async def evaluate(
        self,
        candidate: Candidate,
        examples: Sequence[Example],
        split: Split | None = None,
        *,
        on_result: Callable[[ExampleResult], None] | None = None,
    ) -> EvalResult:
        """Score ``candidate`` on ``examples`` (results in example order)."""
        slots = asyncio.Semaphore(self.concurrency)

        async def one(example: Example) -> ExampleResult:
            async with slots:
                result = await self.run_one(candidate, example, split)
            if on_result is not None:
                on_result(result)
            return result

        results = await asyncio.gather(*(one(example) for example in examples))
        return EvalResult(candidate_id=candidate.id, split=split, results=list(results))
