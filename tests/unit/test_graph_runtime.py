"""Running graphs: concurrency, map nodes, code nodes, per-node spans and failures."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from emery.core.models import ChatMessage, Example
from emery.evaluation import Evaluator
from emery.lm import FakeLM
from emery.lm.base import Completion
from emery.store import MemoryStore
from emery.store.records import NewJob
from emery.systems.base import RunContext, SystemRun
from emery.systems.graph.spec import GraphConfig
from emery.systems.graph.system import GraphSystem
from emery.tracing.store_recorder import StoreRecorder, load_spans
from emery.verifiers import ExactMatch


class OverlapLM:
    """Echoes the last message upper-cased after a pause; records the most calls in flight."""

    model = "fake/overlap"

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep(0.05)
        self.in_flight -= 1
        return Completion(text=messages[-1]["content"].upper(), model=self.model)


def llm(name: str, template: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "llm", "name": name, "messages": [{"template": template}], **extra}


def code(name: str, source: str) -> dict[str, Any]:
    return {"kind": "code", "name": name, "source": source}


def system(*nodes: dict[str, Any]) -> GraphSystem:
    return GraphSystem(GraphConfig.model_validate({"name": "g", "nodes": list(nodes)}))


async def run(graph: GraphSystem, lm: Any, **inputs: Any) -> SystemRun:
    context = RunContext(lm=lm, example=Example(id="e", input=inputs))
    return await graph.run(graph.seed_candidate(), context)


FAN_IN = (
    llm("left", "left {q}"),
    llm("right", "right {q}"),
    code("join", "def join(left, right):\n    return left + ' | ' + right"),
    {"kind": "output", "value": "join"},
)


async def test_independent_nodes_run_concurrently_and_feed_their_readers() -> None:
    lm = OverlapLM()
    result = await run(system(*FAN_IN), lm, q="x")
    assert result.error is None
    assert result.output == "LEFT X | RIGHT X"
    assert lm.most == 2
    assert [call.component for call in result.calls] == ["left", "right", "join"]
    join = result.calls[-1]
    assert join.inputs == {"left": "LEFT X", "right": "RIGHT X"}
    assert join.reply == "LEFT X | RIGHT X"


async def test_a_chain_waits_for_each_node() -> None:
    lm = OverlapLM()
    graph = system(llm("a", "{q}"), llm("b", "then {a}"), {"kind": "output", "value": "b"})
    result = await run(graph, lm, q="go")
    assert result.output == "THEN GO"
    assert lm.most == 1


async def test_inputs_rename_sources_and_parsers_shape_values() -> None:
    graph = system(
        llm(
            "count", "{text}", inputs={"text": "doc"}, parser={"kind": "regex", "pattern": r"(\d+)"}
        ),
        code("double", "def double(count):\n    return int(count) * 2"),
        {"kind": "output", "value": "double"},
    )
    result = await run(graph, FakeLM(["There are 21 words."]), doc="some text")
    assert result.output == 42
    assert result.calls[0].inputs == {"text": "some text"}


async def test_a_map_node_runs_its_sub_graph_per_item_concurrently() -> None:
    lm = OverlapLM()
    graph = system(
        code("words", "def words(text):\n    return text.split()"),
        {
            "kind": "map",
            "name": "each",
            "over": "words",
            "item": "word",
            "nodes": [llm("shout", "{word}!"), {"kind": "output", "value": "shout"}],
        },
        {"kind": "output", "value": "each"},
    )
    result = await run(graph, lm, text="a b c")
    assert result.output == ["A!", "B!", "C!"]
    assert lm.most == 3
    assert [c.component for c in result.calls] == ["words", "shout", "shout", "shout"]


async def test_a_failing_node_stops_the_graph_with_its_name() -> None:
    lm = OverlapLM()
    graph = system(
        code("boom", "def boom(q):\n    raise ValueError('bad ' + q)"),
        llm("after", "{boom}"),
        {"kind": "output", "value": "after"},
    )
    result = await run(graph, lm, q="input")
    assert result.error == "node 'boom': ValueError: bad input"
    assert result.output is None
    assert lm.most == 0
    assert [c.component for c in result.calls] == ["boom"]
    assert result.calls[0].error == "ValueError: bad input"


async def test_an_unparsable_reply_fails_its_node_and_cancels_the_rest() -> None:
    lm = FakeLM(lambda m: "no number here" if "count" in m[-1]["content"] else "fine")
    graph = system(
        llm("counter", "count {q}", parser={"kind": "regex", "pattern": r"(\d+)"}),
        llm("other", "other {q}"),
        code("both", "def both(counter, other):\n    return counter + other"),
        {"kind": "output", "value": "both"},
    )
    result = await run(graph, lm, q="x")
    assert result.error is not None
    assert result.error.startswith("node 'counter': the reply must match the pattern")


async def test_a_failing_map_item_names_the_map_the_node_and_the_item() -> None:
    graph = system(
        {
            "kind": "map",
            "name": "each",
            "over": "xs",
            "nodes": [
                code("inverse", "def inverse(item):\n    return 1 / item"),
                {"kind": "output", "value": "inverse"},
            ],
        },
        llm("say", "{each}"),
        {"kind": "output", "value": "say"},
    )
    result = await run(graph, FakeLM(["ok"]), xs=[1, 0, 2])
    assert result.error == (
        "node 'each': node 'inverse': ZeroDivisionError: division by zero (item 1)"
    )
    not_list = await run(graph, FakeLM(["ok"]), xs="abc")
    assert not_list.error == "node 'each': 'over' (xs) must be a list, not a str"


async def test_each_node_is_one_span_under_the_rollout_with_its_lm_call_inside() -> None:
    store = MemoryStore()
    job = store.create_job(
        NewJob(id="job-g", name="t", algorithm="baseline", config={"dataset": {"task": "x"}})
    )
    graph = system(*FAN_IN)
    evaluator = Evaluator(
        graph,
        ExactMatch(),
        FakeLM(lambda m: m[-1]["content"].upper()),
        recorder=StoreRecorder(store, job.id),
        job_id=job.id,
    )
    example = Example(id="e1", input={"q": "x"}, expected="LEFT X | RIGHT X")
    result = await evaluator.evaluate(graph.seed_candidate(), [example], "val")
    assert result.scores == [1.0]
    spans = load_spans(store, result.results[0].rollout_id or "")
    root = next(s for s in spans if s.name == "emery.rollout")
    nodes = {s.attributes["emery.node.name"]: s for s in spans if s.name == "emery.node"}
    assert set(nodes) == {"left", "right", "join", "output"}
    assert all(s.parent_id == root.span_id for s in nodes.values())
    chats = [s for s in spans if s.name.startswith("chat")]
    assert len(chats) == 2
    assert {s.parent_id for s in chats} == {nodes["left"].span_id, nodes["right"].span_id}


async def test_a_failed_node_span_is_marked_as_an_error() -> None:
    store = MemoryStore()
    job = store.create_job(
        NewJob(id="job-f", name="t", algorithm="baseline", config={"dataset": {"task": "x"}})
    )
    graph_llm = system(
        llm("a", "{q}"),
        code("boom", "def boom(a):\n    raise KeyError(a)"),
        {"kind": "output", "value": "boom"},
    )
    evaluator = Evaluator(
        graph_llm,
        ExactMatch(),
        FakeLM(["hi"]),
        recorder=StoreRecorder(store, job.id),
        job_id=job.id,
    )
    result = await evaluator.evaluate(
        graph_llm.seed_candidate(), [Example(id="e", input={"q": "k"})]
    )
    assert result.results[0].error == "node 'boom': KeyError: 'hi'"
    spans = load_spans(store, result.results[0].rollout_id or "")
    failed = [s for s in spans if s.name == "emery.node" and s.status == "error"]
    assert [s.attributes["emery.node.name"] for s in failed] == ["boom"]
