"""GEPA, MIPRO and APO optimize a two-node graph's node instructions, unchanged.

The graph extracts the numbers of a word problem (node ``extract``), then solves it from the
question and the numbers (node ``solve``, whose reply must end with ``Answer: <n>``). The
scripted task model solves every problem, but writes the answer line only when the solve
node's instruction mentions ``Answer:``: the seed scores 0 and the only way up is a new
``solve`` instruction. The scripted proposer suggests one for any component it is asked
about, so each algorithm must pick the right node's component, score it and keep it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import emery
from emery.core.models import ChatMessage, Dataset
from emery.data.tasks import builtin_task
from emery.lm import FakeLM
from emery.store import MemoryStore

SEED_SOLVE = "Solve the problem using the numbers."
PROPOSAL = "Work it out step by step. End with a final line 'Answer: <number>'."
GRAPH: dict[str, Any] = {
    "kind": "graph",
    "name": "extract_solve",
    "nodes": [
        {
            "kind": "llm",
            "name": "extract",
            "instruction": "List the numbers in the problem.",
            "messages": [{"template": "Problem: {question}"}],
        },
        {
            "kind": "llm",
            "name": "solve",
            "instruction": SEED_SOLVE,
            "messages": [{"template": "Problem: {question}\nNumbers: {extract}"}],
            "parser": {"kind": "regex", "pattern": r"Answer:\s*(-?\d+)"},
        },
        {"kind": "output", "value": "solve"},
    ],
}

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")


def problems() -> Dataset:
    return builtin_task("word_problems").dataset(seed=0, n_train=6, n_val=4, n_test=4)


def task_lm(data: Dataset) -> FakeLM:
    gold = {str(e.input["question"]): int(e.expected) for e in data}

    def reply(messages: Sequence[ChatMessage]) -> str:
        instruction = next((m["content"] for m in messages if m["role"] == "system"), "")
        asked = messages[-1]["content"]
        question = asked.split("\n")[0].removeprefix("Problem: ")
        if "\nNumbers: " not in asked:
            return " ".join(re.findall(r"\d+", question))
        if question not in gold:  # a layout that moves the problem (inline demos first)
            return "I am not sure."
        if "Answer:" in instruction:
            return f"Adding it up.\nAnswer: {gold[question]}"
        return f"It comes to {gold[question]}."

    return FakeLM(reply, model="fake/task")


def proposer_reply(messages: Sequence[ChatMessage]) -> str:
    prompt = messages[-1]["content"]
    if "List up to four" in prompt:
        return "- everyday arithmetic\n- whole-number answers"
    if "Summarize them" in prompt:
        return "Arithmetic word problems; each answer is a whole number."
    return f"```\n{PROPOSAL}\n```"


SETTINGS: dict[str, dict[str, Any]] = {
    "gepa": {},
    "mipro": {},
    "apo": {"beam_width": 2, "branch_factor": 2, "rounds": 2, "gradient_batch_size": 3},
}


@pytest.mark.parametrize("algorithm", ["gepa", "mipro", "apo"])
def test_each_algorithm_lifts_a_graph_by_rewriting_a_node(algorithm: str, tmp_path: Path) -> None:
    data = problems()
    store = MemoryStore()
    proposer = FakeLM(proposer_reply, model="fake/proposer")
    result = emery.optimize(
        GRAPH,
        data,
        algorithm=algorithm,
        budget=120,
        verifier="numeric",
        lm=task_lm(data),
        reflection_lm=proposer,
        settings=SETTINGS[algorithm],
        runtime={"workdir": str(tmp_path / ".emery")},
        store=store,
        progress=False,
    )
    assert result.state == "succeeded"
    assert result.baseline_val == 0.0
    assert result.best_val == 1.0
    assert result.baseline_test is not None
    assert result.baseline_test.mean == 0.0
    assert result.best_test is not None
    assert result.best_test.mean == 1.0
    best = result.best_candidate
    assert best is not None
    assert best.components["solve"] != SEED_SOLVE
    assert "Answer:" in best.components["solve"]
    changed = [
        c for c in store.job_candidates(result.job_id) if c.components.get("solve") != SEED_SOLVE
    ]
    assert changed
    assert all(set(c.components) >= {"extract", "solve"} for c in changed)
    if algorithm == "gepa":  # reflection on one node sees what the other node replied
        prompts = [call[-1]["content"] for call in proposer.calls]
        assert any("(Other step) extract replied:" in prompt for prompt in prompts)
