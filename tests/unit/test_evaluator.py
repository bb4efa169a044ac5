"""The evaluator: ordered results, bounded concurrency, failures isolated; score statistics."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

import pytest

from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, ChatMessage, Example
from emery.evaluation import EvalResult, Evaluator, TallyLM, summarize
from emery.lm import CachedLM, Completion, FakeLM, ResponseCache
from emery.systems import (
    MessageTemplate,
    PromptProgram,
    PromptProgramConfig,
    RunContext,
    StageConfig,
    SystemRun,
)
from emery.verifiers import ExactMatch, Verdict


def echo_program() -> PromptProgram:
    return PromptProgram(
        PromptProgramConfig(
            stages=[
                StageConfig(
                    name="echo",
                    instruction="Repeat the word.",
                    messages=[MessageTemplate(template="{word}")],
                )
            ]
        )
    )


def examples(n: int) -> list[Example]:
    return [Example(id=f"ex{i}", input={"word": f"w{i}"}, expected=f"w{i}") for i in range(n)]


class InFlightLM(FakeLM):
    """A FakeLM that records how many calls overlap."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.in_flight = 0
        self.max_in_flight = 0

    async def complete(self, messages: Sequence[ChatMessage], **kw: Any) -> Completion:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await super().complete(messages, **kw)
        finally:
            self.in_flight -= 1


def _last_user(messages: Sequence[ChatMessage]) -> str:
    return messages[-1]["content"]


