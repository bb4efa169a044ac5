"""The starting graph for a dataset given without a system: one llm node.

Its instruction is the dataset's description (its problem statement), its one user message
names every input field the examples share, and its reply is the graph's output.
"""

from __future__ import annotations

from emery.core.errors import ConfigError
from emery.core.models import Dataset
from emery.systems.graph.spec import GraphConfig

SEED_NODE = "solve"
DEFAULT_INSTRUCTION = "Solve the task for the input below. Reply with the answer only."


def input_fields(dataset: Dataset) -> list[str]:
    """The input fields every example has, in the first example's order."""
    examples = list(dataset)
    if not examples:
        return []
    shared = set.intersection(*(set(example.input) for example in examples))
    return [name for name in examples[0].input if name in shared]


def starting_graph(dataset: Dataset) -> GraphConfig:
    """A one-node graph for ``dataset`` (see the module docstring); ConfigError when no
    input field can be a placeholder."""
    fields = [name for name in input_fields(dataset) if name.isidentifier()]
    if not fields:
        raise ConfigError(
            "no [system] given and the dataset has no input field usable as a {placeholder}"
            " (letters, digits, _): give a [system] section"
        )
    template = "\n".join(
        f"{name}: {{{name}}}" if len(fields) > 1 else f"{{{name}}}" for name in fields
    )
    node, output = _free(SEED_NODE, fields), _free("output", fields)
    return GraphConfig.model_validate(
        {
            "kind": "graph",
            "name": dataset.name or "graph",
            "nodes": [
                {
                    "kind": "llm",
                    "name": node,
                    "instruction": dataset.description.strip() or DEFAULT_INSTRUCTION,
                    "messages": [{"role": "user", "template": template}],
                },
                {"kind": "output", "name": output, "value": node},
            ],
        }
    )


def _free(name: str, taken: list[str]) -> str:
    """``name``, suffixed with ``_node`` until no input field has it."""
    while name in taken:
        name += "_node"
    return name
