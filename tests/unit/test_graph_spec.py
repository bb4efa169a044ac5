"""Graph specs: parsing through ``[system]`` and one-line validation errors."""

from __future__ import annotations

from typing import Any

import pytest

from emery.config import parse_config
from emery.core.errors import ConfigError
from emery.systems.graph.spec import GraphConfig
from emery.systems.graph.system import GraphSystem
from emery.systems.registry import build_system, parse_system_config


def llm(name: str, template: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "llm", "name": name, "messages": [{"template": template}], **extra}


def output(value: str) -> dict[str, Any]:
    return {"kind": "output", "value": value}


def graph(*nodes: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "graph", "name": "g", "nodes": list(nodes)}


def config_error(spec: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config({"system": spec, "dataset": {"path": "tasks.json"}})
    message = str(info.value)
    assert "\n" not in message
    return message


PLAN_SOLVE = graph(
    llm("plan", "Plan: {question}", instruction="Make a plan."),
    llm("solve", "{question}\n{plan}", instruction="Follow the plan."),
    output("solve"),
)


def test_a_graph_system_section_builds_a_graph_whose_llm_nodes_are_components() -> None:
    config = parse_config({"system": PLAN_SOLVE, "dataset": {"path": "tasks.json"}})
    assert isinstance(config.system, GraphConfig)
    system = build_system(config.system)
    assert isinstance(system, GraphSystem)
    assert system.seed_candidate().components == {
        "plan": "Make a plan.",
        "solve": "Follow the plan.",
    }
    assert [stage.name for stage in system.config.stages] == ["plan", "solve"]
    system.check_inputs({"question"})


def test_the_version_ignores_instructions_but_not_the_wiring() -> None:
    base = GraphSystem(GraphConfig.model_validate(PLAN_SOLVE))
    reworded = graph(
        llm("plan", "Plan: {question}", instruction="Other words."),
        llm("solve", "{question}\n{plan}", instruction="Follow the plan."),
        output("solve"),
    )
    rewired = graph(
        llm("plan", "Plan: {question}", instruction="Make a plan."),
        llm("solve", "{question}", instruction="Follow the plan."),
        output("solve"),
    )
    assert GraphSystem(GraphConfig.model_validate(reworded)).version() == base.version()
    assert GraphSystem(GraphConfig.model_validate(rewired)).version() != base.version()


def test_the_output_producer_is_the_last_stage_when_nothing_reads_it() -> None:
    system = GraphSystem(
        GraphConfig.model_validate(graph(llm("a", "{q}"), llm("b", "{q}"), output("a")))
    )
    assert [stage.name for stage in system.config.stages] == ["b", "a"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            graph(llm("a", "{b}"), llm("b", "{c}"), llm("c", "{a}"), output("c")),
            "the graph has a cycle: a -> b -> c -> a",
        ),
        (graph(llm("a", "{q}"), {"kind": "loop", "name": "x"}, output("a")), "unknown kind 'loop'"),
        (graph(llm("a", "{q}"), llm("a", "{q}"), output("a")), "repeated: 'a'"),
        (graph(llm("a", "{q}")), "exactly one output node (found 0)"),
        (
            graph(llm("a", "{q}"), output("a"), {"kind": "output", "name": "o2", "value": "a"}),
            "exactly one output node (found 2: output, o2)",
        ),
        (
            graph({"kind": "code", "name": "c", "source": "x = 1"}, output("c")),
            "define one function",
        ),
        (
            graph({"kind": "code", "name": "c", "source": "def f(:\n"}, output("c")),
            "code node 'c': syntax error on line 1",
        ),
        (
            graph({"kind": "code", "name": "c", "source": "def f(*a):\n  return a"}, output("c")),
            "may only take named parameters",
        ),
        (
            graph({"kind": "code", "name": "c", "source": "def f():\n  return 1"}, output("c")),
            "at least one llm node",
        ),
        (graph(llm("bad-name", "{q}"), output("x")), "must be an identifier"),
        (
            graph(
                {
                    "kind": "map",
                    "name": "m",
                    "over": "items",
                    "nodes": [llm("each", "{item}")],
                },
                output("m"),
            ),
            "map 'm': a graph needs exactly one output node (found 0)",
        ),
        (
            graph(
                {
                    "kind": "map",
                    "name": "m",
                    "over": "xs",
                    "nodes": [llm("m2", "{item}"), output("m2")],
                },
                llm("m2", "{q}"),
                output("m"),
            ),
            "repeated: 'm2'",
        ),
    ],
)
def test_invalid_graphs_are_one_line_errors(spec: dict[str, Any], message: str) -> None:
    assert message in config_error(spec)


def test_an_unknown_system_key_names_the_node_path() -> None:
    message = config_error(graph(llm("a", "{q}", instructions="typo"), output("a")))
    assert "unknown key" in message
    assert "instructions" in message


@pytest.mark.parametrize(
    ("spec", "fields", "message"),
    [
        (
            graph(llm("a", "{question}"), output("a")),
            {"q"},
            "node 'a': input {question} is not an input field or a node (available: output, q)",
        ),
        (
            graph(llm("a", "{text}", inputs={"text": "doc"}), output("a")),
            {"q"},
            "node 'a': input {text} (bound to 'doc') is not an input field or a node",
        ),
        (
            graph(llm("a", "{q}", instruction="Use {hint}."), output("a")),
            {"q"},
            "node 'a': input {hint} is not an input field",
        ),
        (
            graph(llm("q", "{x}"), output("q")),
            {"q", "x"},
            "node 'q' has the name of an input field",
        ),
        (
            graph(
                {
                    "kind": "map",
                    "name": "m",
                    "over": "xs",
                    "nodes": [llm("each", "{it}"), output("each")],
                },
                output("m"),
            ),
            {"xs"},
            "map 'm': node 'each': input {it} is not an input field or a node",
        ),
        (graph(llm("a", "{q}"), output("nothing")), {"q"}, "node 'output': input {nothing}"),
    ],
)
def test_unbound_inputs_are_refused_before_any_model_call(
    spec: dict[str, Any], fields: set[str], message: str
) -> None:
    system = build_system(parse_system_config(spec))
    with pytest.raises(ConfigError) as info:
        system.check_inputs(fields)
    assert message in str(info.value)


def test_a_map_sub_graph_reads_the_item_and_outer_values() -> None:
    spec = graph(
        llm("topic", "{doc}"),
        {
            "kind": "map",
            "name": "each",
            "over": "parts",
            "item": "part",
            "nodes": [llm("summarise", "{topic}: {part}"), output("summarise")],
        },
        output("each"),
    )
    system = build_system(parse_system_config(spec))
    assert isinstance(system, GraphSystem)
    system.check_inputs({"doc", "parts"})
    assert [stage.name for stage in system.config.stages] == ["topic", "summarise"]


def test_a_candidate_instruction_that_makes_a_cycle_is_refused() -> None:
    system = GraphSystem(GraphConfig.model_validate(PLAN_SOLVE))
    seed = system.seed_candidate()
    looped = seed.model_copy(update={"components": {**seed.components, "plan": "Use {solve}."}})
    with pytest.raises(ConfigError, match="cycle: plan -> solve -> plan"):
        system.check_candidate(looped, {"question"})
