"""A proposed child waiting for its verdict, the two ways of making one, and more
evidence when the minibatch cannot tell child and parent apart.

``reflect`` asks the reflection LM for new texts of the chosen components; ``operate``
takes the parent's next untried LM-free edit operator child in those components' stages
(prompt programs only). Both return None when they have no new child to offer.
``draw_extension`` picks the further train examples a child undecided on its minibatch
is judged on (``judging.py`` decides when), ``extended`` joins them to the mutation.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from emery.algorithms.base import SearchContext
from emery.algorithms.code_proposals import code_proposals
from emery.algorithms.evidence import Evidence
from emery.algorithms.gepa.batches import EpochShuffled, MinibatchSampler
from emery.algorithms.gepa.events import (
    GepaMinibatchRejected,
    GepaMinibatchSampled,
    GepaProposalInvalid,
)
from emery.algorithms.gepa.proposal import Proposal
from emery.algorithms.gepa.reflection_proposer import ReflectionProposer
from emery.algorithms.gepa.state import GepaState, PoolEntry
from emery.algorithms.gepa.turns import note_try
from emery.algorithms.operators import OPERATOR_KINDS, Materials, OperatorKind, ordered_operators
from emery.algorithms.sources import count, next_operator_child, staged_prompts
from emery.core.models import Candidate, Example, Lineage
from emery.evaluation.eval_result import EvalResult
from emery.evaluation.objectives import named_costs
from emery.lm.base import LMError
from emery.systems.prompt_layout import StageLayout

REFLECTION = "reflection"


@dataclass(frozen=True)
class Basis:
    """What a child is proposed from: the parent, the components to change in it, and the
    minibatch the child is judged on with the parent's results there, in iteration
    ``number``; ``shown``, when given, is the minibatch the reflection is shown instead
    (``failure_share``), with the parent's results there."""

    parent: PoolEntry
    components: list[str]
    batch: list[Example]
    before: EvalResult
    number: int
    shown: tuple[list[Example], EvalResult] | None = None

    @property
    def shown_batch(self) -> list[Example]:
        """The examples the reflection is shown."""
        return self.batch if self.shown is None else self.shown[0]

    @property
    def shown_before(self) -> EvalResult:
        """The parent's results on ``shown_batch``."""
        return self.before if self.shown is None else self.shown[1]


@dataclass
class Mutation:
    """A proposed child waiting for its verdict: what it was proposed from, what made it
    (``source``: ``reflection`` or ``operator.<name>``), the components it changes, and the
    reflection that wrote its texts (none for an operator child)."""

    basis: Basis
    child: Candidate
    source: str
    changed: list[str]
    proposals: list[Proposal] = field(default_factory=list)

    @property
    def parent(self) -> PoolEntry:
        return self.basis.parent

    @property
    def batch(self) -> list[Example]:
        return self.basis.batch

    @property
    def before(self) -> EvalResult:
        return self.basis.before

    @classmethod
    def reflected(cls, basis: Basis, proposals: list[Proposal]) -> Mutation | None:
        """The child the usable proposals make, or None when no proposal has a text."""
        texts = {p.component: p.text for p in proposals if p.text is not None}
        if not texts:
            return None
        parent = basis.parent
        child = parent.candidate.derive(
            components=texts,
            lineage=Lineage(
                parents=(parent.id,),
                generation=parent.candidate.lineage.generation + 1,
                operation="reflect",
                iteration=basis.number,
            ),
        )
        return cls(basis, child, REFLECTION, sorted(texts), proposals)

    @classmethod
    def operated(cls, basis: Basis, child: Candidate) -> Mutation:
        """An operator's child (its lineage names the operator and the stage)."""
        old = basis.parent.candidate
        changed = {
            name
            for name in set(old.components) | set(child.components)
            if old.components.get(name) != child.components.get(name)
        }
        changed |= {
            stage
            for stage in set(old.demos) | set(child.demos)
            if old.demos.get(stage, ()) != child.demos.get(stage, ())
        }
        return cls(basis, child, child.lineage.operation, sorted(changed))

    def with_details(
        self, after: EvalResult, accepted: bool, evidence: Evidence | None = None
    ) -> Candidate:
        """The child with its minibatch scores, verdict and reflection in its lineage."""
        details = {
            **self.child.lineage.details,
            "components": self.changed,
            "minibatch": [example.id for example in self.batch],
            "minibatch_before": self.before.scores,
            "minibatch_after": after.scores,
            "accepted": accepted,
        }
        if self.basis.shown is not None:
            details["minibatch_shown"] = [example.id for example in self.basis.shown_batch]
        if evidence is not None:
            details["evidence"] = evidence.model_dump()
        if self.proposals:
            details["reflection"] = {p.component: p.details() for p in self.proposals}
        lineage = self.child.lineage.model_copy(update={"details": details})
        return self.child.model_copy(update={"lineage": lineage})


