"""Structural children: a parent's next untried structural mutation, validated.

Every mutation a template makes (``mutations.py``), at the top level or inside a map node's
sub-graph, becomes a candidate whose ``graph:spec`` component holds the new graph. The
whole graph is checked like a user's graph (the spec's validation, then every node input
bound to an input field or a node) and against ``target_llm_calls`` before it costs any
rollout; a child that fails is rejected with the reason as a ``gepa.proposal_invalid``
event (component ``graph:spec``) and the next one is tried. The mutations offered to a
parent are kept in the state, so a resumed search offers the same children next. When no
template has a child left, the reflection model may propose a whole new graph
(``proposed_structure``), checked the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

from emery.algorithms.base import SearchContext
from emery.algorithms.gepa.mutation import Basis, Mutation
from emery.algorithms.gepa.state import GepaState
from emery.algorithms.graph_gepa.mutations import (
    TEMPLATES,
    Parent,
    Structure,
    scope_path,
    targets,
)
from emery.algorithms.graph_gepa.spec_proposal import MAX_TOKENS, parse_graph, spec_messages
from emery.algorithms.sources import count
from emery.core.errors import ConfigError
from emery.core.events import GepaProposalInvalid
from emery.core.models import Candidate, Lineage
from emery.lm.base import LMError
from emery.systems.graph.seed import input_fields
from emery.systems.graph.system import SPEC_COMPONENT, GraphSystem, llm_calls, read_spec, spec_text
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


def graph_system(ctx: SearchContext) -> GraphSystem:
    """The system when it is a graph; ConfigError otherwise."""
    if not isinstance(ctx.system, GraphSystem):
        raise ConfigError(
            'algorithm graph_gepa searches a graph\'s structure: give [system] kind = "graph"'
            ' (or a dataset without [system]), or use algorithm = "gepa"'
        )
    return ctx.system


def with_spec(system: GraphSystem, candidate: Candidate) -> Candidate:
    """``candidate`` carrying its graph as the ``graph:spec`` component."""
    if SPEC_COMPONENT in candidate.components:
        return candidate
    components = {**candidate.components, SPEC_COMPONENT: system.spec}
    return candidate.model_copy(update={"components": components})


def structural_child(
    ctx: SearchContext, state: GepaState, basis: Basis, limits: Limits
) -> Mutation | None:
    """The parent's next untried structural child that passes the checks, or None."""
    system = graph_system(ctx)
    parent = basis.parent.candidate
    tried = state.operators_tried.get(basis.parent.id, [])
    fields = set(input_fields(ctx.dataset))
    try:
        for key, edit in _edits(system, parent, fields, limits):
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
    system = graph_system(ctx)
    parent = basis.parent.candidate
    graph = system.for_candidate(parent).graph
    fields = input_fields(ctx.dataset)
    messages = spec_messages(
        ctx.dataset.description.strip(),
        json.loads(spec_text(graph)),
        parent.components,
        fields,
        basis.batch,
        basis.before.results,
    )
    key, reply = f"{LM_SOURCE}#{basis.number}", ""
    try:
        reply = (await ctx.lm(role).complete(messages, max_tokens=MAX_TOKENS)).text
    except LMError as exc:
        edit, reason = None, f"the call failed: {exc}"
    else:
        edit, reason = parse_graph(reply, [node.name for node in graph.llm_nodes()])
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
            component=SPEC_COMPONENT,
            attempt=1,
            reason=f"{key}: {reason}",
            reply=reply,
        )
    )


def _edits(
    system: GraphSystem, parent: Candidate, fields: set[str], limits: Limits
) -> Iterator[tuple[str, Structure]]:
    """``structure.<template>@<node>#<n>`` and the edit, for every template and llm node
    (a node of a map's sub-graph is ``<map>/<node>``: the edit changes that sub-graph)."""
    graph = system.for_candidate(parent).graph
    base = Parent(
        spec=json.loads(spec_text(graph)),
        graph=graph,
        components=parent.components,
        taken=frozenset(fields),
        samples=limits.vote_samples,
    )
    for target in targets(graph):
        where = "/".join((*scope_path(graph, target), target))
        for name, template in TEMPLATES.items():
            for number, edit in enumerate(template(base, target)):
                yield f"{PREFIX}{name}@{where}#{number}", edit


def _checked(
    system: GraphSystem,
    parent: Candidate,
    edit: Structure,
    fields: set[str],
    limits: Limits,
    basis: Basis,
    key: str,
) -> tuple[Candidate | None, str | None]:
    """The child ``edit`` makes, or the reason it is not a valid graph within the limits."""
    try:
        graph = read_spec(json.dumps(edit.spec))
        child = _child(parent, edit, spec_text(graph), basis, key)
        system.check_candidate(child, fields)
    except ConfigError as exc:
        return None, str(exc)
    calls, target = llm_calls(graph), limits.target_llm_calls
    if target is not None and calls > target:
        return None, f"{calls} LM calls per example, over target_llm_calls={target}"
    return child, None


def _child(parent: Candidate, edit: Structure, spec: str, basis: Basis, key: str) -> Candidate:
    """``parent`` with the new spec, the edit's texts, and the removed nodes' texts gone."""
    removed = set(edit.removed)
    components = {
        key: text
        for key, text in parent.components.items()
        if key.split(CHOICE_SEPARATOR)[0] not in removed or key == SPEC_COMPONENT
    }
    components.update(edit.texts)
    components[SPEC_COMPONENT] = spec
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