async def test_results_follow_example_order_and_are_scored() -> None:
    program = echo_program()
    # Later examples answer faster, so completion order is the reverse of example order.
    delays = {f"w{i}": 0.002 * (6 - i) for i in range(6)}

    class Slow(FakeLM):
        async def complete(self, messages: Sequence[ChatMessage], **kw: Any) -> Completion:
            await asyncio.sleep(delays[_last_user(messages)])
            return await super().complete(messages, **kw)

    lm = Slow(lambda m: _last_user(m) if _last_user(m) != "w3" else "wrong")
    seen: list[str] = []
    result = await Evaluator(program, ExactMatch(), lm, concurrency=6).evaluate(
        program.seed_candidate(),
        examples(6),
        "val",
        on_result=lambda r: seen.append(r.example_id),
    )
    assert [r.example_id for r in result.results] == [f"ex{i}" for i in range(6)]
    assert result.scores == [1.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    assert result.mean == pytest.approx(5 / 6)
    assert sorted(seen) == sorted(f"ex{i}" for i in range(6))
    assert len(seen) == 6
    assert [f.example_id for f in result.failures()] == ["ex3"]
    assert result.candidate_id == program.seed_candidate().id
    assert all(r.split == "val" for r in result.results)
    assert result.results[0].output == "w0"
    assert result.results[0].calls[0].component == "echo"


@pytest.mark.parametrize("concurrency", [1, 3])
async def test_concurrency_bound_is_respected(concurrency: int) -> None:
    program = echo_program()
    lm = InFlightLM(_last_user, delay_s=0.005)
    result = await Evaluator(program, ExactMatch(), lm, concurrency=concurrency).evaluate(
        program.seed_candidate(), examples(10)
    )
    assert result.mean == 1.0
    assert 1 <= lm.max_in_flight <= concurrency


def test_concurrency_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Evaluator(echo_program(), ExactMatch(), FakeLM(_last_user), concurrency=0)


class FlakySystem:
    """Echoes the input word, but raises on one example."""

    name = "flaky"

    def seed_candidate(self) -> Candidate:
        return Candidate(components={"main": "x"})

    def version(self) -> str:
        return "v1"

    def check_inputs(self, fields: set[str]) -> None:
        return None

    async def run(self, candidate: Candidate, ctx: RunContext) -> SystemRun:
        if ctx.example.id == "ex1":
            raise RuntimeError("tool crashed")
        completion = await ctx.lm.complete([{"role": "user", "content": ctx.example.input["word"]}])
        return SystemRun(output=completion.text)


async def test_one_failing_example_scores_zero_and_others_succeed() -> None:
    system = FlakySystem()
    result = await Evaluator(system, ExactMatch(), FakeLM(_last_user)).evaluate(
        system.seed_candidate(), examples(3)
    )
    assert result.scores == [1.0, 0.0, 1.0]
    failed = result.results[1]
    assert failed.error == "RuntimeError: tool crashed"
    assert "tool crashed" in failed.feedback
    assert failed.output is None
    assert result.results[0].error is None


async def test_run_error_scores_zero_without_calling_the_verifier() -> None:
    class CountingVerifier(ExactMatch):
        calls = 0

        async def verify(self, example: Example, output: Any, trace: Any = None) -> Verdict:
            CountingVerifier.calls += 1
            return await super().verify(example, output, trace)

    program = echo_program()
    bad = [Example(id="x", input={"other": "w"}, expected="w")]
    result = await Evaluator(program, CountingVerifier(), FakeLM(_last_user)).evaluate(
        program.seed_candidate(), bad
    )
    (only,) = result.results
    assert only.score == 0.0
    assert only.error is not None
    assert "placeholder {word}" in only.feedback
    assert CountingVerifier.calls == 0


async def test_verifier_exception_is_a_zero_not_a_crash() -> None:
    class Broken(ExactMatch):
        async def verify(self, example: Example, output: Any, trace: Any = None) -> Verdict:
            raise ValueError("bad gold")

    program = echo_program()
    result = await Evaluator(program, Broken(), FakeLM(_last_user)).evaluate(
        program.seed_candidate(), examples(2)
    )
    assert result.scores == [0.0, 0.0]
    assert result.results[0].error == "ValueError: bad gold"


async def test_usage_and_lm_calls_are_tallied_per_example() -> None:
    program = echo_program()
    lm = FakeLM(lambda m: "alpha beta gamma")
    result = await Evaluator(program, ExactMatch(), lm).evaluate(
        program.seed_candidate(), examples(2)
    )
    for r in result.results:
        assert r.lm_calls == 1
        # "Repeat the word." (3) + "wN" (1) prompt tokens, 3 completion tokens.
        assert r.usage.prompt_tokens == 4
        assert r.usage.completion_tokens == 3
        assert r.latency_s >= 0.0


async def test_tally_skips_tokens_of_cache_hits() -> None:
    cache = ResponseCache(":memory:")
    tally = TallyLM(CachedLM(FakeLM(lambda _: "x y"), cache))
    messages: list[ChatMessage] = [{"role": "user", "content": "a b c"}]
    await tally.complete(messages)
    await tally.complete(messages)
    cache.close()
    assert tally.calls == 2
    assert tally.usage().prompt_tokens == 3
    assert tally.usage().completion_tokens == 2
    assert tally.model == "fake"


def test_eval_result_helpers() -> None:
    empty = EvalResult(candidate_id="c", results=[])
    assert empty.mean == 0.0
    assert empty.summary().n == 0
    result = EvalResult(
        candidate_id="c",
        results=[
            ExampleResult(candidate_id="c", example_id="a", score=1.0),
            ExampleResult(candidate_id="c", example_id="b", score=0.5),
        ],
    )
    assert result.mean == 0.75
    assert [r.example_id for r in result.failures()] == ["b"]


# stats


def test_summarize_empty() -> None:
    summary = summarize([])
    assert (summary.mean, summary.low, summary.high, summary.n) == (0.0, 0.0, 0.0, 0)


def test_summarize_binary_uses_the_wilson_interval() -> None:
    summary = summarize([1.0] * 5 + [0.0] * 5)
    assert summary.mean == 0.5
    assert summary.n == 10
    # Wilson 95% interval for 5/10.
    assert summary.low == pytest.approx(0.2366, abs=1e-4)
    assert summary.high == pytest.approx(0.7634, abs=1e-4)


def test_summarize_binary_all_correct_is_not_degenerate() -> None:
    summary = summarize([1.0] * 10)
    assert summary.mean == 1.0
    assert summary.high == pytest.approx(1.0)
    assert summary.low == pytest.approx(0.7225, abs=1e-4)
    zero = summarize([0.0] * 10)
    assert zero.low == pytest.approx(0.0, abs=1e-12)
    assert zero.high == pytest.approx(0.2775, abs=1e-4)


def test_summarize_graded_uses_the_normal_interval() -> None:
    summary = summarize([0.5, 0.7, 0.9])
    half = 1.959963984540054 * 0.2 / math.sqrt(3)
    assert summary.mean == pytest.approx(0.7)
    assert summary.low == pytest.approx(0.7 - half)
    assert summary.high == pytest.approx(min(1.0, 0.7 + half))


def test_summarize_graded_single_score_and_clipping() -> None:
    single = summarize([0.25])
    assert (single.low, single.high) == (0.25, 0.25)
    clipped = summarize([0.1, 0.9, 0.95, 1.0])
    assert 0.0 <= clipped.low <= clipped.mean <= clipped.high <= 1.0
    assert "n=4" in str(clipped)
