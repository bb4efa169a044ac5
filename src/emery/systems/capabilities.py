"""What a system can offer an algorithm beyond ``System``: optional capabilities.

An algorithm asks ``isinstance(system, Capability)`` on one of these protocols and uses
only its methods; it never imports a concrete system. A system offers a capability by
implementing the protocol's members (structurally: no base class to inherit).

- ``ProposesCode``: some components are whole code modules; the system says what a module
  must define, checks a proposed module without running it, and smoke-runs a candidate
  (the code harness).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from emery.core.models import Candidate
from emery.systems.base import RunContext


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
