"""Structural mutations inside a map node's sub-graph.

The graph maps an llm node ``solve`` over a list of word problems and a code node adds the
answers. The scripted task model answers one too many in a single call and the right
answer only when shown its own reasoning (the ``answer`` mutation's node): so only a
change inside the map's sub-graph, run once per item, can reach full score.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from graph_support import graph_parent, valid_graph
from lift_support import assert_test_lift

import emery
from emery.core.models import ChatMessage, Dataset, Example
from emery.data.tasks import builtin_task
from emery.lm import FakeLM
from emery.store import MemoryStore
from emery.systems.graph import mutations
from emery.systems.graph.mutations import TEMPLATES, Parent
from emery.systems.graph.spec import GraphConfig, LLMNode, MapNode
from emery.systems.graph.system import SPEC_COMPONENT

GRAPH: dict[str, Any] = {
    "kind": "graph",
    "name": "sum_of_answers",
    "nodes": [
        {
            "kind": "map",
            "name": "each",
            "over": "problems",
            "item": "problem",
            "nodes": [
                {
                    "name": "solve",
                    "instruction": "Solve the problem.",
                    "messages": [{"template": "Problem: {problem}"}],
                    "parser": {"kind": "regex", "pattern": r"Answer:\s*(-?\d+)"},
                },
                {"kind": "output", "value": "solve"},
            ],
        },
        {
            "kind": "code",
            "name": "total",
            "source": "def total(each):\n    return sum(int(x) for x in each)",
        },
        {"kind": "output", "value": "total"},
    ],
}
FIELDS = {"problems"}

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")


def parent() -> Parent:
    return graph_parent(GRAPH, FIELDS)


def valid(spec: dict[str, Any]) -> GraphConfig:
    return valid_graph(spec, FIELDS)


def top_level(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The top-level nodes, a map's sub-graph left out."""
    return [{k: v for k, v in node.items() if k != "nodes"} for node in spec["nodes"]]


def sub_graph(graph: GraphConfig) -> list[str]:
    each = graph.nodes[0]
    assert isinstance(each, MapNode)
    return [node.name for node in each.nodes]


def test_the_targets_reach_the_sub_graph() -> None:
    graph = GraphConfig.model_validate(GRAPH)
    assert mutations.targets(graph) == ["solve"]
    assert mutations.scope_path(graph, "solve") == ("each",)
    assert mutations.scope_path(graph, "total") == ()


def test_check_inside_the_map_changes_only_its_sub_graph() -> None:
    seed = parent()
    [edit] = mutations.check(seed, "solve")
    graph = valid(edit.spec)
    assert sub_graph(graph) == ["solve", "solve_check", "solve_revise", "output"]
    each = graph.nodes[0]
    assert isinstance(each, MapNode)
    assert each.nodes[-1].sources() == {"solve_revise": "solve_revise"}
    revise = each.nodes[2]
    assert isinstance(revise, LLMNode)
    assert "{problem}" in revise.messages[-1].template
    assert top_level(edit.spec) == top_level(seed.spec)
    assert edit.spec["nodes"][0]["nodes"] != seed.spec["nodes"][0]["nodes"]


@pytest.mark.parametrize("template", ["answer", "check", "plan", "vote", "fewer_tokens"])
def test_each_template_applies_inside_the_map(template: str) -> None:
    seed = parent()
    [edit] = TEMPLATES[template](seed, "solve")
    valid(edit.spec)
    assert top_level(edit.spec) == top_level(seed.spec)
    assert edit.spec["nodes"][0]["nodes"] != seed.spec["nodes"][0]["nodes"]


def test_remove_and_merge_of_the_only_sub_graph_node_make_no_child() -> None:
    assert mutations.remove(parent(), "solve") == []
    assert mutations.merge(parent(), "solve") == []
    assert mutations.rewire(parent(), "solve") == []


def pairs() -> Dataset:
    """Two problems per example; the gold output is the sum of their answers."""
    data = builtin_task("word_problems").dataset(seed=0, n_train=8, n_val=4, n_test=4)

    def paired(examples: list[Example]) -> list[Example]:
        return [
            Example(
                id=f"{a.id}+{b.id}",
                input={"problems": [a.input["question"], b.input["question"]]},
                expected=int(a.expected) + int(b.expected),
            )
            for a, b in zip(examples[::2], examples[1::2], strict=True)
        ]

    return Dataset(
        name="answer_sums", train=paired(data.train), val=paired(data.val), test=paired(data.test)
    )


def task_lm() -> FakeLM:
    data = builtin_task("word_problems").dataset(seed=0, n_train=8, n_val=4, n_test=4)
    gold = {str(e.input["question"]): int(e.expected) for e in data}

    def reply(messages: Sequence[ChatMessage]) -> str:
        asked = messages[-1]["content"]
        question = asked.split("\n")[0].removeprefix("Problem: ")
        if question not in gold:
            return "I am not sure."
        if "\nReasoning:\n" in asked:
            return f"Answer: {gold[question]}"
        return f"Adding it all up.\nAnswer: {gold[question] + 1}"

    return FakeLM(reply, model="fake/task")


def test_only_a_sub_graph_mutation_reaches_full_score(tmp_path: Path) -> None:
    proposer = FakeLM(lambda m: "```\nSolve it. End with 'Answer: <n>'.\n```", model="fake/p")
    result = emery.optimize(
        GRAPH,
        pairs(),
        algorithm="graph_gepa",
        budget=120,
        verifier="numeric",
        lm=task_lm(),
        reflection_lm=proposer,
        runtime={"workdir": str(tmp_path / ".emery")},
        store=MemoryStore(),
        progress=False,
    )
    best = assert_test_lift(result, 0.0, 1.0)
    assert best.lineage.operation == "structure.answer"
    assert best.lineage.details["structure"] == "answer@each/solve#0"
    graph = GraphConfig.model_validate_json(best.components[SPEC_COMPONENT])
    assert sub_graph(graph) == ["solve", "solve_answer", "output"]
    assert [node.name for node in graph.nodes] == ["each", "total", "output"]
