"""What a system is: named text components and a way to run one example under a candidate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from emery.core.example_result import ComponentCall as ComponentCall
from emery.core.models import Candidate, Example, Split
from emery.lm.base import LM

RunFailure = Literal["unreadable", "output", "error"]
"""Why a run has an ``error``: the parser could not read a reply (``unreadable``: a wrong
answer, scored 0 and not counted as a failed run; ``error`` holds the parser's message),
its output is otherwise unusable (``output``), or the run itself failed (``error``: the
system's own code raised, exited or hung, as an exception the system raised would)."""


class SystemRun(BaseModel):
    """The result of running a system on one example: its output and the calls behind it.

    ``reward`` set: the system scored itself (an agent's returned or emitted reward, a task
    app's reported reward) and the verifier is not asked; ``feedback`` goes with it.
    ``failure`` says what kind of failure ``error`` is (``RunFailure``).
    """

    output: Any = None
    calls: list[ComponentCall] = Field(default_factory=list)
    error: str | None = None
    failure: RunFailure = "output"
    reward: float | None = None
    feedback: str | None = None


@dataclass
class RunContext:
    """What a system gets besides the candidate: the example, the task LM and ids."""

    lm: LM
    example: Example
    split: Split | None = None
    rollout_id: str | None = None


@runtime_checkable
class System(Protocol):
    """Anything emery can optimize."""

    name: str

    def seed_candidate(self) -> Candidate:
        """The system as given: its current component texts (and demos)."""
        ...

    def version(self) -> str:
        """A hash of everything but the components: a changed version invalidates cached scores."""
        ...

    def check_inputs(self, fields: set[str]) -> None:
        """Raise ConfigError if a component reads a field the examples do not have."""
        ...

    async def run(self, candidate: Candidate, ctx: RunContext) -> SystemRun:
        """Run ``ctx.example`` under ``candidate``. Errors become ``SystemRun.error``."""
        ...
