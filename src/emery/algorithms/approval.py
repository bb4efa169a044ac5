"""A person between a search and its best: the search loop's side of ``[job] approve``.

With a gate, a step that would change the best candidate is held: the best stays as it
was, the step is stored with a pending request (``hold``), and the loop waits for a
person's decision before anything else (``ApprovalGate.decision``). ``apply`` then acts on
it: an approval makes the candidate the best; a rejection keeps the best and its reason
joins ``SearchContext.reviewer_notes``, which GEPA's reflection, APO's critique and
MIPRO's instruction proposer show the model (``reviewer_section``); an edit makes the
person's text a child of the candidate, scored on val like any child (an algorithm that
keeps a pool adopts it, ``AdoptsCandidates``), which becomes the best if it beats it.
Where the requests live and how the wait is done is the gate's business
(``jobs.approvals`` keeps them in the store).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from emery.algorithms.base import AlgorithmState, SearchContext
from emery.core.approvals import Approval, ApprovalApplied, ApprovalRequested
from emery.core.events import BestUpdated
from emery.core.models import Candidate, ChatMessage, Lineage
from emery.evaluation.eval_result import EvalResult

EDIT = "edit"
"""The lineage operation of a candidate a person wrote by editing a held one."""

NOTES_SHOWN = 3
"""How many of the latest rejection reasons the reflection is shown."""


class ApprovalGate(Protocol):
    """Where a search's approval requests are kept and decided."""

    def open(self) -> Approval | None:
        """The request this job made and has not applied yet (after a restart), if any."""
        ...

    def request(
        self,
        *,
        candidate_id: str,
        score: float | None,
        current_id: str,
        current_score: float | None,
        iteration: int,
    ) -> Approval:
        """A new pending request (stored with the step that made it, not here)."""
        ...

    async def decision(self, approval: Approval) -> Approval:
        """Wait until a person decides ``approval``; the decided request."""
        ...

    def declined(self) -> list[Approval]:
        """This job's requests a person rejected or replaced by an edit, oldest first."""
        ...


@runtime_checkable
class AdoptsCandidates(Protocol):
    """An algorithm that takes a candidate made outside it (a person's edit) into its own
    pool, updating its best (with ``best_updated``) as it would for its own child."""

    def adopt(
        self, ctx: SearchContext, state: Any, candidate: Candidate, result: EvalResult
    ) -> None: ...


def hold(
    ctx: SearchContext,
    gate: ApprovalGate,
    before: AlgorithmState,
    after: AlgorithmState,
    declined: set[str],
) -> Approval | None:
    """Keep ``after``'s new best (if it has one) from becoming the best: ``after`` gets
    ``before``'s best back and the step's ``best_updated`` events go. Returns the pending
    request to store with the step; None when the best did not change, or changed to a
    candidate a person already declined (``declined``: their ids), which stays declined."""
    if not after.best_candidate_id or after.best_candidate_id == before.best_candidate_id:
        return None
    candidate_id, score = after.best_candidate_id, after.best_val_score
    after.best_candidate_id, after.best_val_score = before.best_candidate_id, before.best_val_score
    ctx.log.events[:] = [e for e in ctx.log.events if e.kind != BestUpdated.kind]
    if candidate_id in declined:
        return None
    approval = gate.request(
        candidate_id=candidate_id,
        score=score,
        current_id=before.best_candidate_id,
        current_score=before.best_val_score,
        iteration=after.iteration,
    )
    ctx.emit(
        ApprovalRequested(
            approval_id=approval.id,
            candidate_id=approval.candidate_id,
            score=approval.score,
            current_id=approval.current_id,
            current_score=approval.current_score,
        )
    )
    return approval


def reviewer_notes(declined: list[Approval]) -> list[str]:
    """The reasons people gave for declining, oldest first."""
    return [a.reason for a in declined if a.reason and a.reason.strip()]


async def apply(
    ctx: SearchContext, algorithm: object, state: AlgorithmState, decided: Approval
) -> tuple[AlgorithmState, Approval]:
    """Act on a decided request: the next state and the request marked applied."""
    result: str | None = None
    if decided.status == "approved" and decided.candidate_id != state.best_candidate_id:
        score = decided.score if decided.score is not None else state.best_val_score
        if score is not None:
            promote(ctx, state, decided.candidate_id, score)
    elif decided.status == "edited":
        result = await score_edit(ctx, algorithm, state, decided)
    applied = decided.model_copy(update={"applied": True, "result": result})
    ctx.emit(applied_event(applied))
    return state, applied


def applied_event(applied: Approval) -> ApprovalApplied:
    """The ``approval_applied`` event of ``applied``."""
    return ApprovalApplied(
        approval_id=applied.id,
        candidate_id=applied.candidate_id,
        status=applied.status,
        reason=applied.reason,
        result=applied.result,
    )


def promote(ctx: SearchContext, state: AlgorithmState, candidate_id: str, score: float) -> None:
    """Make ``candidate_id`` the best, reporting it."""
    previous = state.best_val_score
    state.best_candidate_id, state.best_val_score = candidate_id, score
    ctx.emit(BestUpdated(candidate_id=candidate_id, score=score, previous_score=previous))


async def score_edit(
    ctx: SearchContext, algorithm: object, state: AlgorithmState, decided: Approval
) -> str:
    """Add the person's edit as a child of the held candidate, score it on val like any
    child and let it become the best if it beats it; the child's id."""
    held = ctx.candidates[decided.candidate_id]
    child = held.derive(
        components={k: v for k, v in decided.edited.items() if k in held.components},
        lineage=Lineage(
            parents=(held.id,),
            generation=held.lineage.generation + 1,
            operation=EDIT,
            iteration=state.iteration,
            details={"approval": decided.id},
        ),
    )
    child = ctx.add_candidate(child)
    result = await ctx.evaluate(child, ctx.val, "val")
    if isinstance(algorithm, AdoptsCandidates):
        algorithm.adopt(ctx, state, child, result)
    elif state.best_val_score is None or result.mean > state.best_val_score:
        promote(ctx, state, child.id, result.mean)
    return child.id


def reviewer_section(notes: Sequence[str]) -> str | None:
    """The latest rejection reasons as a paragraph for a proposal prompt (None when there
    are none)."""
    shown = [note.strip() for note in notes if note and note.strip()][-NOTES_SHOWN:]
    if not shown:
        return None
    lines = "\n".join(f"- {note}" for note in shown)
    return (
        "A person reviewing this search rejected earlier proposals, saying:\n"
        f"{lines}\nTake this into account."
    )


def with_reviewer_notes(messages: list[ChatMessage], notes: Sequence[str]) -> list[ChatMessage]:
    """``messages`` with the latest rejection reasons added to the last one (unchanged
    when there are none)."""
    text = reviewer_section(notes)
    if text is None or not messages:
        return messages
    last: ChatMessage = {**messages[-1], "content": f"{messages[-1]['content']}\n\n{text}"}
    return [*messages[:-1], last]
