"""Operator children: LM-free edits of a beam parent beside the LM's critique-and-edit.

On a prompt program, the first expansion of each parent in a round also adds up to
``operator_children`` children made by the edit operators (``operators.py``) for the
expansion's stage, in operator order, none offered twice for the same parent (labeled
demos come from train; APO scores children on val batches only). They join
the round like the LM's children, so a round whose every LM edit is rejected still has
candidates to score.
"""

from __future__ import annotations

from emery.algorithms.apo.events import ApoOperatorChild
from emery.algorithms.apo.propose import Proposer
from emery.algorithms.apo.state import ApoState
from emery.algorithms.base import SearchContext
from emery.algorithms.operators import Materials
from emery.algorithms.sources import count, next_operator_child, staged_prompts
from emery.core.models import Candidate


def operator_children_due(
    ctx: SearchContext, state: ApoState, limit: int, slot: int, branch: int
) -> int:
    """How many operator children the expansion of parent slot ``slot`` and ``branch`` may
    add: ``limit`` at the first branch of a parent's first slot in the round (a small beam
    repeats its members), none otherwise."""
    first = branch == 0 and state.parents.index(state.parents[slot]) == slot
    return limit if first and staged_prompts(ctx) is not None else 0


def add_operator_children(
    ctx: SearchContext, state: ApoState, parent: Candidate, stage: str, limit: int
) -> list[str]:
    """Up to ``limit`` new operator children of ``parent`` in ``stage``, kept in the round;
    returns their ids."""
    program = staged_prompts(ctx)
    if program is None or limit <= 0:
        return []
    tried = state.operators_tried.get(parent.id, [])
    added: list[str] = []
    while len(added) < limit:
        child = next_operator_child(
            program,
            parent,
            [stage],
            tried,
            known=lambda cid: cid in state.seen or cid in state.beam,
            iteration=state.round,
            materials=Materials(state.labeled),
        )
        if child is None:
            break
        child = Proposer.register(ctx, state, child)
        state.children.append(child.id)
        state.pool[child.id] = child
        count(state.sources, child.lineage.operation, "proposed")
        added.append(child.id)
        ctx.emit(
            ApoOperatorChild(
                round=state.round,
                parent_id=parent.id,
                stage=stage,
                operator=str(child.lineage.details.get("operator", child.lineage.operation)),
                child_id=child.id,
            )
        )
    if tried:
        state.operators_tried[parent.id] = tried
    return added
