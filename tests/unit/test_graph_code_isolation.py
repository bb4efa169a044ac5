"""Graph code nodes run in node processes: config checks execute nothing, and whatever a
node's code does (exit, hang, raise, return a value that is not JSON) is that rollout's
error, never the job's, and an error of the run rather than a scored answer."""

from __future__ import annotations

import asyncio
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from bad_input_support import job_config, run_cli
from cases_graphcode import graph_with_code
from pydantic import ValidationError

from emery.config import parse_config
from emery.core.example_result import ExampleResult
from emery.core.models import Example
from emery.core.rollouts import RolloutConfig
from emery.core.work_clock import waiting_on_model
from emery.evaluation import Evaluator
from emery.evaluation.health import ErrorPolicy, ErrorWatch, RolloutErrors
from emery.jobs import create_job
from emery.lm import FakeLM
from emery.store import MemoryStore
from emery.systems.base import RunContext, SystemRun
from emery.systems.graph.code import CALLER, NODE_PROCESS, CodeFailure, NodeCaller
from emery.systems.graph.spec import CodeNode, GraphConfig
from emery.systems.graph.system import GraphSystem
from emery.systems.harness.pool import CodeProcess, CodeProcessPool
from emery.verifiers import ExactMatch


class RecordingPool(CodeProcessPool):
    """A node-process pool that keeps each process it hands out, to check it was killed."""

    def __init__(self) -> None:
        super().__init__(keep=2, module=NODE_PROCESS)
        self.handed: list[CodeProcess] = []

    async def acquire(self) -> CodeProcess:
        process = await super().acquire()
        self.handed.append(process)
        return process


@pytest.fixture(scope="module")
def pool() -> Any:
    owned = RecordingPool()
    yield owned
    owned.close()


def graph_of(source: str, caller: NodeCaller = CALLER) -> GraphSystem:
    """``q`` → an llm node → the code node ``f`` (``source``) → output."""
    spec = {
        "nodes": [
            {"name": "ask", "messages": [{"template": "{q}"}]},
            {"kind": "code", "name": "f", "source": source},
            {"kind": "output", "value": "f"},
        ]
    }
    return GraphSystem(GraphConfig.model_validate(spec), caller)


async def run(graph: GraphSystem) -> SystemRun:
    context = RunContext(lm=FakeLM(["hi"]), example=Example(id="e", input={"q": "x"}))
    return await graph.run(graph.seed_candidate(), context)


async def evaluate(graph: GraphSystem, n: int = 2, timeout_s: float | None = None) -> list[Any]:
    evaluator = Evaluator(
        graph,
        ExactMatch(),
        FakeLM(lambda m: "hi"),
        rollouts=RolloutConfig(timeout_seconds=timeout_s),
    )
    examples = [Example(id=f"e{i}", input={"q": str(i)}, expected="x") for i in range(n)]
    result = await evaluator.evaluate(graph.seed_candidate(), examples, "val")
    return result.results


# config time: the source is compiled, never executed


def test_checking_a_config_runs_none_of_a_code_nodes_module(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    source = f"open({str(marker)!r}, 'w').close()\nimport os\nos._exit(0)\nwhile True:\n"
    source += "    pass\nraise SystemExit(2)\ndef f(ask):\n    return ask\n"
    graph = graph_of(source)
    assert graph.graph.nodes[1].name == "f"
    assert not marker.exists()


def test_creating_a_job_as_the_server_does_runs_none_of_a_code_nodes_module(
    tmp_path: Path,
) -> None:
    source = "import os\nos._exit(0)\nwhile True:\n    pass\ndef check(answer):\n    return 1\n"
    config = job_config(tmp_path).read_text() + graph_with_code(source)
    given = tomllib.loads(config)
    job = create_job(MemoryStore(), parse_config(given), given=given, base_dir=tmp_path)
    assert job.state == "created"


def test_a_module_that_does_not_compile_is_a_config_error() -> None:
    with pytest.raises(ValidationError, match="code node 'f': syntax error on line 1: 'return'"):
        graph_of("return 1\ndef f(ask):\n    return ask")


@pytest.mark.parametrize(
    ("top", "error"),
    [
        ("import os\nos._exit(0)", "the code ended its node process (exit status 0)"),
        ("raise SystemExit(4)", "the source failed to load: the code called sys.exit(4)"),
        ("import sys\nsys.exit()", "the source failed to load: the code called sys.exit(None)"),
    ],
)
async def test_a_module_that_exits_when_loaded_fails_its_rollout(top: str, error: str) -> None:
    result = await run(graph_of(f"{top}\ndef f(ask):\n    return ask"))
    assert result.error == f"node 'f': {error}"
    assert result.failure == "error"


# run time: each ending of the code is the rollout's error


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("import os\n    os._exit(0)", "the code ended its node process (exit status 0)"),
        ("import sys\n    sys.exit(3)", "the code called sys.exit(3)"),
        ("raise ValueError('bad ' + ask)", "ValueError: bad hi"),
        ("return f(ask)", "RecursionError: maximum recursion depth exceeded"),
        ("return {ask}", "it returned a set that is not JSON (Object of type set is not JSON"),
        ("return float('nan')", "it returned a float that is not JSON (Out of range float"),
    ],
)
async def test_a_failing_node_is_an_error_of_its_run(body: str, error: str) -> None:
    result = await run(graph_of(f"def f(ask):\n    {body}"))
    assert result.error is not None
    assert result.error.startswith(f"node 'f': {error}")
    assert result.failure == "error"
    assert [call.component for call in result.calls] == ["ask", "f"]
    assert result.calls[-1].error == result.error.removeprefix("node 'f': ")


