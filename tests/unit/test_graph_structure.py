"""Structural mutations of a graph spec: each yields a graph that passes the graph's own
validation and runs; an invalid one, or one over ``target_llm_calls``, is rejected with
its reason before any rollout; a candidate runs the graph its ``graph:spec`` holds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from graph_support import graph_parent, valid_graph

from emery.algorithms.context import build_search_context
from emery.algorithms.gepa.mutation import Basis, operate
from emery.algorithms.gepa.state import GepaState, PoolEntry
from emery.algorithms.graph_gepa.structure import Limits, structural_child
from emery.core.errors import ConfigError
from emery.core.models import ChatMessage, Dataset, Example
from emery.evaluation.eval_result import EvalResult
from emery.lm import FakeLM
from emery.systems.base import RunContext
from emery.systems.graph import mutations
from emery.systems.graph.mutations import TEMPLATES, Parent
from emery.systems.graph.spec import GraphConfig
from emery.systems.graph.system import SPEC_COMPONENT, GraphSystem, llm_calls
from emery.verifiers.config import VerifierConfig, build_verifier

ONE_NODE: dict[str, Any] = {
    "kind": "graph",
    "nodes": [
        {
            "name": "solve",
            "instruction": "Solve it.",
            "messages": [{"template": "Problem: {question}"}],
            "parser": {"kind": "regex", "pattern": r"Answer:\s*(-?\d+)"},
        },
        {"kind": "output", "value": "solve"},
    ],
}
TWO_NODES: dict[str, Any] = {
    "kind": "graph",
    "nodes": [
        {"name": "extract", "messages": [{"template": "Problem: {question}"}]},
        {
            "name": "solve",
            "instruction": "Solve it.",
            "messages": [{"template": "Problem: {question}\nNumbers: {extract}"}],
        },
        {"kind": "output", "value": "solve"},
    ],
}
FIELDS = {"question"}


def parent_of(spec: dict[str, Any]) -> Parent:
    return graph_parent(spec, FIELDS)


def valid(spec: dict[str, Any]) -> GraphConfig:
    return valid_graph(spec, FIELDS)


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_every_structural_mutation_yields_a_valid_graph(template: str) -> None:
    made = [
        edit
        for spec in (ONE_NODE, TWO_NODES)
        for target in mutations.targets(GraphConfig.model_validate(spec))
        for edit in TEMPLATES[template](parent_of(spec), target)
    ]
    if template == "more_tokens":  # no node has max_tokens set: nothing to double
        assert made == []
        return
    assert made, f"{template} made no child of either graph"
    for edit in made:
        if template == "rewire":  # extract reading solve is a cycle: rejected, see below
            continue
        graph = valid(edit.spec)
        assert graph != GraphConfig.model_validate(ONE_NODE)


def test_answer_splits_a_node_into_reasoning_and_answer() -> None:
    [edit] = mutations.answer(parent_of(ONE_NODE), "solve")
    graph = valid(edit.spec)
    solve, answer = graph.llm_nodes()
    assert (solve.name, answer.name) == ("solve", "solve_answer")
    assert solve.parser.kind == "raw"
    assert answer.parser.kind == "regex"
    assert "Reasoning:\n{solve}" in answer.messages[-1].template
    assert graph.nodes[-1].sources() == {"solve_answer": "solve_answer"}
    assert set(edit.texts) == {"solve_answer"}


def test_check_plan_vote_and_tokens_shape_the_graph() -> None:
    parent = parent_of(ONE_NODE)
    [checked] = mutations.check(parent, "solve")
    assert [n.name for n in valid(checked.spec).llm_nodes()] == [
        "solve",
        "solve_check",
        "solve_revise",
    ]
    assert llm_calls(valid(checked.spec)) == 3
    solve, _, revise = valid(checked.spec).llm_nodes()
    assert (solve.parser.kind, revise.parser.kind) == ("raw", "regex")
    assert valid(checked.spec).nodes[-1].sources() == {"solve_revise": "solve_revise"}
    [planned] = mutations.plan(parent, "solve")
    assert [n.name for n in valid(planned.spec).llm_nodes()] == ["solve_plan", "solve"]
    [voted] = mutations.vote(parent, "solve")
    [node] = valid(voted.spec).llm_nodes()
    assert (node.samples, node.temperature, llm_calls(valid(voted.spec))) == (3, 0.7, 3)
    [fewer] = TEMPLATES["fewer_tokens"](parent, "solve")
    assert valid(fewer.spec).llm_nodes()[0].max_tokens == 256


def test_remove_and_merge_take_a_node_out() -> None:
    parent = parent_of(TWO_NODES)
    [removed] = mutations.remove(parent, "extract")
    graph = valid(removed.spec)
    assert [n.name for n in graph.llm_nodes()] == ["solve"]
    assert graph.llm_nodes()[0].messages[0].template == "Problem: {question}"
    assert removed.removed == ("extract",)
    [bypassed] = mutations.remove(parent, "solve")  # the output reads extract instead
    assert [n.name for n in valid(bypassed.spec).llm_nodes()] == ["extract"]
    [merged] = mutations.merge(parent, "solve")
    assert [n.name for n in valid(merged.spec).llm_nodes()] == ["solve"]
    assert merged.removed == ("extract",)
    assert mutations.remove(parent_of(ONE_NODE), "solve") == []


def test_an_invalid_structure_is_rejected_by_the_graph_validation() -> None:
    [cycle] = mutations.rewire(parent_of(TWO_NODES), "extract")
    with pytest.raises(ConfigError, match="cycle: extract -> solve -> extract"):
        valid(cycle.spec)


def problems() -> Dataset:
    def example(i: int, split: str) -> Example:
        return Example(id=f"{split}{i}", input={"question": f"{i} + 1"}, expected=str(i + 1))

    return Dataset(
        train=[example(i, "t") for i in range(3)], val=[example(i, "v") for i in range(2)]
    )


def context(spec: dict[str, Any]) -> Any:
    system = GraphSystem(GraphConfig.model_validate(spec))
    lm = FakeLM(lambda messages: "Answer: 1", model="fake/task")
    return build_search_context(
        system=system,
        dataset=problems(),
        verifier=build_verifier(VerifierConfig(kind="numeric")),
        lms={"task": lm, "reflection": lm},
    )


def basis_of(ctx: Any) -> Basis:
    seed = ctx.system.with_structure(ctx.seed_candidate)
    entry = PoolEntry(candidate=seed)
    before = EvalResult(candidate_id=seed.id, results=[])
    return Basis(entry, ["solve"], ctx.train, before, 1)


def test_a_cycle_is_rejected_with_its_reason_before_any_rollout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mutations, "TEMPLATES", {"rewire": mutations.rewire})
    ctx = context(TWO_NODES)
    basis = basis_of(ctx)
    state = GepaState(pool=[basis.parent])
    assert structural_child(ctx, state, basis, Limits()) is None
    [event] = [e for e in ctx.log.events if e.kind == "gepa.proposal_invalid"]
    assert event.data["component"] == SPEC_COMPONENT
    assert "structure.rewire@extract#0" in event.data["reason"]
    assert "the graph has a cycle" in event.data["reason"]
    assert ctx.budget.usage.metric_calls == 0
    assert not ctx.candidates
    assert state.sources["structure.rewire"].invalid == 1
    # offered once: the same parent is not offered the same mutation again
    assert structural_child(ctx, state, basis, Limits()) is None
    assert len([e for e in ctx.log.events if e.kind == "gepa.proposal_invalid"]) == 1


def test_children_over_target_llm_calls_are_rejected_before_any_rollout() -> None:
    ctx = context(ONE_NODE)
    basis = basis_of(ctx)
    state = GepaState(pool=[basis.parent])
    mutation = structural_child(ctx, state, basis, Limits(target_llm_calls=1))
    assert mutation is not None
    assert mutation.source == "structure.fewer_tokens"
    reasons = [e.data["reason"] for e in ctx.log.events if e.kind == "gepa.proposal_invalid"]
    assert [r.split(":")[0] for r in reasons] == [
        "structure.answer@solve#0",
        "structure.check@solve#0",
        "structure.plan@solve#0",
        "structure.vote@solve#0",
    ]
    assert all("over target_llm_calls=1" in reason for reason in reasons)
    assert ctx.budget.usage.metric_calls == 0
    assert mutation.changed == [SPEC_COMPONENT]


async def test_a_candidate_runs_the_graph_its_spec_holds_and_votes() -> None:
    system = GraphSystem(GraphConfig.model_validate(ONE_NODE))
    seed = system.with_structure(system.seed_candidate())
    parent = parent_of(ONE_NODE)
    [split] = mutations.answer(parent, "solve")
    [voted] = mutations.vote(parent, "solve")
    replies = iter(["I think 3.", "Answer: 3", "Answer: 4", "Answer: 3"])

    def reply(messages: Sequence[ChatMessage]) -> str:
        asked = messages[-1]["content"]
        return "Answer: 2" if "Reasoning:" in asked else next(replies)

    example = Example(id="e", input={"question": "1 + 1"})
    ctx = RunContext(lm=FakeLM(reply, model="fake/task"), example=example)
    texts = {**seed.components, "solve_answer": "Give the answer."}
    split_run = await system.run(
        seed.model_copy(update={"components": {**texts, SPEC_COMPONENT: json.dumps(split.spec)}}),
        ctx,
    )
    assert split_run.error is None
    assert [c.component for c in split_run.calls] == ["solve", "solve_answer"]
    assert split_run.output == "2"
    vote_run = await system.run(
        seed.model_copy(update={"components": {**texts, SPEC_COMPONENT: json.dumps(voted.spec)}}),
        ctx,
    )
    assert [c.component for c in vote_run.calls] == ["solve"] * 3
    assert vote_run.output == "3"
    broken = seed.model_copy(update={"components": {**texts, SPEC_COMPONENT: "{}"}})
    assert (await system.run(broken, ctx)).error == "missing required key 'graph:spec.nodes'"
    with pytest.raises(ConfigError, match="graph:spec"):
        system.check_candidate(broken, FIELDS)


def test_edit_operators_reach_a_node_a_structural_child_added() -> None:
    ctx = context(ONE_NODE)
    basis = basis_of(ctx)
    state = GepaState(pool=[basis.parent])
    split = structural_child(ctx, state, basis, Limits())
    assert split is not None
    assert split.source == "structure.answer"
    entry = PoolEntry(candidate=split.child)
    child = operate(
        ctx, GepaState(pool=[entry]), replace(basis, parent=entry, components=["solve_answer"])
    )
    assert child is not None
    assert child.changed == ["solve_answer:answer"]  # the restating answer stage, on the new node
