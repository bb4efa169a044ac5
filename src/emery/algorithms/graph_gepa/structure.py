"""Structural children: a parent's next untried structural mutation, validated.

The system offers its structure through ``MutatesStructure`` (``systems.capabilities``;
the graph does). Every edit it offers (a graph's templates, ``systems/graph/mutations.py``,
at the top level or inside a map node's sub-graph) becomes a candidate whose structure
component (``graph:spec``) holds the new graph. The whole graph is checked like a user's
graph (the spec's validation, then every node input bound to an input field or a node) and
against ``target_llm_calls`` before it costs any rollout; a child that fails is rejected
with the reason as a ``gepa.proposal_invalid`` event (component ``graph:spec``) and the
next one is tried. The mutations offered to a
parent are kept in the state, so a resumed search offers the same children next. When no
template has a child left, the reflection model may propose a whole new graph
(``proposed_structure``), checked the same way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from emery.algorithms.base import SearchContext
from emery.algorithms.gepa.events import GepaProposalInvalid
from emery.algorithms.gepa.mutation import Basis, Mutation
from emery.algorithms.gepa.state import GepaState
from emery.algorithms.graph_gepa.spec_proposal import MAX_TOKENS, parse_graph, spec_messages
from emery.algorithms.labeled import input_fields
from emery.algorithms.sources import count
from emery.core.errors import ConfigError
from emery.core.models import Candidate, Lineage
from emery.lm.base import LMError
from emery.systems.capabilities import MutatesStructure, StructureEdit
from emery.systems.prompt_layout import CHOICE_SEPARATOR

PREFIX = "structure."
LM_SOURCE = f"{PREFIX}lm"


@dataclass(frozen=True)
class Limits:
    """What a structural child must respect: ``target_llm_calls`` and the vote's samples."""

    target_llm_calls: int | None = None
    vote_samples: int = 3


def source_of(key: str) -> str:
    """The source (``structure.plan``, ``structure.lm``) of a key (``structure.plan@solve#0``)."""
    return re.split("[@#]", key)[0]


def structure_system(ctx: SearchContext) -> MutatesStructure:
    """The system when it offers its structure (a graph); ConfigError otherwise."""
    if not isinstance(ctx.system, MutatesStructure):
        raise ConfigError(
            'algorithm graph_gepa searches a graph\'s structure: give [system] kind = "graph"'
            ' (or a dataset without [system]), or use algorithm = "gepa"'
        )
    return ctx.system


def structural_child(
    ctx: SearchContext, state: GepaState, basis: Basis, limits: Limits
) -> Mutation | None:
    """The parent's next untried structural child that passes the checks, or None."""
    system = structure_system(ctx)
    parent = basis.parent.candidate
    tried = state.operators_tried.get(basis.parent.id, [])
    fields = set(input_fields(ctx))
    try:
        for where, edit in system.structure_edits(parent, fields, limits.vote_samples):
            key = f"{PREFIX}{where}"
            if key in tried:
                continue
            tried.append(key)
            child, reason = _checked(system, parent, edit, fields, limits, basis, key)
            if reason is not None:
                _reject(ctx, state, basis, key, reason, json.dumps(edit.spec, indent=1))
            elif child is not None and not state.has(child.id):
                return Mutation.operated(basis, child)
    finally:
        if tried:
            state.operators_tried[basis.parent.id] = tried
    return None


async def proposed_structure(
    ctx: SearchContext, state: GepaState, basis: Basis, limits: Limits, role: str
) -> Mutation | None:
    """The reflection model's new graph for the parent (``structure.lm``), validated like a
    template's child; None when the call fails or the graph is invalid, over the target or
    already in the pool."""
    system = structure_system(ctx)
    parent = basis.parent.candidate
    fields = input_fields(ctx)
    messages = spec_messages(
        ctx.dataset.description.strip(),
        system.structure_json(parent),
        parent.components,
        fields,
        basis.shown_batch,
        basis.shown_before.results,
    )
    key, reply = f"{LM_SOURCE}#{basis.number}", ""
    try:
        reply = (await ctx.lm(role).complete(messages, max_tokens=MAX_TOKENS)).text
    except LMError as exc:
        edit, reason = None, f"the call failed: {exc}"
    else:
        edit, reason = parse_graph(reply, system.structure_nodes(parent))
    child = None
    if edit is not None:
        child, problem = _checked(system, parent, edit, set(fields), limits, basis, key)
        reason = problem or ""
    if child is None:
        _reject(ctx, state, basis, key, reason, reply)
        return None
    return None if state.has(child.id) else Mutation.operated(basis, child)


def _reject(
    ctx: SearchContext, state: GepaState, basis: Basis, key: str, reason: str, reply: str
) -> None:
    """Count an invalid structural proposal against its source and say why in an event."""
    count(state.sources, source_of(key), "invalid")
    ctx.emit(
        GepaProposalInvalid(
            iteration=basis.number,
            component=structure_system(ctx).structure_component,
            attempt=1,
            reason=f"{key}: {reason}",
            reply=reply,
        )
    )


def _checked(
    system: MutatesStructure,
    parent: Candidate,
    edit: StructureEdit,
    fields: set[str],
    limits: Limits,
    basis: Basis,
    key: str,
) -> tuple[Candidate | None, str | None]:
    """The child ``edit`` makes, or the reason it is not a valid graph within the limits."""
    try:
        spec = system.read_structure(edit.spec)
        child = _child(system.structure_component, parent, edit, spec, basis, key)
        system.check_candidate(child, fields)
    except ConfigError as exc:
        return None, str(exc)
    calls, target = system.lm_calls(child), limits.target_llm_calls
    if target is not None and calls > target:
        return None, f"{calls} LM calls per example, over target_llm_calls={target}"
    return child, None


def _child(
    component: str, parent: Candidate, edit: StructureEdit, spec: str, basis: Basis, key: str
) -> Candidate:
    """``parent`` with the new spec in ``component``, the edit's texts, and the removed
    nodes' texts gone."""
    removed = set(edit.removed)
    components = {
        key: text
        for key, text in parent.components.items()
        if key.split(CHOICE_SEPARATOR)[0] not in removed or key == component
    }
    components.update(edit.texts)
    components[component] = spec
    return Candidate(
        components=components,
        demos={stage: demos for stage, demos in parent.demos.items() if stage not in removed},
        lineage=Lineage(
            parents=(parent.id,),
            generation=parent.lineage.generation + 1,
            operation=source_of(key),
            iteration=basis.number,
            details={"structure": key.removeprefix(PREFIX)},
        ),
    )
