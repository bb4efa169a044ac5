"""The evaluator's one batch loop drives an ``Executor``; executors are looked up by name and
given to the search context complete, with its prepaid results and progress sink."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from emery.algorithms.context import build_search_context
from emery.config.schema import RuntimeConfig
from emery.core.errors import ConfigError
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, Dataset, Example, Split
from emery.evaluation.evaluator import Evaluator
from emery.evaluation.executor import Done, LocalExecutor, RolloutHost
from emery.evaluation.progress import BatchProgress
from emery.evaluation.service import eval_key
from emery.lm import FakeLM
from emery.lm.usage import UsageMeter
from emery.store import MemoryStore
from emery.systems import MessageTemplate, PromptProgram, PromptProgramConfig, StageConfig
from emery.verifiers import ExactMatch
from emery.workers.executors import EXECUTORS, ExecutorSetup, build_executor, executor_kind
from emery.workers.queue_executor import QueueExecutor
from emery.workers.ray_executor import RayExecutor


def echo_program() -> PromptProgram:
    stage = StageConfig(
        name="echo", instruction="Repeat.", messages=[MessageTemplate(template="{word}")]
    )
    return PromptProgram(PromptProgramConfig(stages=[stage]))


def examples(n: int) -> list[Example]:
    return [Example(id=f"ex{i}", input={"word": f"w{i}"}, expected=f"w{i}") for i in range(n)]


def result(candidate: Candidate, example: Example, split: Split | None) -> ExampleResult:
    return ExampleResult(candidate_id=candidate.id, example_id=example.id, split=split, score=1.0)


class ChunkExecutor:
    """Answers each chunk in reverse order, after every lane of its batch has started
    (``started``), recording the chunks and the most ``run`` calls at once."""

    def __init__(self, chunk: int | None, lanes: int | None, *, together: int = 1) -> None:
        self.chunk = chunk
        self._lanes = lanes
        self.together = together
        self.chunks: list[list[str]] = []
        self.running = 0
        self.most = 0
        self.closed = False
        self._all_started = asyncio.Event()

    def lanes(self, concurrency: int) -> int | None:
        return self._lanes

    async def run(
        self,
        host: RolloutHost,
        candidate: Candidate,
        examples: Sequence[Example],
        split: Split | None,
        done: Done,
    ) -> None:
        self.chunks.append([e.id for e in examples])
        self.running += 1
        self.most = max(self.most, self.running)
        if self.running >= self.together:
            self._all_started.set()
        await asyncio.wait_for(self._all_started.wait(), 5)
        await asyncio.sleep(0)  # let the other lanes run too
        for index in reversed(range(len(examples))):
            done(index, result(candidate, examples[index], split))
        self.running -= 1

    def close(self) -> None:
        self.closed = True


def evaluator(executor: object, concurrency: int = 8) -> Evaluator:
    return Evaluator(
        echo_program(),
        ExactMatch(),
        FakeLM(lambda m: ""),
        concurrency=concurrency,
        executor=executor,  # type: ignore[arg-type]
    )


async def test_the_batch_loop_runs_chunks_on_at_most_its_lanes_in_example_order() -> None:
    executor = ChunkExecutor(chunk=2, lanes=2, together=2)
    candidate = Candidate(components={"p": "x"})
    heard: list[str] = []

    outcome = await evaluator(executor).evaluate(
        candidate, examples(5), "val", on_result=lambda r: heard.append(r.example_id)
    )

    assert [r.example_id for r in outcome.results] == [f"ex{i}" for i in range(5)]
    assert sorted(executor.chunks) == [["ex0", "ex1"], ["ex2", "ex3"], ["ex4"]]
    assert executor.most == 2
    assert sorted(heard) == [f"ex{i}" for i in range(5)]


async def test_an_executor_without_a_lane_bound_runs_every_chunk_at_once() -> None:
    executor = ChunkExecutor(chunk=1, lanes=None, together=6)  # waits for all six to start

    outcome = await evaluator(executor, concurrency=2).evaluate(
        Candidate(components={"p": "x"}), examples(6), "val"
    )

    assert executor.most == 6
    assert len(outcome.results) == 6


async def test_a_whole_batch_executor_gets_one_chunk_and_an_empty_batch_none() -> None:
    executor = ChunkExecutor(chunk=None, lanes=1)
    candidate = Candidate(components={"p": "x"})

    await evaluator(executor).evaluate(candidate, examples(4), "train")
    empty = await evaluator(executor).evaluate(candidate, [], "train")

    assert executor.chunks == [["ex0", "ex1", "ex2", "ex3"]]
    assert empty.results == []


async def test_an_error_in_one_chunk_cancels_the_chunks_still_running() -> None:
    cancelled = asyncio.Event()

    class Failing(ChunkExecutor):
        async def run(self, host, candidate, examples, split, done):  # type: ignore[no-untyped-def]
            if examples[0].id == "ex0":
                await asyncio.sleep(0)
                raise RuntimeError("lost")
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise

    with pytest.raises(RuntimeError, match="lost"):
        await evaluator(Failing(chunk=1, lanes=None)).evaluate(
            Candidate(components={"p": "x"}), examples(3), "val"
        )
    await asyncio.wait_for(cancelled.wait(), 5)  # the cancel reaches the others' next turn


def test_closing_the_evaluator_closes_its_executor() -> None:
    executor = ChunkExecutor(chunk=1, lanes=1)
    evaluator(executor).close()
    assert executor.closed


def test_the_built_in_executors_are_looked_up_by_name_and_a_typo_is_one_line() -> None:
    assert EXECUTORS.names() == ["local", "ray", "runners"]
    assert executor_kind("local").elsewhere is False
    assert executor_kind("runners").elsewhere is executor_kind("ray").elsewhere is True
    with pytest.raises(ConfigError) as info:
        executor_kind("rey")
    assert str(info.value) == (
        "runtime.executor: unknown executor 'rey'; known executors: local, ray, runners"
        " (or name one as 'module:attr')"
    )


@pytest.mark.parametrize(
    ("name", "kind"),
    [("local", LocalExecutor), ("runners", QueueExecutor), ("ray", RayExecutor)],
)
def test_build_executor_makes_the_named_one_charging_the_jobs_meter(name: str, kind: type) -> None:
    meter = UsageMeter()
    setup = ExecutorSetup(RuntimeConfig(executor=name), MemoryStore(), "job1", meter)
    executor = build_executor(setup)
    assert isinstance(executor, kind)
    assert getattr(executor, "meter", meter) is meter  # runs elsewhere: charged to the job
    executor.close()  # nothing started, nothing to release


async def test_the_search_context_is_built_with_its_executor_prepaid_and_progress() -> None:
    executor = ChunkExecutor(chunk=1, lanes=8)
    seen: list[BatchProgress] = []
    program = echo_program()
    data = examples(3)
    seed = program.seed_candidate()
    prepaid = {eval_key(seed.id, "ex1", "val"): result(seed, data[1], "val")}
    ctx = build_search_context(
        system=program,
        dataset=Dataset(name="d", train=data, val=data, test=data),
        verifier=ExactMatch(),
        lms={"task": FakeLM(lambda m: "")},
        executor=executor,  # type: ignore[arg-type]
        prepaid=prepaid,
        on_progress=seen.append,
    )

    outcome = await ctx.evaluate(seed, data, "val")

    assert ctx.evaluations.evaluator.executor is executor
    assert sorted(executor.chunks) == [["ex0"], ["ex2"]]  # the prepaid ex1 is not run again
    assert outcome.mean == 1.0
    assert ctx.budget.usage.metric_calls == 3  # yet it is charged, as the first try was
    assert seen[-1].done == seen[-1].total == 3
    assert ctx.evaluations.prepaid == {}
    assert [e.kind for e in ctx.log.events] == ["candidate_evaluated"]