async def test_values_come_back_as_json_and_async_functions_are_awaited() -> None:
    result = await run(graph_of("async def f(ask):\n    return {'got': [ask, 1, None]}"))
    assert result.error is None
    assert result.output == {"got": ["hi", 1, None]}


async def test_a_map_over_no_list_is_an_error_of_the_run() -> None:
    spec = {
        "nodes": [
            {"name": "ask", "messages": [{"template": "{q}"}]},
            {
                "kind": "map",
                "name": "each",
                "over": "ask",
                "nodes": [
                    {"kind": "code", "name": "g", "source": "def g(item):\n    return item"},
                    {"kind": "output", "value": "g"},
                ],
            },
            {"kind": "output", "value": "each"},
        ]
    }
    graph = GraphSystem(GraphConfig.model_validate(spec))
    result = await run(graph)
    assert result.error == "node 'each': 'over' (ask) must be a list, not a str"
    assert result.failure == "error"


BUSY = "def f(ask):\n    while True:\n        pass"


async def test_a_busy_call_is_stopped_at_its_time_limit(pool: RecordingPool) -> None:
    node = graph_of(BUSY).graph.nodes[1]
    assert isinstance(node, CodeNode)
    start = time.monotonic()
    with pytest.raises(CodeFailure, match=r"^no value within 0.3 s; the call was stopped$"):
        await NodeCaller(pool, timeout_s=0.3).call(node, {"ask": "x"})
    assert time.monotonic() - start < 2.0
    assert not pool.handed[-1].alive


async def test_a_busy_node_is_stopped_at_the_rollouts_time_limit(pool: RecordingPool) -> None:
    pool.release(await pool.acquire(), healthy=True)  # a started process: 0.5 s is short
    start = time.monotonic()
    [result] = await evaluate(graph_of(BUSY, NodeCaller(pool)), n=1, timeout_s=0.5)
    assert time.monotonic() - start < 3.0
    # the node's limit (0.45 s, "no value within ...") comes first unless the machine is busy
    # enough to let the rollout's (0.5 s) pass while the node's error is on its way
    assert result.failure in ("error", "timeout")
    assert result.error is not None
    assert "within" in result.error
    assert not pool.handed[-1].alive


class SlowModel(FakeLM):
    """Replies "hi" after ``wait_s`` spent waiting as an in-process model does (queued)."""

    def __init__(self, wait_s: float) -> None:
        super().__init__(lambda m: "hi")
        self.wait_s = wait_s

    async def complete(self, messages: Any, **params: Any) -> Any:
        with waiting_on_model():
            await asyncio.sleep(self.wait_s)
        return await super().complete(messages, **params)


async def test_time_waiting_on_the_model_does_not_shorten_a_nodes_limit(
    pool: RecordingPool,
) -> None:
    pool.release(await pool.acquire(), healthy=True)  # a started process
    graph = graph_of("def f(ask):\n    return ask", NodeCaller(pool))
    evaluator = Evaluator(
        graph, ExactMatch(), SlowModel(wait_s=0.6), rollouts=RolloutConfig(timeout_seconds=0.5)
    )
    example = Example(id="e", input={"q": "x"}, expected="hi")
    result = await evaluator.evaluate(graph.seed_candidate(), [example], "val")
    assert result.results[0].error is None
    assert result.scores == [1.0]


async def test_cancelling_a_run_kills_its_busy_process(pool: RecordingPool) -> None:
    graph = graph_of(BUSY, NodeCaller(pool))
    before = len(pool.handed)
    task = asyncio.ensure_future(run(graph))
    while len(pool.handed) == before:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not pool.handed[-1].alive


async def test_a_seed_whose_node_raises_on_every_example_fails_the_job() -> None:
    graph = graph_of("def f(ask):\n    raise KeyError(ask)")
    results: list[ExampleResult] = await evaluate(graph)
    assert [r.failure for r in results] == ["error", "error"]
    with pytest.raises(RolloutErrors, match="2 of 2 rollouts of the seed on val failed with err"):
        ErrorWatch(ErrorPolicy()).check(graph.seed_candidate(), "val", results, results)


async def test_one_pool_of_node_processes_serves_a_whole_evaluation(pool: RecordingPool) -> None:
    graph = graph_of("def f(ask):\n    return ask + '!'", NodeCaller(pool, max_processes=2))
    started = pool.started
    results = await evaluate(graph, n=6)
    assert [r.output for r in results] == ["hi!"] * 6
    assert pool.started - started <= 2


# the CLI: a module that exits or hangs when loaded fails the job with its reason


@pytest.mark.parametrize(
    ("top", "reason"),
    [
        ("import os\nos._exit(0)", "the code ended its node process (exit status 0)"),
        ("raise SystemExit", "the source failed to load: the code called sys.exit(None)"),
        ("while True:\n    pass", "within"),  # the node's limit or the rollout's
    ],
)
def test_train_fails_a_graph_whose_module_exits_or_hangs_with_the_reason(
    top: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = job_config(tmp_path)
    system = graph_with_code(f"{top}\ndef check(answer):\n    return answer\n")
    config.write_text(config.read_text() + "timeout_s = 0.5\n" + system)  # under [runtime]
    code = run_cli(["train", str(config), "--store", str(tmp_path / "emery.db")])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1
    assert "1 of 1 rollouts of the seed on val failed with errors, not answers" in last
    assert reason in last
