"""GEPA's search loop: the seed on val, then one reflective mutation (or merge) per step.

Agrawal et al. (2025), "GEPA: Reflective Prompt Evolution Can Outperform Reinforcement
Learning". Each step picks a parent from the per-example Pareto front over val, runs it on
a train minibatch, asks the reflection LM for a new text of one component from what the
component did there and the feedback it got, and keeps the child only if the paired
evidence on the same minibatch says it is better (``algorithms.evidence``; while that is
undecided and the child is ahead, both are scored on more minibatches, up to
``max_evidence_examples``); kept children are scored on all of val and join the pool. With
a cost among ``[job] objectives``, a child as good as its parent and cheaper is kept too
(``algorithms.cost_acceptance``). After an acceptance, the next step first tries to merge
two front candidates that share an ancestor.

On a prompt program, LM-free edit operators (``operators.py``) propose too: on the
iterations the turn policy gives them (``turns.py``: of every ``operator_every``-th, those
their record earns), instead of the reflection, and as the fallback whenever the reflection
gives no usable new text. Each child is scored and judged the same way, and counted per
source (``state.sources``, ``proposal_sources`` events; ``state.turns``, the record the
turn policy reads).

With ``proposals_per_step`` k, a step that does not merge runs k iterations at once: k
parent draws and minibatches (in order, from the search's RNG), the parents scored at
once, the reflections asked at once (each with its own RNG drawn in order), the children
scored and judged at once (``judging.py``: in lock step), each accepted on its own
evidence and recorded in order, the accepted ones scored on val at once. A step is kept or
repeated whole (``algorithms.search_loop``), so a resumed search makes the same candidates. The
step's evaluations share k x ``[runtime] concurrency`` lanes (``concurrent_scoring``): when
fewer than k run at once (a lone accepted child on val, one child's evidence round) each
runs wider; only the timing changes.

Which children join the pool, and which member may win, is the acceptance rule's say
(``acceptance.py``: ``evidence``, ``two_stage`` or a plug-in); this module asks it.

With ``pipelined_steps`` (by default at k > 1 where the acceptance rule decides a child on
its minibatch alone: ``two_stage``) a step decides the previous step's children (verdicts,
val, pool) beside proposing and scoring its own (``pipeline.py``; ``_pipelined_step``):
the children waiting are in the checkpointed state, and a due merge, or the search's end,
decides them first.

A warm start (``[job] warm_start``) adds an earlier job's Pareto front to the pool after
the seed, each rescored on this job's val (``algorithms.warm_start``).

Why this is long: one step's parts (select, propose, judge, promote) share the state
and the settings, and each is short; split, they would pass both around.
"""

from __future__ import annotations

import math
import random
from typing import ClassVar

from emery.algorithms.base import WARM_START, SearchContext, load_rng, save_rng
from emery.algorithms.concurrent_scoring import ScoreRequest, run_all, score_concurrently
from emery.algorithms.cost_acceptance import as_good_and_cheaper
from emery.algorithms.evidence import Evidence, paired
from emery.algorithms.gepa.acceptance import acceptance_rule
from emery.algorithms.gepa.batches import minibatch_sampler
from emery.algorithms.gepa.events import (
    GepaCandidateSelected,
    GepaMinibatchAccepted,
    GepaMinibatchRejected,
    GepaMinibatchSampled,
    GepaMinibatchSkipped,
    GepaValRejected,
)
from emery.algorithms.gepa.failure_batches import (
    remember_judged,
    scores_by_example,
    show_failures,
)
from emery.algorithms.gepa.judging import judge_all
from emery.algorithms.gepa.merge import merge_policy, run_merge
from emery.algorithms.gepa.mutation import (
    Basis,
    Mutation,
    operate,
    reflect,
    reflected_child,
    reflection_texts,
    smoke_rejects,
)
from emery.algorithms.gepa.pipeline import both, join_logs, own_log, park, unpark
from emery.algorithms.gepa.plan import evidence_examples, plan_inputs, record_gepa_plan
from emery.algorithms.gepa.pool import (
    add_to_pool,
    lean,
    restore_candidates,
    tops_best,
)
from emery.algorithms.gepa.pool import adopt as adopt_into_pool
from emery.algorithms.gepa.reflection_proposer import ReflectionProposer
from emery.algorithms.gepa.selection import parent_selector, select_components
from emery.algorithms.gepa.settings import GepaSettings
from emery.algorithms.gepa.state import GepaState, PoolEntry
from emery.algorithms.gepa.turns import note_paid, note_try, turn_policy
from emery.algorithms.gepa.val_gate import OnVal, confirm_winner, score_on_val
from emery.algorithms.labeled import labeled_pool
from emery.algorithms.operators import edit_operators
from emery.algorithms.sources import (
    count,
    report_if_changed,
    snapshot,
    staged_prompts,
    text_components,
)
from emery.algorithms.warm_start import rescore
from emery.core.errors import ConfigError
from emery.core.events import BaselineEvaluated
from emery.core.models import Candidate, Example
from emery.evaluation.budget import BudgetExhausted
from emery.evaluation.eval_result import EvalResult