async def reflect(
    proposer: ReflectionProposer,
    ctx: SearchContext,
    state: GepaState,
    basis: Basis,
    rng: random.Random,
    *,
    fallback: bool,
) -> Mutation | None:
    """The reflection LM's child, or None (no usable text, or one already in the pool)."""
    proposals = await reflection_texts(proposer, ctx, state, basis, rng, fallback=fallback)
    return reflected_child(ctx, state, basis, proposals)


async def reflection_texts(
    proposer: ReflectionProposer,
    ctx: SearchContext,
    state: GepaState,
    basis: Basis,
    rng: random.Random,
    *,
    fallback: bool,
) -> list[Proposal]:
    """The reflection LM's new texts of ``basis.components`` (the LM calls of ``reflect``)."""
    state.counters.reflections += 1
    return await _texts(proposer, ctx, basis, rng, fallback=fallback)


def reflected_child(
    ctx: SearchContext,
    state: GepaState,
    basis: Basis,
    proposals: list[Proposal],
    siblings: frozenset[str] = frozenset(),
) -> Mutation | None:
    """The child ``proposals`` make, or None (no usable text, or a candidate already in the
    pool or among ``siblings``, the children proposed before it in the same step)."""
    mutation = Mutation.reflected(basis, proposals)
    if mutation is None:
        state.counters.invalid_proposals += 1
        count(state.sources, REFLECTION, "invalid")
        note_try(state.turns, REFLECTION)
        return None
    known = state.has(mutation.child.id)
    if known or mutation.child.id in siblings:
        state.counters.rejected += 1
        count(state.sources, REFLECTION, "invalid")
        note_try(state.turns, REFLECTION)
        ctx.emit(
            GepaMinibatchRejected(
                iteration=basis.number,
                candidate_id=mutation.child.id,
                parent_id=basis.parent.id,
                reason="the proposed text is already in the pool"
                if known
                else "the proposed text is another child's of the same step",
                source=REFLECTION,
            )
        )
        return None
    return mutation


async def _texts(
    proposer: ReflectionProposer,
    ctx: SearchContext,
    basis: Basis,
    rng: random.Random,
    *,
    fallback: bool,
) -> list[Proposal]:
    """One proposal per component. A failed reflection call is an invalid proposal when
    an operator can stand in for it (``fallback`` on a prompt program), an error otherwise."""
    try:
        return [
            await proposer.propose(
                ctx,
                rng,
                iteration=basis.number,
                component=component,
                current=basis.parent.candidate.components.get(component, ""),
                examples=basis.shown_batch,
                results=basis.shown_before.results,
            )
            for component in basis.components
        ]
    except LMError as exc:
        if not fallback or staged_prompts(ctx) is None:
            raise
        ctx.emit(
            GepaProposalInvalid(
                iteration=basis.number,
                component=basis.components[0],
                attempt=1,
                reason=f"the reflection call failed: {exc}",
                reply="",
            )
        )
        return []


def operate(
    ctx: SearchContext,
    state: GepaState,
    basis: Basis,
    operators: Sequence[OperatorKind] = OPERATOR_KINDS,
) -> Mutation | None:
    """The parent's next untried child of ``operators`` (in their order) in the components'
    stages (a prompt program only, with the stages the parent runs), or None when every
    one was tried.
    Labeled demos never show an example of the minibatch the child is judged on (nor of
    the one the reflection is shown). The ids offered are kept per parent in the state, so
    a resumed search offers the same children next. With a cost among the job's objectives
    the operators that cut it come first."""
    program = staged_prompts(ctx)
    if program is None:
        return None
    parent = basis.parent
    program = program.for_candidate(parent.candidate)
    tried = state.operators_tried.get(parent.id, [])
    seen = basis.batch + basis.shown_batch
    materials = Materials(state.labeled, frozenset(example.id for example in seen))
    child = next_operator_child(
        program,
        parent.candidate,
        basis.components,
        tried,
        known=state.has,
        iteration=basis.number,
        materials=materials,
        order=ordered_operators(operators, cost_first=bool(named_costs(ctx.objectives))),
    )
    if tried:
        state.operators_tried[parent.id] = tried
    return None if child is None else Mutation.operated(basis, child)


