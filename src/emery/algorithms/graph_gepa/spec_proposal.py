"""A whole new graph proposed by the reflection model (``structure.lm``).

When the templates have no untried child left for a parent, the reflection model is shown
the task, the parent's graph (with each llm node's instruction) and the minibatch runs it
did not solve, and replies with a new graph as one JSON object. Its llm nodes'
instructions become components, the rest the ``graph:spec``; the child is then validated
like a template's before any rollout.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from emery.core.example_result import ExampleResult
from emery.core.models import ChatMessage, Example
from emery.systems.capabilities import StructureEdit
from emery.verifiers.base import as_text

MAX_TOKENS = 1500
EXCERPT = 400
SHOWN = 3
FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)```", re.DOTALL)
PROMPT = """You design a workflow graph of LM calls that solves a task.

Task: {task}

The current graph (JSON). Each llm node is one LM call: "instruction" is its system prompt,
"messages" its user turn, whose {{name}} placeholders read an input field ({fields}) or the
reply of the node of that name; "parser" reads its reply; "samples" > 1 votes over several
replies. A code node's "source" is a Python function of earlier values. The "output" node's
"value" names the graph's output. There must be no cycle.

```json
{graph}
```

Runs of the current graph that did not score full marks:
{runs}

Propose a better graph: add, remove or rewire nodes, or change their texts. Reply with the
whole new graph as one JSON object in a ```json block."""


def spec_messages(
    task: str,
    spec: Mapping[str, Any],
    components: Mapping[str, str],
    fields: Sequence[str],
    examples: Sequence[Example],
    results: Sequence[ExampleResult],
) -> list[ChatMessage]:
    """The chat asking for a new graph given the parent's ``spec`` and its runs."""
    graph = json.dumps(_with_texts(spec, components), indent=1)
    failed = [(e, r) for e, r in zip(examples, results, strict=False) if r.score < 1.0]
    runs = "\n\n".join(_run(example, result) for example, result in failed[:SHOWN]) or "(none)"
    content = PROMPT.format(
        task=task or "(not described)", fields=", ".join(fields), graph=graph, runs=runs
    )
    return [{"role": "user", "content": content}]


def _run(example: Example, result: ExampleResult) -> str:
    lines = [f"Input: {as_text(example.input)[:EXCERPT]}"]
    lines.append(f"Output: {as_text(result.output)[:EXCERPT]}")
    if example.expected is not None:
        lines.append(f"Expected: {as_text(example.expected)[:EXCERPT]}")
    if result.feedback or result.error:
        lines.append(f"Feedback: {(result.feedback or result.error or '')[:EXCERPT]}")
    return "\n".join(lines)


def _with_texts(value: Any, components: Mapping[str, str]) -> Any:
    """``value`` (a spec) with each llm node's instruction from ``components``."""
    if isinstance(value, dict):
        out = {key: _with_texts(item, components) for key, item in value.items()}
        if value.get("kind") == "llm":
            out = {"name": out["name"], "instruction": components.get(out["name"], ""), **out}
        return out
    if isinstance(value, list):
        return [_with_texts(item, components) for item in value]
    return value


def parse_graph(reply: str, parent_llm_nodes: Sequence[str]) -> tuple[StructureEdit | None, str]:
    """The structure a reply proposes, or None and why it has none."""
    fences = FENCE.findall(reply)
    text = fences[-1] if fences else reply[reply.find("{") : reply.rfind("}") + 1]
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"the reply holds no JSON graph ({exc.msg} at line {exc.lineno})"
    if not isinstance(spec, dict) or not isinstance(spec.get("nodes"), list):
        return None, "the reply's JSON is not a graph (an object with a 'nodes' list)"
    texts: dict[str, str] = {}
    _take_texts(spec, texts)
    removed = tuple(name for name in parent_llm_nodes if name not in texts)
    return StructureEdit(spec, texts, removed), ""


def _take_texts(value: Any, texts: dict[str, str]) -> None:
    """Move each llm node's instruction out of ``value`` into ``texts`` (by node name)."""
    if isinstance(value, list):
        for item in value:
            _take_texts(item, texts)
    elif isinstance(value, dict):
        named = isinstance(value.get("name"), str) and "messages" in value
        if named and value.get("kind", "llm") == "llm":
            texts[value["name"]] = str(value.pop("instruction", ""))
        for item in value.values():
            _take_texts(item, texts)
