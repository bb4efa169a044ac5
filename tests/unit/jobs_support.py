"""Deterministic models, a small random search and config builders for the job tests.

Imported as ``jobs_support`` (``tests/unit`` is on ``sys.path``); subprocesses get it
through ``PYTHONPATH``. Tests register the ``random_search`` algorithm with the
``random_search_algorithm`` fixture (``conftest.py``); worker subprocesses call
``register_random_search()``.

- ``task_lm``: answers a word problem right or wrong depending on a hash of (instruction,
  question), so different instructions score differently but always the same way.
- ``careful_task_lm``: answers right only under an instruction ``reflection_lm`` wrote.
- ``reflection_lm``: turns any prompt into a new instruction named after its hash.
- ``RandomSearch``: picks a parent and a train minibatch with a checkpointed RNG, asks the
  reflection model for a child, keeps it when it is no worse on the minibatch, scores it
  on val and reports a new best with ``best_updated``. Small, but it exercises every piece
  of state a real algorithm checkpoints.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from emery.algorithms import registry
from emery.algorithms.base import (
    AlgorithmSettings,
    AlgorithmState,
    SearchContext,
    load_rng,
    save_rng,
)
from emery.algorithms.registry import AlgorithmSpec
from emery.core.events import BaselineEvaluated, BestUpdated
from emery.core.hashing import content_hash
from emery.core.models import ChatMessage, Lineage
from emery.data.tasks import builtin_task
from emery.lm import Completion, FakeLM, TokenUsage
from emery.store.protocol import Store
from emery.store.records import EvaluationFilter

REPO = Path(__file__).resolve().parents[2]
UNIT_DIR = Path(__file__).resolve().parent
CALL_LOG_ENV = "EMERY_TEST_CALL_LOG"
DELAY_ENV = "EMERY_TEST_LM_DELAY"


def _gold(question: str) -> int | None:
    dataset = builtin_task("word_problems").dataset(seed=0, n_train=40, n_val=40, n_test=40)
    answers = {str(e.input["question"]): int(e.expected) for e in dataset}
    return answers.get(question)


_GOLD_CACHE: dict[str, int | None] = {}


def gold(question: str) -> int | None:
    if question not in _GOLD_CACHE:
        _GOLD_CACHE[question] = _gold(question)
    return _GOLD_CACHE[question]


def _log_call(kind: str, messages: Sequence[ChatMessage]) -> None:
    path = os.environ.get(CALL_LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{kind} {content_hash([dict(m) for m in messages])}\n")


def _answer(messages: Sequence[ChatMessage]) -> str:
    instruction = next((m["content"] for m in messages if m["role"] == "system"), "")
    question = messages[-1]["content"]
    right = gold(question)
    if right is None:
        return "Answer: 0"
    quality = int(content_hash([instruction, question])[:2], 16) % 4
    _log_call("task", messages)
    return f"Answer: {right if quality >= 2 else right + 1}"


def _answer_if_careful(messages: Sequence[ChatMessage]) -> str:
    instruction = next((m["content"] for m in messages if m["role"] == "system"), "")
    question = messages[-1]["content"]
    right = gold(question)
    if right is None:
        return "Answer: 0"
    _log_call("task", messages)
    return f"Answer: {right if 'carefully' in instruction else right + 1}"


def _reflect(messages: Sequence[ChatMessage]) -> str:
    _log_call("reflection", messages)
    return f"Solve it carefully (variant {content_hash([dict(m) for m in messages])[:6]})."


class CallGate:
    """Holds the scripted models' calls in this process until a test lets them through.

    Open by default. ``hold()`` stops every later call at the gate, ``allow(n)`` lets
    ``n`` more through, ``open()`` lets all through. A held call awaits an event of its own
    loop, so pausing or cancelling its job cancels it at once; safe from any thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._permits: int | None = None  # None: open
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def hold(self) -> None:
        with self._lock:
            self._permits = 0

    def allow(self, calls: int) -> None:
        with self._lock:
            self._permits = (self._permits or 0) + calls
            self._wake()

    def open(self) -> None:
        with self._lock:
            self._permits = None
            self._wake()

    def _wake(self) -> None:
        for loop, event in self._waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(event.set)
        self._waiters.clear()

    async def enter(self) -> None:
        """Return once this call may go through."""
        while True:
            with self._lock:
                if self._permits is None:
                    return
                if self._permits > 0:
                    self._permits -= 1
                    return
                event = asyncio.Event()
                self._waiters.append((asyncio.get_running_loop(), event))
            await event.wait()


GATE = CallGate()


class SlowFakeLM(FakeLM):
    """A FakeLM that passes ``GATE`` and then sleeps ``$EMERY_TEST_LM_DELAY`` seconds per
    call (default none)."""

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        await GATE.enter()
        delay = float(os.environ.get(DELAY_ENV, "0") or 0)
        if delay:
            await asyncio.sleep(delay)
        return await super().complete(messages, **params)


def task_lm() -> FakeLM:
    return SlowFakeLM(_answer, model="fake/hash-task")


def careful_task_lm() -> FakeLM:
    """Fails every question under the seed instruction and answers every one right under
    any instruction ``reflection_lm`` wrote (they say "carefully"): a search that adopts a
    reflected instruction lifts val from 0 to 1."""
    return SlowFakeLM(_answer_if_careful, model="fake/careful-task")


def reflection_lm() -> FakeLM:
    return SlowFakeLM(_reflect, model="fake/hash-reflection")


class CountingLM:
    """Replies ``reply`` with a fixed token usage; counts calls."""

    def __init__(self, reply: str = "Answer: 1", tokens: int = 10, model: str = "fake/count"):
        self.reply = reply
        self.tokens = tokens
        self.model = model
        self.calls = 0

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        self.calls += 1
        return Completion(
            text=self.reply,
            usage=TokenUsage(prompt_tokens=self.tokens, completion_tokens=0),
            model=self.model,
        )


