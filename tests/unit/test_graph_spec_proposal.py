"""The reflection model's own graph (``structure.lm``): with no template left, graph_gepa
asks it for a whole new graph, rejects an invalid one with its reason before any rollout,
and scores a valid one like any child. The task is ``test_graph_gepa``'s: only a node shown
the reasoning of another answers right."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from test_graph_gepa import GRAPH, problems, task_lm

import emery
from emery.core.events import Event
from emery.core.models import ChatMessage
from emery.lm import FakeLM
from emery.store import MemoryStore
from emery.systems.graph.spec import GraphConfig
from emery.systems.graph.system import SPEC_COMPONENT

FINAL = "Give the final answer as 'Answer: <number>'."
THINK_FINAL: dict[str, Any] = {
    "kind": "graph",
    "nodes": [
        {
            "name": "think",
            "instruction": "Think it through.",
            "messages": [{"template": "Problem: {question}"}],
        },
        {
            "name": "final",
            "instruction": FINAL,
            "messages": [{"template": "Problem: {question}\n\nReasoning:\n{think}"}],
            "parser": {"kind": "regex", "pattern": r"Answer:\s*(-?\d+)"},
        },
        {"kind": "output", "value": "final"},
    ],
}
CYCLE: dict[str, Any] = {
    "nodes": [
        {"name": "a", "messages": [{"template": "{question} {b}"}]},
        {"name": "b", "messages": [{"template": "{a}"}]},
        {"kind": "output", "value": "b"},
    ]
}


def reflection(prompts: list[str]) -> FakeLM:
    graphs = iter([CYCLE, THINK_FINAL])

    def reply(messages: Sequence[ChatMessage]) -> str:
        prompt = messages[-1]["content"]
        if "workflow graph" not in prompt:
            return "```\nSolve the problem carefully. End with 'Answer: <number>'.\n```"
        prompts.append(prompt)
        return f"Here it is.\n```json\n{json.dumps(next(graphs), indent=1)}\n```"

    return FakeLM(reply, model="fake/reflection")


def test_the_reflection_models_graph_is_checked_then_scored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("emery.systems.graph.mutations.TEMPLATES", {})
    data = problems()
    prompts: list[str] = []
    seen: list[Event] = []
    result = emery.optimize(
        GRAPH,
        data,
        algorithm="graph_gepa",
        budget=150,
        verifier="numeric",
        lm=task_lm(data),
        reflection_lm=reflection(prompts),
        settings={"structure_every": 1},
        runtime={"workdir": str(tmp_path / ".emery")},
        store=MemoryStore(),
        on_event=seen.append,
        progress=False,
    )
    assert result.best_test is not None
    assert result.best_test.mean == 1.0
    best = result.best_candidate
    assert best is not None
    assert best.lineage.operation == "structure.lm"
    assert best.components["final"] == FINAL
    graph = GraphConfig.model_validate_json(best.components[SPEC_COMPONENT])
    assert [node.name for node in graph.llm_nodes()] == ["think", "final"]
    assert "solve" not in best.components  # the parent's node it dropped
    invalid = [e.data for e in seen if e.kind == "gepa.proposal_invalid"]
    assert len(invalid) == 1
    assert invalid[0]["reason"].startswith("structure.lm#1: ")
    assert "the graph has a cycle" in invalid[0]["reason"]
    assert '"instruction": "Solve the problem."' in prompts[0]  # the parent's texts shown
    assert "Expected: " in prompts[0]