async def extend_batch(
    ctx: SearchContext,
    state: GepaState,
    mutation: Mutation,
    after: EvalResult,
    rng: random.Random,
    *,
    size: int | None = None,
    room: int | None = None,
    sampler: MinibatchSampler | None = None,
) -> tuple[Mutation, EvalResult]:
    """Parent and child scored on the next minibatch too (``draw_extension``), both results
    joined to the first ones; unchanged when no example is left or the budget is short."""
    extra = draw_extension(ctx, state, mutation, rng, size=size, room=room, sampler=sampler)
    if not extra:
        return mutation, after
    before_more = await ctx.evaluate(mutation.parent.candidate, extra, "train")
    after_more = await ctx.evaluate(mutation.child, extra, "train")
    return extended(mutation, after, extra, before_more, after_more)


def draw_extension(
    ctx: SearchContext,
    state: GepaState,
    mutation: Mutation,
    rng: random.Random,
    *,
    size: int | None = None,
    room: int | None = None,
    reserved: int = 0,
    sampler: MinibatchSampler | None = None,
) -> list[Example]:
    """The examples of the next minibatch ``sampler`` draws (of ``size``, default the
    batch's; default sampler: ``epoch_shuffled``) to judge
    ``mutation`` on as well: at most ``room`` of them, none already judged or shown to
    either as a demo (``shown_demo_ids``); none when no such example is left or the budget
    cannot pay for both on them (besides ``reserved`` calls other children of the step will
    spend) and still score an accepted child on all of val."""
    train = {example.id: example for example in ctx.train}
    shown = shown_demo_ids(mutation.child) | shown_demo_ids(mutation.parent.candidate)
    used = {example.id for example in mutation.batch} | shown
    draw = (sampler or EpochShuffled()).draw
    ids = draw(state, list(train), size or len(mutation.batch), rng)
    extra = [train[i] for i in dict.fromkeys(ids) if i not in used][:room]
    if not extra or not ctx.budget.can_afford(reserved + 2 * len(extra) + len(ctx.val)):
        return []
    number = mutation.basis.number
    ctx.emit(GepaMinibatchSampled(iteration=number, example_ids=ids, epoch=state.sampler.epoch))
    return extra


def shown_demo_ids(candidate: Candidate) -> set[str]:
    """The train examples ``candidate`` may show an input as a demo: all its demos, except
    in a stage that shows only the nearest few of its pool, whose retrieval never shows an
    input its own example (``demo_retrieval``), so its pool's examples are fair evidence."""
    return {
        demo.example_id
        for stage, demos in candidate.demos.items()
        if StageLayout.of(candidate.components, stage).select != "nearest"
        for demo in demos
        if demo.example_id is not None
    }


def extended(
    mutation: Mutation,
    after: EvalResult,
    extra: list[Example],
    before_more: EvalResult,
    after_more: EvalResult,
) -> tuple[Mutation, EvalResult]:
    """``mutation`` judged on ``extra`` as well: its batch and both results joined."""
    basis = replace(
        mutation.basis,
        batch=mutation.batch + extra,
        before=mutation.before.joined(before_more),
    )
    return replace(mutation, basis=basis), after.joined(after_more)


async def smoke_rejects(ctx: SearchContext, state: GepaState, mutation: Mutation) -> bool:
    """Whether a child with new code crashed, raised, exited or hung on one example of its
    minibatch (then it is rejected with the reason and never scored)."""
    code = code_proposals(ctx)
    if code is None or not mutation.batch:
        return False
    if not any(map(code.system.is_code_component, mutation.changed)):
        return False
    reason = await code.smoke_rejection(mutation.child, mutation.batch[0], ctx.lm("task"))
    if reason is None:
        return False
    state.counters.rejected += 1
    count(state.sources, REFLECTION, "invalid")
    note_try(state.turns, mutation.source)
    ctx.emit(
        GepaMinibatchRejected(
            iteration=mutation.basis.number,
            candidate_id=mutation.child.id,
            parent_id=mutation.parent.id,
            reason=reason,
            source=mutation.source,
        )
    )
    return True
