"""APO: prompt optimization with textual gradients and beam search (Pryzant et al., 2023).

Each round takes ``beam_width`` parents from the beam. For every parent and branch it runs
the parent on the next train batch, asks the gradient LM to criticise the prompt from those
runs, and asks the edit LM to rewrite the prompt from the critique; a rewrite that is not a
usable prompt (lost or invented placeholders, an answer instead of instructions, ...) is
rejected. On a prompt program each parent also gets up to ``operator_children`` children
from the LM-free edit operators (``operate.py``), counted per source beside the LM's edits
(``state.sources``). The beam and the children are then scored on one val batch. Those the
batch cannot tell from its best one (within one standard error of the difference) are
scored on full val, which ranks them ahead of the rest; the top ``beam_width`` survive,
except that a beam member is dropped only when the paired evidence (``algorithms.evidence``,
on full val when both sides have it, else on the val batch) shows it worse than the child
taking its place; otherwise it keeps its place. A full-val score becomes the best candidate
only if it beats the best so far.

Steps are finer than rounds so that a pause or a crash loses little work: one step per
expansion (train batch, critique, edit), one per candidate scored on the val batch, and
one for the selection (with the contenders' full val). With ``proposals_per_step`` k, a
step runs k expansions (their train batches, then their critiques and edits, at once, each
with its own RNG drawn in order from the search's; recorded in order) or scores k
candidates on the val batch at once, all sharing k x ``[runtime] concurrency`` lanes
(``concurrent_scoring``): fewer evaluations (the lone seed's k train batches are one, the
contenders' full-val scorings run one at a time) run wider. Budget limits counted
in iterations (``no_improvement_iterations``) therefore count these steps.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from emery.algorithms.apo.batches import ShuffledBatches
from emery.algorithms.apo.beam import (
    contenders,
    keep_incumbents,
    round_parents,
    select_top,
    unique,
)
from emery.algorithms.apo.events import (
    ApoBeamUpdated,
    ApoExpansionSkipped,
    ApoFullValScored,
    ApoRoundCut,
    ApoRoundStarted,
    BeamMember,
)
from emery.algorithms.apo.operate import add_operator_children, operator_children_due
from emery.algorithms.apo.plan import record_apo_plan, val_batch_size
from emery.algorithms.apo.prompts import load_prompts
from emery.algorithms.apo.propose import Draft, Proposer
from emery.algorithms.apo.settings import ApoSettings
from emery.algorithms.apo.state import ApoState
from emery.algorithms.base import SearchContext, load_rng, save_rng
from emery.algorithms.code_proposals import code_proposals
from emery.algorithms.concurrent_scoring import (
    ScoreRequest,
    run_all,
    score_concurrently,
    shared_lanes,
)
from emery.algorithms.evidence import Evidence, paired
from emery.algorithms.labeled import labeled_pool
from emery.algorithms.sources import count, report_if_changed, snapshot, text_components
from emery.algorithms.warm_start import rescore
from emery.core.errors import ConfigError
from emery.core.events import BaselineEvaluated, BestUpdated
from emery.core.models import Candidate, Example, Split
from emery.evaluation.eval_result import EvalResult


@dataclass(frozen=True)
class PlannedExpansion:
    """An expansion this step runs: the parent, the component to critique, the branch,
    the train batch and the edit-operator children due with it."""

    parent: Candidate
    component: str
    branch: int
    examples: list[Example]
    operators: int


class Apo:
    """Beam search over prompt texts driven by critiques (textual gradients) and edits."""

    name: ClassVar[str] = "apo"
    state_type = ApoState

    def __init__(self, settings: ApoSettings | None = None) -> None:
        self.settings = settings or ApoSettings()
        self.critique_prompts = load_prompts("critique", self.settings.critique_prompts)
        self.edit_prompts = load_prompts("edit", self.settings.edit_prompts)
        self.proposer = Proposer(self.settings, self.critique_prompts, self.edit_prompts)

    # -- start ---------------------------------------------------------------------------

    async def start(self, ctx: SearchContext) -> ApoState:
        self._check(ctx)
        record_apo_plan(ctx, self.settings)
        seed = ctx.add_candidate(ctx.seed_candidate)
        batches = ShuffledBatches([e.id for e in ctx.train], ctx.seed)
        state = ApoState(
            seed_candidate_id=seed.id,
            beam=[seed.id],
            pool={seed.id: seed},
            seen=[seed.id],
            train_cursor=batches.cursor,
            rng_state=save_rng(random.Random(ctx.seed)),
        )
        if self.settings.operator_children:
            state.labeled = await labeled_pool(ctx)
        if self.settings.run_initial_validation:
            result = await ctx.evaluate(seed, ctx.val, "val")
            ctx.emit(
                BaselineEvaluated(
                    candidate_id=seed.id, split="val", score=result.mean, n=len(result.results)
                )
            )
            state.baseline_val_score = result.mean
            state.full_val_scores[seed.id] = result.mean
            self._update_best(ctx, state, seed.id, result.mean)
        return await self.warm_start(ctx, state) if ctx.warm else state

    async def warm_start(self, ctx: SearchContext, state: ApoState) -> ApoState:
        """An earlier job's beam (best first), rescored on val, joins the seed: the beam is
        the top ``beam_width`` of them by full-val score (the seed first on a tie)."""
        for candidate, result in await rescore(ctx):
            state.pool[candidate.id] = candidate
            state.seen.append(candidate.id)
            state.full_val_scores[candidate.id] = result.mean
            self._update_best(ctx, state, candidate.id, result.mean)
        ranked = unique([state.seed_candidate_id, *state.full_val_scores])
        scores = {cid: state.full_val_scores.get(cid, -1.0) for cid in ranked}
        state.beam = select_top(ranked, scores, self.settings.beam_width)
        ctx.emit(
            ApoBeamUpdated(
                round=state.round,
                beam=[self._beam_entry(state, cid) for cid in state.beam],
                dropped=[self._beam_entry(state, cid) for cid in ranked if cid not in state.beam],
                reason=f"warm start from {ctx.warm.job_id}" if ctx.warm else None,
            )
        )
        return state

    def _check(self, ctx: SearchContext) -> None:
        if not ctx.train:
            raise ConfigError("APO needs train examples: the train split is empty")
        if not ctx.val:
            raise ConfigError("APO needs val examples: the val split is empty")
        for key, role in (
            ("gradient_role", self.settings.gradient_role),
            ("edit_role", self.settings.edit_role),
        ):
            if role not in ctx.lms:
                raise ConfigError(f"algorithm.apo.{key}: no LM is configured for role {role!r}")
        self._components(ctx)

    def _components(self, ctx: SearchContext) -> list[str]:
        available = text_components(ctx)
        wanted = self.settings.components
        if wanted is None:
            if not available:
                raise ConfigError("APO: the system has no text components to optimize")
            return available
        if not wanted:
            raise ConfigError("algorithm.apo.components is empty: leave it unset for all")
        unknown = [name for name in wanted if name not in available]
        if unknown:
            raise ConfigError(
                f"algorithm.apo.components: unknown component {unknown[0]!r}"
                f" (components: {', '.join(available) or 'none'})"
            )
        return list(wanted)

    # -- steps ---------------------------------------------------------------------------

    async def step(self, ctx: SearchContext, state: ApoState) -> ApoState:
        rng = load_rng(state.rng_state, ctx.seed)
        for candidate_id, candidate in state.pool.items():
            ctx.candidates.setdefault(candidate_id, candidate)
        sources = snapshot(state.sources)
        if state.phase == "expand":
            await self._expand(ctx, state, rng)
        elif state.phase == "score":
            await self._score_next(ctx, state)
        else:
            await self._select(ctx, state)
        report_if_changed(ctx, self.name, state.iteration + 1, sources, state.sources)
        state.iteration += 1
        state.rng_state = save_rng(rng)
        return state

    def _start_round(self, ctx: SearchContext, state: ApoState, rng: random.Random) -> None:
        state.parents = round_parents(state.beam, self.settings.beam_width)
        val_ids = [e.id for e in ctx.val]
        size = val_batch_size(self.settings, len(val_ids))
        state.val_batch = val_ids if size >= len(val_ids) else rng.sample(val_ids, size)
        ctx.emit(
            ApoRoundStarted(
                round=state.round, parents=list(state.parents), val_batch=list(state.val_batch)
            )
        )

    async def _expand(self, ctx: SearchContext, state: ApoState, rng: random.Random) -> None:
        """Up to ``proposals_per_step`` expansions of the round (train batch, critique,
        edit): planned in order, their parents scored and their critiques and edits asked
        at once, then recorded in order."""
        if not state.parents:
            self._start_round(ctx, state, rng)
        planned = await self._plan_expansions(ctx, state, rng)
        if not planned:
            return
        requests = [ScoreRequest(p.parent, p.examples, "train") for p in planned]
        slots = self.settings.proposals_per_step  # the step's evaluations share k x lanes
        results = await score_concurrently(ctx, requests, slots=slots)
        drafts = await self._drafts(ctx, state, rng, planned, results)
        for item, result, draft in zip(planned, results, drafts, strict=True):
            if self.settings.skip_perfect_batches and all(s >= 1.0 for s in result.scores):
                state.expansions_skipped += 1
                ctx.emit(
                    ApoExpansionSkipped(
                        round=state.round,
                        expansion=state.expansions_done,
                        parent_id=item.parent.id,
                        component=item.component,
                        train_examples=[e.id for e in item.examples],
                        reason="every run on the train batch scored 1",
                    )
                )
            elif draft is not None:
                self.proposer.commit(ctx, state, draft)
            else:
                await self.proposer.propose(
                    ctx, state, rng, item.parent, item.component, item.branch, item.examples, result
                )
            add_operator_children(ctx, state, item.parent, item.component, item.operators)
            state.expansions_done += 1
        if state.expansions_done >= len(state.parents) * self.settings.branch_factor:
            self._end_expansion(ctx, state)

    async def _plan_expansions(
        self, ctx: SearchContext, state: ApoState, rng: random.Random
    ) -> list[PlannedExpansion]:
        """The next expansions of the round, as many as ``proposals_per_step``, the round
        and the metric calls left allow; none when the budget cut the round here."""
        settings, reserved = self.settings, 0
        planned: list[PlannedExpansion] = []
        total = len(state.parents) * settings.branch_factor
        batches = ShuffledBatches([e.id for e in ctx.train], ctx.seed, state.train_cursor)
        by_id = {e.id: e for e in ctx.train}
        for index in range(state.expansions_done, total):
            if len(planned) == settings.proposals_per_step:
                break
            slot, branch = divmod(index, settings.branch_factor)
            parent = state.pool[state.parents[slot]]
            operators = operator_children_due(ctx, state, settings.operator_children, slot, branch)
            need = reserved + self._cost_of_one_more_child(ctx, state, parent, batches)
            remaining = ctx.budget.remaining_metric_calls()
            if remaining is not None and need > remaining:
                if not planned:
                    await self._cut_round(ctx, state, need, remaining)
                break
            if remaining is not None:  # the operator children the budget still pays for
                each = max(1, len(self._val_batch(ctx, state)))
                operators = min(operators, (remaining - need) // each)
            examples = [by_id[i] for i in batches.next(settings.gradient_batch_size)]
            state.train_cursor = batches.cursor
            reserved += self._uncached(ctx, parent, examples, "train") + (1 + operators) * len(
                state.val_batch
            )
            component = self._next_component(ctx, state, rng)
            planned.append(PlannedExpansion(parent, component, branch, examples, operators))
        return planned

    async def _drafts(
        self,
        ctx: SearchContext,
        state: ApoState,
        rng: random.Random,
        planned: list[PlannedExpansion],
        results: list[EvalResult],
    ) -> list[Draft | None]:
        """The critiques and edits of several text expansions, asked at once (each with its
        own RNG drawn from the search's, in order); None where the expansion is proposed
        on its own (a lone one, a skipped batch, a code module)."""
        code = code_proposals(ctx)
        if len(planned) == 1 or code is not None:
            return [None] * len(planned)
        rngs = [random.Random(rng.getrandbits(64)) for _ in planned]
        work = {
            index: self.proposer.draft(
                ctx, rngs[index], item.parent, item.component, item.branch, item.examples, result
            )
            for index, (item, result) in enumerate(zip(planned, results, strict=True))
            if not (self.settings.skip_perfect_batches and all(s >= 1.0 for s in result.scores))
        }
        drafts = await run_all(list(work.values()))
        found = dict(zip(work, drafts, strict=True))
        return [found.get(index) for index in range(len(planned))]

    def _cost_of_one_more_child(
        self,
        ctx: SearchContext,
        state: ApoState,
        parent: Candidate,
        batches: ShuffledBatches,
        children: int = 1,
    ) -> int:
        """Metric calls the next expansion (with up to ``children`` new children) may cost,
        with the round's scoring and full val."""
        by_id = {e.id: e for e in ctx.train}
        batch = [by_id[i] for i in batches.peek(self.settings.gradient_batch_size)]
        val_batch = self._val_batch(ctx, state)
        need = self._uncached(ctx, parent, batch, "train")
        for candidate_id in unique(state.beam + state.children):
            need += self._uncached(ctx, state.pool[candidate_id], val_batch, "val")
        return need + children * len(val_batch) + len(ctx.val) - len(val_batch)

    @staticmethod
    def _uncached(
        ctx: SearchContext, candidate: Candidate, examples: Sequence[Example], split: Split
    ) -> int:
        return sum(1 for e in examples if ctx.evaluations.cached(candidate, e, split) is None)

    async def _cut_round(self, ctx: SearchContext, state: ApoState, need: int, left: int) -> None:
        """The budget cannot pay for another child: score what the round has, or stop."""
        reason = f"metric_calls: another child needs up to {need}, {left} left"
        ctx.emit(
            ApoRoundCut(
                round=state.round,
                expansions_done=state.expansions_done,
                children=len(state.children),
                reason=reason,
            )
        )
        if state.children:
            state.phase = "score"
            await self._score_next(ctx, state)
        else:
            state.done, state.done_reason = True, reason

    def _next_component(self, ctx: SearchContext, state: ApoState, rng: random.Random) -> str:
        components = self._components(ctx)
        if self.settings.component_selection == "random":
            return rng.choice(components)
        component = components[state.component_turn % len(components)]
        state.component_turn += 1
        return component

    def _end_expansion(self, ctx: SearchContext, state: ApoState) -> None:
        if state.children:
            state.phase = "score"
            return
        ctx.emit(
            ApoBeamUpdated(
                round=state.round,
                beam=[self._beam_entry(state, cid) for cid in state.beam],
                dropped=[],
                reason="no child was accepted this round",
            )
        )
        self._next_round(state)

    # -- scoring and selection -----------------------------------------------------------

    def _val_batch(self, ctx: SearchContext, state: ApoState) -> list[Example]:
        by_id = {e.id: e for e in ctx.val}
        return [by_id[i] for i in state.val_batch]

    async def _score_next(self, ctx: SearchContext, state: ApoState) -> None:
        pending = [
            cid for cid in unique(state.beam + state.children) if cid not in state.val_batch_scores
        ]
        now = pending[: self.settings.proposals_per_step]
        batch = self._val_batch(ctx, state)
        requests = [ScoreRequest(state.pool[cid], batch, "val") for cid in now]
        results = await score_concurrently(ctx, requests, slots=self.settings.proposals_per_step)
        for candidate_id, result in zip(now, results, strict=True):
            state.val_batch_scores[candidate_id] = result.mean
        if len(pending) == len(now):
            state.phase = "select"

    def _beam_entry(
        self, state: ApoState, candidate_id: str, evidence: dict[str, Evidence] | None = None
    ) -> BeamMember:
        return BeamMember(
            candidate_id=candidate_id,
            val_batch_score=state.val_batch_scores.get(candidate_id),
            full_val_score=state.full_val_scores.get(candidate_id),
            evidence=(evidence or {}).get(candidate_id),
        )

    def _compare(self, ctx: SearchContext, state: ApoState) -> Callable[[str, str], Evidence]:
        """The paired evidence of one candidate against another: on full val when both
        were scored there, else on the round's val batch (stored results only)."""

        def compare(first: str, second: str) -> Evidence:
            both_full = first in state.full_val_scores and second in state.full_val_scores
            examples = list(ctx.val) if both_full else self._val_batch(ctx, state)
            return paired(
                self._stored_scores(ctx, state.pool[first], examples),
                self._stored_scores(ctx, state.pool[second], examples),
            )

        return compare

    @staticmethod
    def _stored_scores(
        ctx: SearchContext, candidate: Candidate, examples: Sequence[Example]
    ) -> list[float]:
        results = [ctx.evaluations.cached(candidate, e, "val") for e in examples]
        return [0.0 if result is None else result.score for result in results]

    async def _select(self, ctx: SearchContext, state: ApoState) -> None:
        ranked = unique(state.beam + state.children)
        promoted = await self._score_contenders(ctx, state, ranked)
        on_full_val = select_top(promoted, state.full_val_scores, len(promoted))
        rest = select_top(ranked, state.val_batch_scores, len(ranked))
        order = on_full_val + [cid for cid in rest if cid not in on_full_val]
        incumbents = [cid for cid in state.beam if cid not in state.children]
        beam, evidence = keep_incumbents(
            order[: self.settings.beam_width], incumbents, order, self._compare(ctx, state)
        )
        for candidate_id in beam:
            if candidate_id in state.children:
                count(state.sources, state.pool[candidate_id].lineage.operation, "accepted")
        ctx.emit(
            ApoBeamUpdated(
                round=state.round,
                beam=[self._beam_entry(state, cid, evidence) for cid in beam],
                dropped=[
                    self._beam_entry(state, cid, evidence) for cid in ranked if cid not in beam
                ],
                val_batch_size=len(state.val_batch),
            )
        )
        for candidate_id in on_full_val:
            score, previous = state.full_val_scores[candidate_id], state.best_val_score
            ctx.emit(
                ApoFullValScored(
                    round=state.round,
                    candidate_id=candidate_id,
                    score=score,
                    n=len(ctx.val),
                    best_score=previous,
                    new_best=previous is None or score > previous,
                )
            )
            self._update_best(ctx, state, candidate_id, score)
        state.beam = beam
        self._next_round(state)

    async def _score_contenders(
        self, ctx: SearchContext, state: ApoState, ranked: list[str]
    ) -> list[str]:
        """Score on full val the candidates the val batch cannot tell from its best one.

        The batch's best is always scored (the round's budget reserved it); the others only
        while the budget pays for them, each on all the lanes of the step's
        ``proposals_per_step`` batches. Returns the ids scored, in batch order.
        """
        found = contenders(
            ranked, state.val_batch_scores, len(state.val_batch), self.settings.beam_width
        )
        scored: list[str] = []
        lanes = shared_lanes(ctx, self.settings.proposals_per_step, 1)
        for candidate_id in found:
            candidate = state.pool[candidate_id]
            remaining = ctx.budget.remaining_metric_calls()
            need = self._uncached(ctx, candidate, ctx.val, "val")
            if scored and remaining is not None and need > remaining:
                break
            result = await ctx.evaluate(candidate, ctx.val, "val", lanes)
            state.full_val_scores[candidate_id] = result.mean
            scored.append(candidate_id)
        return scored

    @staticmethod
    def _update_best(ctx: SearchContext, state: ApoState, candidate_id: str, score: float) -> None:
        """Make ``candidate_id`` the best if its full-val ``score`` beats the best so far."""
        previous = state.best_val_score
        if previous is None or score > previous:
            state.best_candidate_id, state.best_val_score = candidate_id, score
            ctx.emit(BestUpdated(candidate_id=candidate_id, score=score, previous_score=previous))

    def _next_round(self, state: ApoState) -> None:
        state.round += 1
        state.phase = "expand"
        state.parents, state.children, state.val_batch = [], [], []
        state.val_batch_scores, state.expansions_done = {}, 0
        keep = {*state.beam, state.best_candidate_id, state.seed_candidate_id}
        state.pool = {cid: c for cid, c in state.pool.items() if cid in keep}
        if state.round >= self.settings.rounds:
            state.done = True
            state.done_reason = f"completed {self.settings.rounds} rounds"
