"""What a system can offer an algorithm beyond ``System``: optional capabilities.

An algorithm asks ``isinstance(system, Capability)`` on one of these protocols and uses
only its methods; it never imports a concrete system. A system offers a capability by
implementing the protocol's members (structurally: no base class to inherit).

- ``StagedPrompts``: the system runs ordered LM stages, each an instruction component with
  messages, a parser and demos (a prompt program; a graph, whose llm nodes are its
  stages); the edit operators (format reminder, answer stage, demos, ...), labeled demos
  and MIPRO's per-stage search work on those stages.
- ``ProposesCode``: some components are whole code modules; the system says what a module
  must define, checks a proposed module without running it, and smoke-runs a candidate
  (the code harness).
- ``MutatesStructure``: the system's structure (which LM calls it makes, in what order) is
  a component; the system offers structural edits of a candidate, reads a proposed
  structure back with its own validation and counts a candidate's LM calls (the graph).

Two more are asked by the evaluation layer, not by algorithms:

- ``CallsThroughProxy``: the agent calls its model over HTTP (a function agent or task app
  with ``proxy = true``): each attempt gets an LM proxy URL, and the proxy may rewrite the
  seed's texts in its requests (function agents, task apps).
- ``ScoresItself``: a run may report its own reward, so a dataset needs no gold outputs
  (function agents, task apps, a harness whose environment has a ``check``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from emery.core.models import Candidate
from emery.systems.base import RunContext
from emery.systems.stages import PromptProgramConfig, StageConfig


@runtime_checkable
class StagedPrompts(Protocol):
    """A system whose components are the instructions of ordered LM stages."""

    name: str
    config: PromptProgramConfig
    """The stages in the order they run (``config.stages``)."""
    stages: dict[str, StageConfig]
    """The stages by name (each one's instruction is the component of that name)."""

    def stage_inputs(self, stage: StageConfig, fields: Mapping[str, Any]) -> dict[str, Any]:
        """The fields ``stage``'s messages show, taken from ``fields`` (a demo's inputs)."""
        ...

    def for_candidate(self, candidate: Candidate) -> StagedPrompts:
        """The stages ``candidate`` runs (a graph candidate may carry its own graph)."""
        ...


@runtime_checkable
class ProposesCode(Protocol):
    """A system whose code components an algorithm may rewrite as whole modules."""

    code_brief: str
    """What a module must define and may call, shown to the model that writes one."""

    def is_code_component(self, name: str) -> bool:
        """Whether component ``name`` holds a code module (a whole-module proposal)."""
        ...

    def code_problem(self, source: str) -> str | None:
        """Why ``source`` cannot be a module of this system, or None. Nothing is executed."""
        ...

    async def smoke_test(self, candidate: Candidate, ctx: RunContext) -> str | None:
        """Run ``candidate`` once, unscored: why its code is broken, or None."""
        ...


@dataclass(frozen=True)
class StructureEdit:
    """One structural edit: the child's structure (as JSON), the instructions of the nodes
    it adds or changes, and the nodes it drops (their components and demos go with them)."""

    spec: dict[str, Any]
    texts: dict[str, str] = field(default_factory=dict)
    removed: tuple[str, ...] = ()


@runtime_checkable
class MutatesStructure(Protocol):
    """A system whose structure is a component an algorithm may change."""

    structure_component: str
    """The component that holds the structure (as text)."""

    def with_structure(self, candidate: Candidate) -> Candidate:
        """``candidate`` carrying its structure in ``structure_component``."""
        ...

    def structure_json(self, candidate: Candidate) -> dict[str, Any]:
        """``candidate``'s structure as JSON (without the nodes' instructions)."""
        ...

    def structure_nodes(self, candidate: Candidate) -> list[str]:
        """The LM-call nodes of ``candidate``'s structure (each one a text component)."""
        ...

    def structure_edits(
        self, candidate: Candidate, fields: set[str], samples: int
    ) -> Iterator[tuple[str, StructureEdit]]:
        """Every structural edit of ``candidate`` (``<edit>@<node>#<n>`` and the edit), in the
        order to offer them; ``fields`` are the examples' input fields (no new node takes
        one's name), ``samples`` a voting node's samples. Edits are not validated."""
        ...

    def read_structure(self, spec: dict[str, Any]) -> str:
        """The ``structure_component`` text of ``spec``; ConfigError when it is invalid."""
        ...

    def check_candidate(self, candidate: Candidate, fields: set[str]) -> None:
        """Raise ConfigError when ``candidate`` cannot run on examples with ``fields``."""
        ...

    def lm_calls(self, candidate: Candidate) -> int:
        """LM calls one run of ``candidate`` makes."""
        ...


@runtime_checkable
class CallsThroughProxy(Protocol):
    """A system whose agent may call its model over HTTP, through the LM proxy."""

    needs_proxy: bool
    """Whether each attempt gets a proxy URL whose calls are recorded."""
    rewrite_prompts: bool
    """Whether the proxy replaces the seed's component texts in requests with the
    candidate's (for an agent that does not read its components)."""


@runtime_checkable
class ScoresItself(Protocol):
    """A system whose runs may report their own reward."""

    reports_rewards: bool
    """Whether a dataset without gold outputs can still be scored."""
