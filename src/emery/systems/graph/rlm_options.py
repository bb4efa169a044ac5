"""``graph_type = "rlm"``: the options of a graph whose llm nodes reach a long context
through tools instead of their prompt, and the checks of those options.

``[system.rlm]``: ``context`` names the input field that holds the long text; ``nodes``
lists the llm nodes that run as tool loops (unset: every llm node); ``max_tool_calls``
bounds each loop (a node makes at most ``max_tool_calls + 2`` LM calls);
``max_matches`` and ``max_span_lines`` bound what one search or read shows. A tool node
must not put the context in its prompt: that is what the tools are for.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field

from emery.core.errors import ConfigError
from emery.core.settings import Settings


class RLMOptions(Settings):
    """``[system.rlm]`` (see the module docstring)."""

    context: str = Field(min_length=1)
    nodes: list[str] | None = None
    max_tool_calls: int = Field(default=8, ge=1, le=64)
    max_matches: int = Field(default=20, ge=1, le=200)
    max_span_lines: int = Field(default=40, ge=1, le=400)

    def tool_nodes(self, llm_nodes: list[str]) -> list[str]:
        """The llm nodes that run as tool loops."""
        return list(llm_nodes) if self.nodes is None else [n for n in llm_nodes if n in self.nodes]


def check_rlm(
    graph_type: str | None, options: RLMOptions | None, reads: Mapping[str, set[str]]
) -> None:
    """Raise ValueError with a one-line reason when an rlm graph is not well formed.

    ``reads`` maps each llm node to the names its prompt reads."""
    if graph_type != "rlm":
        if options is not None:
            raise ValueError("'rlm' options are only for graph_type = 'rlm'")
        return
    if options is None:
        raise ValueError(
            "graph_type = 'rlm' needs [system.rlm] with 'context' (the input field too long"
            " for the prompt)"
        )
    unknown = sorted(set(options.nodes or ()) - set(reads))
    if unknown:
        known = ", ".join(sorted(reads)) or "none"
        raise ValueError(f"rlm.nodes: {unknown[0]!r} is not an llm node (llm nodes: {known})")
    if not options.tool_nodes(list(reads)):
        raise ValueError("rlm.nodes names no llm node: an rlm graph needs one tool node")
    for name in options.tool_nodes(list(reads)):
        if options.context in reads[name]:
            raise ValueError(
                f"rlm node {name!r} puts the context {{{options.context}}} in its prompt;"
                " it reaches the context through its tools instead"
            )


def check_context(options: RLMOptions | None, fields: set[str]) -> None:
    """Raise ConfigError when the rlm context is not one of the dataset's input fields."""
    if options is not None and options.context not in fields:
        known = ", ".join(sorted(fields)) or "none"
        raise ConfigError(
            f"rlm.context {options.context!r} is not an input field (available: {known})"
        )