class Gepa:
    """Reflective prompt evolution with a per-example Pareto front (see the module doc)."""

    name: ClassVar[str] = "gepa"
    state_type = GepaState

    def __init__(self, settings: GepaSettings | None = None) -> None:
        self.settings = settings or GepaSettings()
        self.proposer = ReflectionProposer(self.settings)
        self.selector = parent_selector(self.settings)
        self.sampler = minibatch_sampler(self.settings)
        self.merger = merge_policy(self.settings)
        self.acceptance = acceptance_rule(self.settings)
        self.operators = edit_operators(self.settings.operators)
        self.turns = turn_policy(self.settings)
        self._operator_numbers: frozenset[int] = frozenset()

    # -- start -----------------------------------------------------------------------------

    async def start(self, ctx: SearchContext) -> GepaState:
        """Score the seed on all of val: the baseline and the pool's first member."""
        if not ctx.val:
            raise ConfigError("GEPA needs val examples to select candidates: val is empty")
        if not ctx.train:
            raise ConfigError("GEPA needs train examples to reflect on: train is empty")
        components = self._components(ctx)
        inputs = plan_inputs(ctx, self.name, len(components), self._structure_every())
        record_gepa_plan(ctx, self.settings, inputs)
        seed = ctx.add_candidate(ctx.seed_candidate)
        state = GepaState(
            seed_candidate_id=seed.id,
            components=components,
            rng_state=save_rng(random.Random(ctx.seed)),
            winner_confidence=self.acceptance.winner_confidence,
        )
        if self.settings.operator_every or self.settings.operator_fallback:
            state.labeled = await labeled_pool(ctx)
        result = await ctx.evaluate(seed, ctx.val, "val")
        ctx.emit(
            BaselineEvaluated(
                candidate_id=seed.id, split="val", score=result.mean, n=len(result.results)
            ),
        )
        state.baseline_val_score = result.mean
        add_to_pool(ctx, state, PoolEntry(candidate=seed), result)
        self._check_done(ctx, state)
        return await self.warm_start(ctx, state) if ctx.warm else state

    async def warm_start(self, ctx: SearchContext, state: GepaState) -> GepaState:
        """An earlier job's candidates (its Pareto front, best first) rescored on val and
        added to the pool beside the seed: the front and the best are recomputed."""
        for candidate, result in await rescore(ctx):
            add_to_pool(ctx, state, PoolEntry(candidate=candidate, operation=WARM_START), result)
        self._check_done(ctx, state)
        return state

    def _structure_every(self) -> int | None:
        """How often a structural child is proposed (``graph_gepa``); None: never."""
        return None

    def _components(self, ctx: SearchContext) -> list[str]:
        """The components to rewrite (a prompt program's layout choices never are)."""
        names = text_components(ctx)
        wanted = self.settings.components
        if wanted is None:
            return names
        unknown = [name for name in wanted if name not in names]
        if unknown:
            raise ConfigError(
                f"algorithm.gepa.components: unknown component {unknown[0]!r}"
                f" (the system has: {', '.join(names) or 'none'})"
            )
        return list(dict.fromkeys(wanted))

    # -- one step --------------------------------------------------------------------------

    async def step(self, ctx: SearchContext, state: GepaState) -> GepaState:
        """A merge if one is due and possible (one iteration), else ``proposals_per_step``
        reflective mutations (one iteration each); pipelined (``pipelined_steps``), the
        last step's children decided beside this step's (``_pipelined_step``)."""
        rng = load_rng(state.rng_state, ctx.seed)
        restore_candidates(ctx, state)
        number = state.iteration + 1
        sources = snapshot(state.sources)
        paid_before = ctx.budget.usage.metric_calls
        if state.pending is not None:
            await self._pipelined_step(ctx, state, number, rng)
        else:
            await self._plain_step(ctx, state, number, rng)
        state.rng_state = save_rng(rng)
        stale = ctx.budget.usage.metric_calls == paid_before
        state.counters.stale_in_a_row = state.counters.stale_in_a_row + 1 if stale else 0
        report_if_changed(ctx, self.name, number, sources, state.sources)
        self._check_done(ctx, state)
        return state

    async def _plain_step(
        self, ctx: SearchContext, state: GepaState, number: int, rng: random.Random
    ) -> None:
        """A step with nothing pending: a merge if due, else the children of iterations
        ``number`` on, decided in the step, or (pipelined) left pending for the next."""
        merge_due = self.settings.use_merge and self.merger.due(state)
        state.last_accepted = False
        plan = self.merger.plan(state, rng) if merge_due else None
        if plan is not None:
            await run_merge(ctx, state, plan, number, rng, self.settings.merge_subsample)
            state.iteration = number
            return
        children = self._children_due(ctx, state)
        self._choose_turns(ctx, state, number, children)
        if self._pipelines and ctx.budget.can_afford(
            self._prepare_most(ctx, children) + len(ctx.val)
        ):
            prepared = await self._prepare(ctx, state, number, children, rng)
            if prepared is not None:
                made, afters = prepared
                state.pending = park(made, afters, random.Random(rng.getrandbits(64)), children)
        else:
            await self._reflect(ctx, state, number, children, rng)
        state.iteration = number + children - 1

    async def _pipelined_step(
        self, ctx: SearchContext, state: GepaState, number: int, rng: random.Random
    ) -> None:
        """The pending children decided beside the next children's prepare half (module
        ``pipeline``), whose parents come from the pool before the pending ones join it.
        When a merge is due, the search would stop (``_done_reason``, or ``max_proposals``
        once these are decided), or the metric calls left do not hold the most both halves
        can spend and val for one more child, the pending children are decided alone, then
        a due merge, if the budget holds the most it spends (nothing else: a step cut short
        by the budget would lose the verdicts)."""
        assert state.pending is not None
        mutations, afters, judge_rng = unpark(ctx, state.pending)
        slots, state.pending = state.pending.slots, None
        merge_due = self.settings.use_merge and self.merger.due(state)
        children = self._children_due(ctx, state)
        most = self._decide_most(ctx, mutations, afters) + self._prepare_most(ctx, children)
        if (
            merge_due
            or self._done_reason(ctx, state) is not None
            or not ctx.budget.can_afford(most + len(ctx.val))
            or self._last_proposals(ctx, len(mutations))
        ):
            state.last_accepted = False
            decided = await self._decide(ctx, state, mutations, afters, judge_rng, slots)
            await self._confirm_winners(ctx, state, self._commit(ctx, state, *decided))
            state.last_accepted = state.last_accepted or merge_due
            if self._merge_affordable(ctx, state) and self._done_reason(ctx, state) is None:
                state.last_accepted = False
                plan = self.merger.plan(state, rng)
                if plan is not None:
                    await run_merge(ctx, state, plan, number, rng, self.settings.merge_subsample)
                    state.iteration = number
            return
        state.last_accepted = False
        self._choose_turns(ctx, state, number, children)
        decide_ctx, prepare_ctx = own_log(ctx), own_log(ctx)
        prepared, decided = await both(
            self._prepare(prepare_ctx, state, number, children, rng),
            self._decide(decide_ctx, state, mutations, afters, judge_rng, slots),
        )
        contenders = self._commit(decide_ctx, state, *decided)
        # the calls the children parked below may need to be decided stay unspent
        reserve = 0 if prepared is None else self._decide_most(ctx, *prepared)
        await self._confirm_winners(decide_ctx, state, contenders, reserve)
        join_logs(ctx, decide_ctx, prepare_ctx)
        state.sources = dict(sorted(state.sources.items()))  # both halves count
        if prepared is not None:
            made, scored = prepared
            state.pending = park(made, scored, random.Random(rng.getrandbits(64)), children)
        state.iteration = number + children - 1

    @staticmethod
    def _last_proposals(ctx: SearchContext, pending: int) -> bool:
        """Whether deciding ``pending`` children reaches ``[job.budget] max_proposals`` (a
        child counts when decided): the search stops after it, so none may be left pending."""
        limit = ctx.budget.config.max_proposals
        return limit is not None and ctx.budget.usage.proposals + pending >= limit

    def _merge_affordable(self, ctx: SearchContext, state: GepaState) -> bool:
        """Whether a merge is due and the metric calls left pay for the most it spends."""
        settings = self.settings
        due = settings.use_merge and self.merger.due(state)
        return due and ctx.budget.can_afford(settings.merge_subsample + len(ctx.val))

    @property
    def _pipelines(self) -> bool:
        """Whether the steps are pipelined (``pipelined_steps``; never at k = 1): by
        default where the acceptance rule decides a child on its minibatch alone."""
        setting, settings = self.settings.pipelined_steps, self.settings
        if settings.proposals_per_step < 2 or setting is False:
            return False
        alone = not self.acceptance.further_evidence
        if setting is None:
            return alone
        # with further evidence both halves would draw minibatches after waiting
        return alone or settings.failure_share is None

    def _prepare_most(self, ctx: SearchContext, children: int) -> int:
        """The most metric calls ``children`` children's prepare half spends."""
        batches = 2 if self.settings.failure_share is None else 3
        return children * batches * min(self.settings.minibatch_size, len(ctx.train))

    def _decide_most(
        self, ctx: SearchContext, mutations: list[Mutation], afters: list[EvalResult]
    ) -> int:
        """The most metric calls deciding ``mutations`` spends: where the minibatch alone
        decides (``further_evidence`` off), val for each child it accepts, else each
        child's evidence rounds and val."""
        cap, val = self._evidence_cap(ctx), len(ctx.val)
        most = 0
        for mutation, after in zip(mutations, afters, strict=True):
            if not self.acceptance.further_evidence:
                evidence = None
                if not after.ranked:
                    confidence = self.settings.confidence
                    evidence = paired(after.scores, mutation.before.scores, confidence)
                most += val if self._verdict(ctx, mutation, after, evidence) else 0
            else:
                most += 2 * max(0, cap - len(mutation.batch)) + val
        return most

    def adopt(
        self, ctx: SearchContext, state: GepaState, candidate: Candidate, result: EvalResult
    ) -> None:
        """Take a person's edit into the pool like an accepted child (``[job] approve``)."""
        adopt_into_pool(ctx, state, candidate, result)

    def _check_done(self, ctx: SearchContext, state: GepaState) -> None:
        """Mark the search done when ``_done_reason`` gives a reason (never with children
        pending: the next step decides them first)."""
        if state.pending is not None:
            return
        reason = self._done_reason(ctx, state)
        if reason is not None:
            state.done, state.done_reason = True, reason

    def _done_reason(self, ctx: SearchContext, state: GepaState) -> str | None:
        """Why GEPA has nothing left to try (the search loop's ``StopPolicy`` reads it)."""
        settings = self.settings
        best = state.entry(state.best_candidate_id)
        per_epoch = math.ceil(len(ctx.train) / min(settings.minibatch_size, len(ctx.train)))
        stale_allowed = settings.max_stale_iterations or max(10, 2 * per_epoch)
        if not state.components:
            return "the system has no components to optimize"
        if settings.stop_when_perfect and all(
            score >= settings.perfect_score for score in best.val_scores.values()
        ):
            return "the best candidate is perfect on val"
        if settings.max_iterations is not None and state.iteration >= settings.max_iterations:
            return f"max_iterations: {state.iteration} done"
        left, needed = ctx.budget.remaining_metric_calls(), self._calls_to_join(ctx, state)
        if left is not None and left < needed:
            return (
                f"metric_calls: the {left} left cannot score a new candidate on its minibatch"
                f" and on val ({needed}), so none can join the pool"
            )
        if state.counters.stale_in_a_row >= stale_allowed:
            return (
                f"{state.counters.stale_in_a_row} iterations in a row ran no new rollout"
                " (minibatches already solved, or the same proposals again)"
            )
        return None

    def _calls_to_join(self, ctx: SearchContext, state: GepaState) -> int:
        """The fewest metric calls a new candidate needs to join the pool: all of val (it
        is new, so nothing of it is stored) and, for a child, its minibatch; a merge due
        next needs only val. With fewer left, no step can change the pool or the best."""
        settings = self.settings
        merge_due = settings.use_merge and self.merger.due(state)
        minibatch = 0 if merge_due else min(settings.minibatch_size, len(ctx.train))
        return minibatch + len(ctx.val)

    # -- reflective mutation: propose → score → accept → promote ---------------------------

    def _children_due(self, ctx: SearchContext, state: GepaState) -> int:
        """How many children this step proposes: ``proposals_per_step``, fewer when
        ``max_iterations`` or the metric calls left (2 x minibatch a child at most, 3 x
        with ``failure_share``) allow fewer, never none."""
        settings, wanted = self.settings, self.settings.proposals_per_step
        if settings.max_iterations is not None:
            wanted = min(wanted, settings.max_iterations - state.iteration)
        remaining = ctx.budget.remaining_metric_calls()
        if remaining is not None:
            batches = 2 if settings.failure_share is None else 3
            per_child = batches * min(settings.minibatch_size, len(ctx.train))
            wanted = min(wanted, remaining // per_child)
        return max(1, wanted)

    async def _reflect(
        self, ctx: SearchContext, state: GepaState, first: int, children: int, rng: random.Random
    ) -> None:
        """Propose ``children`` children of front parents (iterations ``first`` on), score
        each on its parent's minibatch (and on more while the evidence is undecided), accept
        each only if the evidence says it is better there, and promote the accepted ones to
        all of val. The children are proposed and scored at once, and decided in order."""
        prepared = await self._prepare(ctx, state, first, children, rng)
        if prepared is not None:
            decided = await self._decide(ctx, state, *prepared, rng, children)
            await self._confirm_winners(ctx, state, self._commit(ctx, state, *decided))

    async def _prepare(
        self, ctx: SearchContext, state: GepaState, first: int, children: int, rng: random.Random
    ) -> tuple[list[Mutation], list[EvalResult]] | None:
        """The prepare half of a step: the children proposed (the smoke test's rejects left
        out) and their results on their minibatches; None when none was proposed."""
        bases = await self._bases(ctx, state, first, children, rng)
        proposed = await self._children(ctx, state, bases, rng) if bases else []
        mutations = [
            m for m in proposed if m is not None and not await smoke_rejects(ctx, state, m)
        ]
        if not mutations:
            return None
        requests = [ScoreRequest(m.child, m.batch, "train") for m in mutations]
        return mutations, await score_concurrently(ctx, requests, slots=children)

    async def _decide(
        self,
        ctx: SearchContext,
        state: GepaState,
        mutations: list[Mutation],
        afters: list[EvalResult],
        rng: random.Random,
        slots: int,
    ) -> tuple[list[Mutation], list[tuple[Mutation, Candidate, EvalResult]], list[OnVal]]:
        """The decide half of a step, up to the pool: the verdicts recorded in order and
        the accepted children scored on val (``_commit`` adds them to the pool). A child
        shown better is rejected when the budget cannot also score it on val beside the
        ones accepted before it (the first one too: a step's prepare half may leave less
        than val, and a step the budget cuts short loses every verdict it paid for)."""
        verdicts = await self._judge(ctx, state, mutations, afters, rng, slots)
        accepted: list[tuple[Mutation, Candidate, EvalResult]] = []
        for mutation, after, evidence in verdicts:
            ok = self._verdict(ctx, mutation, after, evidence)
            reason = None
            unpaid = not ctx.budget.can_afford(len(ctx.val) * (len(accepted) + 1))
            if ok and unpaid:
                ok, reason = False, "shown better, but the budget cannot also score it on val"
            child = self._record_verdict(
                ctx, state, mutation, after, ok, mutation.basis.number, evidence, reason
            )
            if ok:
                accepted.append((mutation, child, after))
        on_val = await self._on_val(ctx, accepted, slots) if accepted else []
        return [mutation for mutation, _, _ in verdicts], accepted, on_val

    def _verdict(
        self, ctx: SearchContext, mutation: Mutation, after: EvalResult, evidence: Evidence | None
    ) -> bool:
        """Whether the acceptance rule accepts the child (or it is as good and cheaper)."""
        ok = self.acceptance.accepts(mutation.before, after, evidence)
        return ok or as_good_and_cheaper(ctx.objectives, mutation.before, after, evidence)

    async def _judge(
        self,
        ctx: SearchContext,
        state: GepaState,
        mutations: list[Mutation],
        afters: list[EvalResult],
        rng: random.Random,
        slots: int,
    ) -> list[tuple[Mutation, EvalResult, Evidence | None]]:
        """Each child with its results and evidence (none for a batch scored by rank
        agreement, which has no per-example pairs), in order; the evidence rounds share
        ``slots`` batches' lanes."""
        paired = [(m, a) for m, a in zip(mutations, afters, strict=True) if not a.ranked]
        judged = iter(
            await judge_all(
                ctx,
                state,
                paired,
                rng,
                cap=self._evidence_cap(ctx),
                confidence=self.settings.confidence,
                extend_ties=self.settings.extend_ties and self.acceptance.further_evidence,
                slots=slots,
                sampler=self.sampler,
            )
        )
        verdicts: list[tuple[Mutation, EvalResult, Evidence | None]] = []
        for mutation, after in zip(mutations, afters, strict=True):
            if after.ranked:
                verdicts.append((mutation, after, None))
            else:
                item = next(judged)
                verdicts.append((item.mutation, item.after, item.evidence))
        return verdicts

    async def _bases(
        self, ctx: SearchContext, state: GepaState, first: int, children: int, rng: random.Random
    ) -> list[Basis]:
        """What each child is proposed from: a selected parent (drawn anew for each child,
        so a small front gives one parent several children) and the next minibatch, with
        the parent's results there; minibatches a parent already solves are skipped. With
        ``failure_share`` the reflection is shown a failure-aware minibatch instead, and
        the child is still judged on the uniform one (``failure_batches`` says why)."""
        picks = []
        for number in range(first, first + children):
            parent, components = self._select(ctx, state, number, rng)
            picks.append((number, parent, components, self._sample(ctx, state, number, rng)))
        requests = [ScoreRequest(parent.candidate, batch, "train") for _, parent, _, batch in picks]
        befores = await score_concurrently(ctx, requests, slots=children)
        bases = [
            Basis(parent, components, batch, before, number)
            for (number, parent, components, batch), before in zip(picks, befores, strict=True)
        ]
        if self.settings.failure_share is not None:
            bases = await show_failures(ctx, state, self.settings, bases, rng)
        bases = [
            basis
            for basis in bases
            if not self._skip(ctx, state, basis.number, basis.parent, basis.shown_before)
        ]
        self._check_affordable(ctx, sum(len({e.id for e in basis.batch}) for basis in bases))
        return bases

    async def _children(
        self, ctx: SearchContext, state: GepaState, bases: list[Basis], rng: random.Random
    ) -> list[Mutation | None]:
        """A child of each basis (None where none was made). One basis: ``_child``. More:
        the edit operators due first, then every reflection at once (each with its own RNG
        drawn from the search's, in order), then, in order, the children the reflections
        make and the operator fallbacks, none repeating an earlier child of the step."""
        if len(bases) == 1:
            return [await self._child(ctx, state, bases[0], rng)]
        fallback = self.settings.operator_fallback
        made: list[Mutation | None] = [
            operate(ctx, state, basis, self.operators)
            if self._operator_turn(basis.number)
            else None
            for basis in bases
        ]
        rngs = [random.Random(rng.getrandbits(64)) for _ in bases]
        pending = [i for i, mutation in enumerate(made) if mutation is None]
        texts = await run_all(
            [
                reflection_texts(self.proposer, ctx, state, bases[i], rngs[i], fallback=fallback)
                for i in pending
            ]
        )
        siblings: set[str] = {m.child.id for m in made if m is not None}
        for i, proposals in zip(pending, texts, strict=True):
            mutation = reflected_child(ctx, state, bases[i], proposals, frozenset(siblings))
            if mutation is None and fallback:
                mutation = operate(ctx, state, bases[i], self.operators)
            if mutation is not None and mutation.child.id in siblings:
                mutation = None  # an operator child another child of the step already is
            if mutation is not None:
                siblings.add(mutation.child.id)
            made[i] = mutation
        return made

    async def _child(
        self, ctx: SearchContext, state: GepaState, basis: Basis, rng: random.Random
    ) -> Mutation | None:
        """A child of ``basis.parent``: an edit operator's on an operator turn
        (``_operator_turn``), else the reflection's, with operators as the fallback."""
        settings = self.settings
        mutation = None
        if self._operator_turn(basis.number):
            mutation = operate(ctx, state, basis, self.operators)
        if mutation is None:
            fallback = settings.operator_fallback
            mutation = await reflect(self.proposer, ctx, state, basis, rng, fallback=fallback)
        if mutation is None and settings.operator_fallback:
            mutation = operate(ctx, state, basis, self.operators)
        return mutation

    def _operator_turn(self, number: int) -> bool:
        """Whether iteration ``number`` proposes an edit-operator child (the turn policy's
        choice for the step, ``_choose_turns``)."""
        return number in self._operator_numbers

    def _choose_turns(
        self, ctx: SearchContext, state: GepaState, first: int, children: int
    ) -> None:
        """Ask the turn policy which of the step's iterations (``first`` on) go to the edit
        operators, before the step proposes anything (so a pipelined step's verdicts, which
        update the record, never race with it); none where no operator applies."""
        if staged_prompts(ctx) is None or not self.operators:
            self._operator_numbers = frozenset()
            return
        turns = state.turns
        rng = random.Random(f"turns:{ctx.seed}")
        if turns.rng_state:
            rng = load_rng(turns.rng_state, ctx.seed)
        numbers = range(first, first + children)
        self._operator_numbers = self.turns.operator_turns(turns, numbers, rng)
        turns.rng_state = save_rng(rng)

    def _select(
        self, ctx: SearchContext, state: GepaState, number: int, rng: random.Random
    ) -> tuple[PoolEntry, list[str]]:
        """The parent and the components to change in it."""
        settings = self.settings
        parent, weights = self.selector.select(state, rng)
        names = self._component_names(ctx, state, parent)
        components = select_components(parent, names, settings.component_selection)
        ctx.emit(
            GepaCandidateSelected(
                iteration=number,
                candidate_id=parent.id,
                selection=settings.candidate_selection,
                val_score=parent.val_score,
                front_weights=weights,
                components=components,
            )
        )
        return parent, components

    def _component_names(
        self, ctx: SearchContext, state: GepaState, parent: PoolEntry
    ) -> list[str]:
        """The components a parent's round robin goes over (the same for every parent)."""
        return state.components

    def _sample(
        self, ctx: SearchContext, state: GepaState, number: int, rng: random.Random
    ) -> list[Example]:
        """The next train minibatch."""
        train = {example.id: example for example in ctx.train}
        ids = self.sampler.draw(state, list(train), self.settings.minibatch_size, rng)
        ctx.emit(GepaMinibatchSampled(iteration=number, example_ids=ids, epoch=state.sampler.epoch))
        return [train[example_id] for example_id in ids]

    def _skip(
        self,
        ctx: SearchContext,
        state: GepaState,
        number: int,
        parent: PoolEntry,
        before: EvalResult,
    ) -> bool:
        """Skip reflecting on a minibatch the parent already solves (if so configured)."""
        settings = self.settings
        if not settings.skip_perfect or any(s < settings.perfect_score for s in before.scores):
            return False
        state.counters.skipped_perfect += 1
        ctx.emit(
            GepaMinibatchSkipped(
                iteration=number,
                candidate_id=parent.id,
                scores=before.scores,
                reason="the parent is perfect on the minibatch",
            )
        )
        return True

    @staticmethod
    def _check_affordable(ctx: SearchContext, calls: int) -> None:
        """Stop before the reflection calls if the budget cannot score the children on
        their minibatches afterwards (``calls``)."""
        if not ctx.budget.can_afford(calls):
            raise BudgetExhausted(
                "metric_calls: the budget cannot score a new candidate on the minibatch"
            )

    def _evidence_cap(self, ctx: SearchContext) -> int:
        """The most train examples a child is judged on (the plan's ``evidence_examples``;
        the budget may stop it sooner); the minibatch alone where the acceptance rule takes
        no further evidence."""
        if not self.acceptance.further_evidence:
            return min(self.settings.minibatch_size, len(ctx.train))
        return evidence_examples(self.settings, len(ctx.train))

    def _record_verdict(
        self,
        ctx: SearchContext,
        state: GepaState,
        mutation: Mutation,
        after: EvalResult,
        accepted: bool,
        number: int,
        evidence: Evidence | None = None,
        reason: str | None = None,
    ) -> Candidate:
        """Record the child with its verdict, evidence (and reflection) in its lineage;
        report and count the verdict (a rejection with ``reason`` when one is given)."""
        child = ctx.add_candidate(mutation.with_details(after, accepted, evidence))
        verdict = GepaMinibatchAccepted if accepted else GepaMinibatchRejected
        undecided = evidence is not None and evidence.verdict == "undecided" and not accepted
        if undecided and evidence is not None and reason is None:
            reason = f"undecided on {evidence.n} examples: not shown better (nor worse)"
        ctx.emit(
            verdict(
                iteration=number,
                candidate_id=child.id,
                parent_id=mutation.parent.id,
                components=mutation.changed,
                before=mutation.before.total,
                after=after.total,
                reason=reason,
                source=mutation.source,
                evidence=evidence,
            )
        )
        state.counters.proposals += 1
        if undecided:
            state.counters.undecided += 1
        count(state.sources, mutation.source, "proposed")
        note_try(state.turns, mutation.source)
        if accepted:
            state.counters.accepted += 1
            count(state.sources, mutation.source, "accepted")
        else:
            state.counters.rejected += 1
        return child

    async def _on_val(
        self,
        ctx: SearchContext,
        accepted: list[tuple[Mutation, Candidate, EvalResult]],
        slots: int,
    ) -> list[OnVal]:
        """The accepted children scored on all of val (at once, sharing the lanes of the
        step's ``slots`` batches; through the val gate, in chunks against their parents,
        where the acceptance rule has one)."""
        if self.acceptance.val_gate:
            children = [(mutation.parent, child) for mutation, child, _ in accepted]
            confidence = self.settings.confidence
            return await score_on_val(ctx, children, confidence=confidence, slots=slots)
        requests = [ScoreRequest(child, ctx.val, "val") for _, child, _ in accepted]
        results = await score_concurrently(ctx, requests, slots=slots)
        return [
            OnVal.of(mutation.parent, child, result)
            for (mutation, child, _), result in zip(accepted, results, strict=True)
        ]

    def _commit(
        self,
        ctx: SearchContext,
        state: GepaState,
        judged: list[Mutation],
        accepted: list[tuple[Mutation, Candidate, EvalResult]],
        on_val: list[OnVal],
    ) -> list[PoolEntry]:
        """The end of the decide half: the judged parents' train scores kept
        (``failure_share``), the accepted children added to the pool in order (unless the
        rule's ``val_gate`` shows them worse), and a merge scheduled for each. Returns those
        that joined with a mean val above the best's without becoming it (a guarded winner:
        val does not show them better than the seed), for ``_confirm_winners``."""
        settings = self.settings
        contenders: list[PoolEntry] = []
        remember_judged(state, settings, judged)
        for (mutation, child, after), item in zip(accepted, on_val, strict=True):
            assert item.results is not None  # val is not empty
            if not item.joins:
                state.counters.left_out += 1
                ctx.emit(
                    GepaValRejected(
                        iteration=mutation.basis.number,
                        candidate_id=child.id,
                        score=item.results.mean,
                        n=len(item.results.results),
                        reason=item.reason or "shown worse than its parent on val",
                        evidence=item.evidence,
                    )
                )
                continue
            entry = PoolEntry(
                candidate=lean(child),
                parents=[mutation.parent.id],
                iteration=mutation.basis.number,
                operation=child.lineage.operation,
                components_changed=mutation.changed,
                minibatch_before=mutation.before.total,
                minibatch_after=after.total,
                next_component=mutation.parent.next_component,
                train_scores={} if settings.failure_share is None else scores_by_example(after),
            )
            add_to_pool(ctx, state, entry, item.results)
            if item.results.mean > mutation.parent.val_score:
                note_paid(state.turns, mutation.source)
            if tops_best(state, entry):  # only a guarded winner (may_win) stays below it
                contenders.append(entry)
            state.last_accepted = True
            if settings.use_merge:
                self.merger.accepted(state)
        return contenders

    async def _confirm_winners(
        self, ctx: SearchContext, state: GepaState, contenders: list[PoolEntry], reserve: int = 0
    ) -> None:
        """Each new member whose mean val tops the best's but that val does not show better
        than the seed (at the rule's ``winner_confidence``), the highest mean val first,
        while it still tops the best: confirmed on further train examples
        (``val_gate.confirm_winner``), leaving ``reserve`` metric calls unspent."""
        for entry in sorted(contenders, key=lambda item: -item.val_score):
            if tops_best(state, entry):
                await confirm_winner(
                    ctx,
                    state,
                    entry,
                    examples=self.settings.winner_examples,
                    iteration=entry.iteration,
                    reserve=reserve,
                )