# --- the random search ------------------------------------------------------------------


class RandomSearchSettings(AlgorithmSettings):
    iterations: int = Field(default=8, ge=1)
    minibatch: int = Field(default=3, ge=1)
    fail_at: int | None = None  # a bug that raises at this iteration
    report_best: bool = True  # False: a bug that keeps a better child without best_updated


class RandomSearchState(AlgorithmState):
    scores: dict[str, float] = Field(default_factory=dict)


class RandomSearch:
    name: ClassVar[str] = "random_search"
    state_type = RandomSearchState

    def __init__(self, settings: RandomSearchSettings) -> None:
        self.settings = settings

    async def start(self, ctx: SearchContext) -> RandomSearchState:
        seed = ctx.add_candidate(ctx.seed_candidate)
        result = await ctx.evaluate(seed, ctx.val, "val")
        ctx.emit(
            BaselineEvaluated(candidate_id=seed.id, split="val", score=result.mean, n=len(ctx.val))
        )
        state = RandomSearchState(
            seed_candidate_id=seed.id, rng_state=save_rng(load_rng([], ctx.seed))
        )
        state.baseline_val_score = state.best_val_score = result.mean
        state.best_candidate_id = seed.id
        state.scores[seed.id] = result.mean
        ctx.emit(BestUpdated(candidate_id=seed.id, score=result.mean))
        return state

    async def step(self, ctx: SearchContext, state: RandomSearchState) -> RandomSearchState:
        if state.iteration == self.settings.fail_at:
            raise RuntimeError("the proposer returned nonsense")
        rng = load_rng(state.rng_state, ctx.seed)
        parent = ctx.candidates[rng.choice(sorted(state.scores))]
        component = rng.choice(sorted(parent.components))
        reply = await ctx.lm("reflection").complete(
            [
                {
                    "role": "user",
                    "content": f"Improve: {parent.components[component]} #{rng.randint(0, 999)}",
                }
            ]
        )
        child = ctx.add_candidate(
            parent.derive(
                components={component: reply.text},
                lineage=Lineage(
                    parents=(parent.id,),
                    generation=parent.lineage.generation + 1,
                    operation="mutate",
                    iteration=state.iteration,
                ),
            )
        )
        batch = rng.sample(ctx.train, min(self.settings.minibatch, len(ctx.train)))
        before = await ctx.evaluate(parent, batch, "train")
        after = await ctx.evaluate(child, batch, "train")
        if after.mean >= before.mean and child.id not in state.scores:
            scored = await ctx.evaluate(child, ctx.val, "val")
            state.scores[child.id] = scored.mean
            if state.best_val_score is None or scored.mean > state.best_val_score:
                if self.settings.report_best:
                    ctx.emit(
                        BestUpdated(
                            candidate_id=child.id,
                            score=scored.mean,
                            previous_score=state.best_val_score,
                        )
                    )
                state.best_candidate_id, state.best_val_score = child.id, scored.mean
        state.iteration += 1
        state.rng_state = save_rng(rng)
        if state.iteration >= self.settings.iterations:
            state.done, state.done_reason = True, "iterations done"
        return state


SPEC = AlgorithmSpec(name="random_search", settings=RandomSearchSettings, factory=RandomSearch)


def register_random_search() -> None:
    """Make ``random_search`` a known algorithm for the rest of this (worker) process."""
    registry.ALGORITHM_MODULES["random_search"] = __name__


# --- configs ----------------------------------------------------------------------------


def search_config(
    workdir: Path,
    *,
    iterations: int = 8,
    budget: dict[str, Any] | None = None,
    n: tuple[int, int, int] = (6, 8, 4),
    concurrency: int = 4,
    algorithm: str = "random_search",
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A word-problems job run by the deterministic fake models."""
    if settings is None:
        settings = {"iterations": iterations} if algorithm == "random_search" else {}
    return {
        "job": {"algorithm": algorithm, "seed": 1, "budget": budget or {}},
        "dataset": {"task": "word_problems", "n_train": n[0], "n_val": n[1], "n_test": n[2]},
        "lm": {
            "task": {"model": "python/jobs_support:task_lm"},
            "reflection": {"model": "python/jobs_support:reflection_lm"},
        },
        "verifier": {"kind": "numeric"},
        "runtime": {"workdir": str(workdir), "concurrency": concurrency},
        "algorithm": {algorithm: settings},
    }


def stored_scores(store: Store, job_id: str) -> list[tuple[Any, ...]]:
    """Every stored evaluation of a job: (candidate, split, example, score), sorted: two
    runs of a job that score alike store the same list."""
    page = store.list_evaluations(EvaluationFilter(job_id=job_id), limit=None)
    rows = [
        (r.result.candidate_id, r.result.split, r.result.example_id, r.result.score)
        for r in page.items
    ]
    return sorted(rows, key=str)


def worker_env(**extra: str) -> dict[str, str]:
    """The environment for a subprocess that imports ``jobs_support``."""
    path = os.pathsep.join([str(UNIT_DIR), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, **extra}


WORKER = (
    "import sys, jobs_support; jobs_support.register_random_search();"
    " from emery.cli.app import main; "
    "main(['jobs', 'run', sys.argv[1], '--store', sys.argv[2]])"
)


def worker_command(job_id: str, store_url: str) -> list[str]:
    """``python -c ...`` running one job (with ``random_search`` registered)."""
    return [sys.executable, "-c", WORKER, job_id, store_url]


def wait_until(predicate: Any, timeout: float = 30.0, poll: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns a truthy value; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"condition not met within {timeout}s")
