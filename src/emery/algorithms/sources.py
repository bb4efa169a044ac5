"""Where children come from: the LM's proposals beside LM-free operator children.

GEPA and APO propose with an LM (reflection, critique and edit). On a prompt program they
also use the edit operators (``operators.py``), which need no model: they are a fallback
when a weak proposer returns nothing usable and a regular alternative when it does. Each
child's source (``reflection``, ``apo_edit`` or ``operator.<name>``) is counted, so a run
shows which source its improvements came from (``ProposalSources`` events).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from emery.algorithms.base import SearchContext
from emery.algorithms.operators import (
    NO_MATERIALS,
    OPERATOR_KINDS,
    Materials,
    OperatorKind,
    operator_children,
)
from emery.core.events import ProposalSources, SourceCount
from emery.core.models import Candidate
from emery.systems.capabilities import StagedPrompts
from emery.systems.prompt_layout import is_choice_component

Outcome = Literal["proposed", "accepted", "invalid"]


def staged_prompts(ctx: SearchContext) -> StagedPrompts | None:
    """The system when it runs prompt stages (``StagedPrompts``: a prompt program, a graph;
    the operators' domain), else None."""
    return ctx.system if isinstance(ctx.system, StagedPrompts) else None


def text_components(ctx: SearchContext) -> list[str]:
    """The seed's components an LM may rewrite: a prompt program's layout choices
    (``stage:choice``) are structure, never text."""
    names = list(ctx.seed_candidate.components)
    if staged_prompts(ctx) is None:
        return names
    return [name for name in names if not is_choice_component(name)]


def next_operator_child(
    program: StagedPrompts,
    parent: Candidate,
    stages: Iterable[str],
    tried: list[str],
    *,
    known: Callable[[str], bool] = lambda candidate_id: False,
    iteration: int | None = None,
    materials: Materials = NO_MATERIALS,
    order: Sequence[str | OperatorKind] = OPERATOR_KINDS,
) -> Candidate | None:
    """The first operator child of ``parent`` in ``stages`` (operators in ``order``) that
    is neither in ``tried`` nor ``known``, from an operator not yet tried on that stage;
    every child looked at is added to ``tried`` with its operator and stage
    (``operator_key``), so neither it nor another child of the same operator is offered
    again for this parent (a demo operator's child differs with the ``materials``'
    excluded examples: a near copy, not a new edit)."""
    for stage in stages:
        if stage not in program.stages:
            continue
        for child in operator_children(
            parent,
            program,
            stage,
            tried=frozenset(tried),
            iteration=iteration,
            materials=materials,
            order=order,
        ):
            key = operator_key(child.lineage.operation, stage)
            if key in tried:
                continue
            tried.extend((child.id, key))
            if not known(child.id):
                return child
    return None


def operator_key(operation: str, stage: str) -> str:
    """How ``tried`` names an operator applied to a stage (``operator.<name>@<stage>``)."""
    return f"{operation}@{stage}"


def count(sources: dict[str, SourceCount], source: str, outcome: Outcome) -> None:
    """Add one ``outcome`` to ``source``'s counts."""
    counts = sources.setdefault(source, SourceCount())
    setattr(counts, outcome, getattr(counts, outcome) + 1)


def report_if_changed(
    ctx: SearchContext,
    algorithm: str,
    iteration: int,
    before: dict[str, SourceCount],
    after: dict[str, SourceCount],
) -> None:
    """Emit ``proposal_sources`` when a step changed the counts."""
    if before != after:
        counts = {name: c.model_copy() for name, c in sorted(after.items())}
        ctx.emit(ProposalSources(algorithm=algorithm, iteration=iteration, counts=counts))


def snapshot(sources: dict[str, SourceCount]) -> dict[str, SourceCount]:
    """A copy of the counts to compare with after a step."""
    return {name: c.model_copy() for name, c in sources.items()}
