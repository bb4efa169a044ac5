"""examples/harness_agent: a code-harness agent loop (loop.py) on a user environment
(warehouse.py) whose ``check`` scores what the agent did; GEPA, reading that feedback,
rewrites the system prompt so the agent places the orders it used to skip."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from examples_support import copy_example, train_example

from emery.core.models import ChatMessage
from emery.lm import FakeLM
from emery.tracing import conventions as sc

RULE = "Call order before you submit whenever the stock is enough."


def _call(tool: str, **arguments: object) -> str:
    return json.dumps({"tool": tool, "arguments": arguments})


def _act(messages: Sequence[ChatMessage]) -> str:
    """A careless clerk: looks up stock and price and submits the total, placing the order
    only when the system prompt carries RULE."""
    asked = re.search(r"asks for (\d+) x (\w+)", messages[1]["content"])
    assert asked is not None
    quantity, item = int(asked.group(1)), asked.group(2)
    done = [json.loads(m["content"])["tool"] for m in messages if m["role"] == "assistant"]
    seen = [m["content"] for m in messages if m["content"].startswith("Observation: ")]
    if "stock" not in done:
        return _call("stock", item=item)
    if int(seen[0].split()[1]) < quantity:
        return _call("submit", answer="out of stock")
    if "price" not in done:
        return _call("price", item=item)
    if RULE in messages[0]["content"] and "order" not in done:
        return _call("order", item=item, quantity=quantity)
    total = quantity * float(seen[1].split()[1])
    return _call("submit", answer=f"{total:.2f}")


def _reflect(messages: Sequence[ChatMessage]) -> str:
    prompt = messages[-1]["content"]
    current = re.findall(r"```[a-z]*\n?(.*?)```", prompt, re.DOTALL)[0].strip()
    rule = f"\n{RULE}" if "the order was never placed" in prompt else ""
    return f"```\n{current}{rule}\n```"


TASK_LM = FakeLM(_act, model="fake/clerk")
REFLECTION_LM = FakeLM(_reflect, model="fake/order-reflection")


def test_the_environment_feedback_teaches_the_agent_to_place_orders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = copy_example("harness_agent", tmp_path, monkeypatch)
    monkeypatch.chdir(folder)  # code_path = "loop.py" is read from the working directory
    trained = train_example(
        folder,
        job__budget__metric_calls=40,
        lm__task__model="python/test_examples_harness:TASK_LM",
        lm__reflection__model="python/test_examples_harness:REFLECTION_LM",
    )
    result = trained.result
    assert result.seed_candidate is not None
    assert result.best_candidate is not None
    assert result.seed_candidate.components["code:runtime"] == (folder / "loop.py").read_text()
    assert result.baseline_val is not None
    assert 0.5 < result.baseline_val < 1.0  # out of stock: 1; in stock, not ordered: 0.5
    assert result.best_val == 1.0
    assert result.best_test is not None
    assert result.best_test.mean == 1.0
    assert RULE in result.best_candidate.components["prompt:system"]
    feedback = trained.feedback(result.seed_candidate.id)
    assert any("the order was never placed" in f for f in feedback)
    assert any(f == "Correctly answered out of stock without ordering." for f in feedback)
    orders = [
        s for s in trained.spans("execute_tool") if s.attributes[sc.GEN_AI_TOOL_NAME] == "order"
    ]
    assert orders  # the winner's episodes placed orders, recorded as tool spans
    assert all("ordered" in s.attributes[sc.GEN_AI_TOOL_CALL_RESULT] for s in orders)
