"""User code that runs in the job's process (python verifiers, ``python/`` models, function
agents): its ``sys.exit`` is that rollout's error, never the end of the job; a verifier
that gives no verdict is stopped at the rollout's time limit; Ctrl-C (KeyboardInterrupt)
and cancellation still pass through."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from bad_input_support import job_config, run_cli, store_jobs
from cases import PROGRAM
from exiting_code import RELEASE, hangs

from emery.core.example_result import ExampleResult
from emery.core.models import Example
from emery.core.rollouts import RolloutConfig
from emery.core.user_code import UserCodeExited, call_user_function
from emery.core.work_clock import waiting_on_model
from emery.evaluation import Evaluator
from emery.lm import FakeLM, LMConfig, build_base_lm
from emery.systems.function_agent import FunctionAgent, agent
from emery.tracing import MemoryRecorder
from emery.verifiers.function import FunctionMetric


@pytest.fixture(autouse=True)
def release_hung_calls() -> Iterator[None]:
    """``hangs`` hangs during a test; its abandoned threads end after it."""
    RELEASE.clear()
    yield
    RELEASE.set()


@agent
async def echo(task: dict[str, Any], lm: Any) -> str:
    return str(await lm.acall(task["word"]))


async def evaluate(
    verify: Callable[..., Any] = lambda example, output: 1.0,
    lm: Any = None,
    n: int = 2,
    timeout_seconds: float | None = None,
) -> list[ExampleResult]:
    evaluator = Evaluator(
        FunctionAgent(echo, instrument_openai=False),
        FunctionMetric(verify, style="verifier"),
        lm or FakeLM(lambda m: m[-1]["content"]),
        rollouts=RolloutConfig(timeout_seconds=timeout_seconds),
        recorder=MemoryRecorder(),
    )
    examples = [Example(id=f"ex{i}", input={"word": f"w{i}"}) for i in range(n)]
    candidate = evaluator.system.seed_candidate()
    return (await evaluator.evaluate(candidate, examples, "val")).results


def exits_sync(example: Any, output: Any) -> float:
    sys.exit(3)


async def exits_async(example: Any, output: Any) -> float:
    sys.exit(3)


@pytest.mark.parametrize("fn", [exits_sync, exits_async])
async def test_sys_exit_in_user_code_is_an_error_of_the_call(fn: Callable[..., Any]) -> None:
    with pytest.raises(UserCodeExited, match=r"^the verifier called sys.exit\(3\)$"):
        await call_user_function("verifier", fn, None, None)


async def test_keyboard_interrupt_and_cancellation_pass_through() -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await call_user_function("verifier", interrupted)
    started = threading.Event()

    def blocks() -> None:
        started.set()
        RELEASE.wait(60)

    call = asyncio.ensure_future(call_user_function("verifier", blocks))
    await asyncio.to_thread(started.wait, 5)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


@pytest.mark.parametrize("fn", [exits_sync, exits_async])
async def test_a_verifier_that_calls_sys_exit_fails_its_rollouts_not_the_job(
    fn: Callable[..., Any],
) -> None:
    results = await evaluate(fn)
    assert [r.failure for r in results] == ["verifier", "verifier"]
    assert [r.score for r in results] == [0.0, 0.0]
    assert results[0].error == "UserCodeExited: the verifier called sys.exit(3)"


async def sleeps(example: Any, output: Any) -> float:
    await asyncio.sleep(60)
    return 1.0


@pytest.mark.parametrize("fn", [hangs, sleeps], ids=["sync", "async"])
async def test_a_verifier_with_no_verdict_is_stopped_at_the_rollouts_time_limit(
    fn: Callable[..., Any],
) -> None:
    start = time.monotonic()
    results = await evaluate(fn, timeout_seconds=0.3)
    assert time.monotonic() - start < 5  # both at once, not one after the other
    assert [r.failure for r in results] == ["verifier", "verifier"]
    assert results[0].error == (
        "VerifierTimeout: the verifier gave no verdict within 0.3 s (timeout_s)"
    )


async def test_a_verifier_within_the_time_limit_scores() -> None:
    results = await evaluate(lambda example, output: 0.5, timeout_seconds=0.3)
    assert [(r.score, r.error) for r in results] == [(0.5, None), (0.5, None)]


async def test_a_verifiers_wait_on_an_in_process_model_is_not_its_own_time() -> None:
    async def judges(example: Any, output: Any) -> float:
        with waiting_on_model():  # as a judge's call to a busy local model does
            await asyncio.sleep(0.4)
        return 0.5

    results = await evaluate(judges, timeout_seconds=0.2)
    assert [(r.score, r.error) for r in results] == [(0.5, None), (0.5, None)]


async def test_a_timeout_the_verifier_raises_itself_is_its_own_error() -> None:
    def times_out(example: Any, output: Any) -> float:
        raise TimeoutError("the grading service did not answer")

    results = await evaluate(times_out, timeout_seconds=0.3)
    assert results[0].error == "TimeoutError: the grading service did not answer"


async def test_a_python_model_that_calls_sys_exit_is_a_task_model_error() -> None:
    lm = build_base_lm(LMConfig(model="python/exiting_code:exit_lm"))
    results = await evaluate(lm=lm)
    assert [r.failure for r in results] == ["model", "model"]
    assert "the model python/exiting_code:exit_lm called sys.exit(4)" in (results[0].error or "")


# the CLI: a job whose user code exits or hangs on every example fails with the reason


@pytest.mark.parametrize(
    ("model", "verifier", "reason"),
    [
        (
            "python/scripted_lm:answer_lm",
            "exiting_code:exits",
            "(verifier error: 1); e.g. example word_problems-0001:"
            " UserCodeExited: the verifier called sys.exit(3)",
        ),
        (
            "python/scripted_lm:answer_lm",
            "exiting_code:hangs",
            "VerifierTimeout: the verifier gave no verdict within 0.3 s",
        ),
        (
            "python/exiting_code:exit_lm",
            "verifier_funcs:starts_with_expected",
            "(task model error: 1); e.g. example word_problems-0001:"
            " UserCodeExited: the model python/exiting_code:exit_lm called sys.exit(4)",
        ),
    ],
    ids=["verifier exits", "verifier hangs", "model exits"],
)
def test_train_fails_a_job_whose_user_code_exits_or_hangs_with_the_reason(
    model: str, verifier: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = job_config(tmp_path, model)
    extra = f'timeout_s = 0.3\n[verifier]\nkind = "python"\nfunction = "{verifier}"\n'
    config.write_text(config.read_text() + extra + PROGRAM)
    store = tmp_path / "emery.db"
    code = run_cli(["train", str(config), "--store", str(store)])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1
    assert "1 of 1 rollouts of the seed on val failed with errors, not answers" in last
    assert reason in last
    assert [state for _, state in store_jobs(store)] == ["failed"]  # none left running
