"""MIPRO (Opsahl-Ong et al. 2024): bootstrapped demos and grounded instructions, searched with TPE.

Steps: ``start`` plans the run (event ``mipro.plan``) and scores the seed on full val
(trial 0, the baseline). Then one step each for bootstrapping demo sets, summarizing the
dataset and proposing instructions, and one step per trial: the first trials are designed
(``screening``), then TPE picks an instruction, a demo set and a layout per stage; the
combination is scored on a val minibatch, and every K trials
(and at the end) the best combination by mean minibatch score is scored on full val. Only
full-val scores choose the winner. A warm start (``[job] warm_start``) brings an earlier
job's programs in as the best so far, choices and trials (``warm.py``).
"""

from __future__ import annotations

import logging
import random
from typing import ClassVar

from emery.algorithms.base import SearchContext, load_rng, save_rng
from emery.algorithms.labeled import (
    POOL_SIZE,
    input_fields,
    labeled_demos,
    labeled_stage,
    pick_demos,
)
from emery.algorithms.mipro import demos as demo_sets
from emery.algorithms.mipro import warm
from emery.algorithms.mipro.events import (
    DemoSetSize,
    MiproDatasetSummary,
    MiproDemosBootstrapped,
    MiproInstructionsProposed,
    MiproPlanned,
    MiproProposalRejected,
)
from emery.algorithms.mipro.grounding import (
    fallback_summary,
    program_description,
    stage_reads,
    summarize_dataset,
)
from emery.algorithms.mipro.layouts import instruction_variants, layout_choices
from emery.algorithms.mipro.normalise import reasoning_stages
from emery.algorithms.mipro.presets import MiproPlan, PlanInputs, make_plan
from emery.algorithms.mipro.proposer import StageGrounding, propose_stage
from emery.algorithms.mipro.search import top_combos, trial_cost
from emery.algorithms.mipro.settings import MiproSettings
from emery.algorithms.mipro.state import (
    ComboRecord,
    InstructionChoice,
    MiproState,
    TrialRecord,
)
from emery.algorithms.mipro.trials import run_trial
from emery.algorithms.warm_start import warm_note
from emery.core.errors import ConfigError
from emery.core.events import BaselineEvaluated, BestUpdated
from emery.core.models import Candidate, Demo, Example
from emery.lm.base import LM
from emery.systems.capabilities import StagedPrompts
from emery.systems.formats import format_description, format_sentence
from emery.systems.prompt_layout import StageLayout
from emery.verifiers.base import as_text

log = logging.getLogger(__name__)

LABELED_PROBES = 3
"""Train examples whose gold output is tried as a demo before the plan is made."""


class Mipro:
    """The MIPRO search loop; see the module docstring."""

    name: ClassVar[str] = "mipro"
    state_type = MiproState

    def __init__(self, settings: MiproSettings | None = None) -> None:
        self.settings = settings or MiproSettings()

    # -- start -------------------------------------------------------------------------

    async def start(self, ctx: SearchContext) -> MiproState:
        program = _program(ctx)
        if not ctx.val:
            raise ConfigError("mipro needs a non-empty val split to choose between candidates")
        seed = ctx.add_candidate(ctx.seed_candidate)
        plan = self._plan(ctx, program, labeled=await self._labeled_possible(ctx, program))
        state = MiproState(
            seed_candidate_id=seed.id,
            plan=plan,
            stages=[stage.name for stage in program.config.stages],
        )
        await self._baseline(ctx, program, state, seed)
        state.rng_state = save_rng(load_rng([], ctx.seed))
        return await self.warm_start(ctx, state) if ctx.warm else state

    async def _labeled_possible(self, ctx: SearchContext, program: StagedPrompts) -> bool:
        """Whether a labeled demo set can be made: a stage reads the inputs and a train
        example's gold output, written in its format, passes the verifier (a gold that is
        a test suite, or a judge's reference, does not)."""
        name, _ = labeled_stage(program, set(input_fields(ctx)))
        if name is None or self.settings.max_labeled_demos == 0:
            return False
        examples = [e for e in ctx.train if e.expected is not None][:LABELED_PROBES]
        demos = await labeled_demos(
            program,
            program.stages[name],
            examples,
            ctx.evaluations.evaluator.verifier,
            limit=1,
            threshold=self.settings.bootstrap_threshold,
        )
        return bool(demos)

    def _plan(self, ctx: SearchContext, program: StagedPrompts, *, labeled: bool) -> MiproPlan:
        """The run's plan, logged and emitted (``mipro.plan``)."""
        gold = _first_gold(ctx)
        fixed = 1 + int(
            self.settings.format_hint_instruction
            and any(format_sentence(s, gold) for s in program.config.stages)
        )
        plan = make_plan(
            self.settings,
            PlanInputs(
                stages=len(program.config.stages),
                n_train=len(ctx.train),
                n_val=len(ctx.val),
                labeled_examples=self.settings.max_labeled_demos if labeled else 0,
                fixed_instructions=fixed,
                budget_metric_calls=ctx.budget.remaining_metric_calls(),
            ),
        )
        log.info(plan.describe())
        for note in plan.notes:
            log.info("mipro plan: %s", note)
        planned = MiproPlanned(**plan.model_dump(mode="json"), summary=plan.describe())
        ctx.emit(warm_note(ctx, planned))
        return plan

    async def warm_start(self, ctx: SearchContext, state: MiproState) -> MiproState:
        """An earlier job's programs rescored on val: the best so far if better, later
        choices and TPE trials (``mipro.warm``)."""
        await warm.take_programs(ctx, state)
        state.top = top_combos(state, self.settings.top_k)
        return state

    async def _baseline(
        self, ctx: SearchContext, program: StagedPrompts, state: MiproState, seed: Candidate
    ) -> None:
        """Trial 0: the seed on full val, the first best; which stages reason."""
        result = await ctx.evaluate(seed, ctx.val, "val")
        ctx.emit(
            BaselineEvaluated(
                candidate_id=seed.id, split="val", score=result.mean, n=len(result.results)
            )
        )
        params = dict.fromkeys(_param_names(state.stages), 0)
        state.trials.append(
            TrialRecord(
                number=0,
                kind="baseline",
                params=params,
                candidate_id=seed.id,
                score=result.mean,
                n=len(result.results),
                cost=trial_cost(ctx.select, result.results),
            )
        )
        state.combos[seed.id] = ComboRecord(
            candidate_id=seed.id, params=params, full_score=result.mean
        )
        state.reasoning_stages = await reasoning_stages(
            program,
            result.results,
            {example.id: example for example in ctx.val},
            ctx.evaluations.evaluator.verifier,
        )
        state.baseline_val_score = state.best_val_score = result.mean
        state.best_candidate_id = seed.id
        ctx.emit(BestUpdated(candidate_id=seed.id, score=result.mean))
        state.lift = 0.0
        state.top = top_combos(state, self.settings.top_k)

    # -- steps -------------------------------------------------------------------------

    async def step(self, ctx: SearchContext, state: MiproState) -> MiproState:
        rng = load_rng(state.rng_state, ctx.seed)
        match state.phase:
            case "bootstrap":
                await self._bootstrap(ctx, state, rng)
                state.phase = "summarize"
            case "summarize":
                await self._summarize(ctx, state, rng)
                state.phase = "propose"
            case "propose":
                await self._propose(ctx, state, rng)
                warm.add_choices(ctx, state)
                state.phase = "search"
                if state.resolved_plan().num_trials == 0:
                    state.done, state.done_reason = True, "no trials planned"
            case "search":
                await run_trial(
                    ctx,
                    state,
                    rng,
                    top_k=self.settings.top_k,
                    final_promotions=self.settings.final_promotions,
                    trials_per_step=self.settings.trials_per_step,
                    winner_examples=self.settings.winner_examples,
                )
        state.iteration += 1
        state.rng_state = save_rng(rng)
        return state

    async def _bootstrap(self, ctx: SearchContext, state: MiproState, rng: random.Random) -> None:
        """Labeled and bootstrapped demo sets per stage (one step)."""
        program = _program(ctx)
        train = list(ctx.train)
        rng.shuffle(train)
        pools, note = await self._labeled(ctx, state, program, train)
        labeled = {
            stage: list(pick_demos(pool, self.settings.max_labeled_demos, ()))
            for stage, pool in pools.items()
        }
        used = {d.example_id for demos in labeled.values() for d in demos}
        pool = [example for example in train if example.id not in used]
        bootstrapped = await self._bootstrapped(ctx, state, program, labeled, pool, rng)
        plan = state.resolved_plan()
        for stage in state.stages:
            state.demo_sets[stage] = demo_sets.assemble(
                tuple(ctx.seed_candidate.demos.get(stage, ())),
                labeled.get(stage, []),
                bootstrapped.get(stage, []),
                nearest=pools.get(stage, []),
                limit=plan.num_demo_sets,
                reasoning=stage in state.reasoning_stages,
            )
        warm.add_demo_sets(state)
        ctx.emit(
            MiproDemosBootstrapped(
                teacher_candidate_id=state.teacher_candidate_id,
                runs=state.bootstrap_runs,
                passed=state.bootstrap_passed,
                normalised=state.bootstrap_normalised,
                labeled=note,
                sets={
                    stage: [DemoSetSize(kind=s.kind, size=len(s.demos)) for s in sets]
                    for stage, sets in state.demo_sets.items()
                },
            )
        )

    async def _labeled(
        self, ctx: SearchContext, state: MiproState, program: StagedPrompts, train: list[Example]
    ) -> tuple[dict[str, list[Demo]], str]:
        """The pool of gold outputs written as demos of the stage that reads the inputs
        (a labeled set is picked from it, distinct replies first), and a note."""
        settings = self.settings
        labeled_name, note = labeled_stage(program, set(input_fields(ctx)))
        labeled: dict[str, list[Demo]] = {}
        if labeled_name is not None and settings.max_labeled_demos > 0:
            pool = await labeled_demos(
                program,
                program.stages[labeled_name],
                train,
                ctx.evaluations.evaluator.verifier,
                limit=max(POOL_SIZE, settings.max_labeled_demos),
                threshold=settings.bootstrap_threshold,
            )
            labeled[labeled_name] = pool
            if not pool:
                note += "; no gold output could be written in the stage's format"
        state.labeled_note = {labeled_name or state.stages[-1]: note}
        return labeled, note

    async def _bootstrapped(
        self,
        ctx: SearchContext,
        state: MiproState,
        program: StagedPrompts,
        labeled: dict[str, list[Demo]],
        pool: list[Example],
        rng: random.Random,
    ) -> dict[str, list[list[Demo]]]:
        """Demo sets from the teacher's passing runs on ``pool`` (none if not planned)."""
        settings, plan = self.settings, state.resolved_plan()
        n_boot_sets = (
            max(0, plan.num_demo_sets - 2)  # a plan stored before bootstrapped_sets
            if plan.bootstrapped_sets is None
            else plan.bootstrapped_sets
        )
        teacher = demo_sets.teacher_candidate(
            ctx.seed_candidate,
            program,
            labeled,
            format_hint=settings.teacher_format_hint,
            use_labeled=settings.teacher_labeled_demos,
            reasoning=settings.teacher_reasoning,
            gold_example=_first_gold(ctx),
            reasoning_stages=frozenset(state.reasoning_stages),
        )
        if not (n_boot_sets and settings.max_bootstrapped_demos and plan.bootstrap_examples):
            return {stage: [] for stage in state.stages}
        teacher = ctx.add_candidate(teacher)
        state.teacher_candidate_id = teacher.id
        run = await demo_sets.run_teacher(
            ctx,
            teacher,
            pool,
            wanted=min(len(pool), settings.max_bootstrapped_demos * n_boot_sets),
            allowance=plan.bootstrap_examples,
            threshold=settings.bootstrap_threshold,
            normalise=settings.bootstrap_normalise,
        )
        state.bootstrap_runs, state.bootstrap_passed = run.runs, len(run.passing)
        state.bootstrap_normalised = run.normalised
        return demo_sets.bootstrapped_sets(
            state.stages,
            run.passing,
            count=n_boot_sets,
            max_demos=settings.max_bootstrapped_demos,
            rng=rng,
        )

    async def _summarize(self, ctx: SearchContext, state: MiproState, rng: random.Random) -> None:
        settings, plan = self.settings, state.resolved_plan()
        if settings.use_dataset_summary and plan.summary_calls and ctx.train:
            state.dataset_summary, observations = await summarize_dataset(
                _proposer(ctx),
                ctx.dataset,
                rng,
                batches=plan.summary_calls - 1,
                batch_size=settings.summary_batch_size,
                max_tokens=settings.proposer_max_tokens,
                temperature=settings.proposer_temperature,
                seed_calls=settings.seed_lm_calls,
            )
        else:
            state.dataset_summary, observations = fallback_summary(ctx.dataset), []
        state.program_description = program_description(_program(ctx), ctx.seed_candidate)
        ctx.emit(
            MiproDatasetSummary(
                summary=state.dataset_summary,
                observations=observations,
                program=state.program_description,
            )
        )

    async def _propose(self, ctx: SearchContext, state: MiproState, rng: random.Random) -> None:
        program, settings, plan = _program(ctx), self.settings, state.resolved_plan()
        reads = stage_reads(program)
        example_texts = [as_text(v) for e in ctx.train for v in e.input.values()]
        gold = _first_gold(ctx)
        for stage_name in state.stages:
            stage = program.stages[stage_name]
            original = ctx.seed_candidate.components.get(stage_name, stage.instruction)
            choices = [InstructionChoice(text=original, source="original")]
            sentence = format_sentence(stage, gold)
            hinted = demo_sets.with_sentence(original, sentence)
            if settings.format_hint_instruction and hinted != original:
                choices.append(InstructionChoice(text=hinted, source="format_hint"))
            wanted = max(plan.num_instructions, 1)
            outcome = await propose_stage(
                _proposer(ctx),
                StageGrounding(
                    stage=stage_name,
                    reads=reads[stage_name],
                    format=format_description(stage),
                    dataset_summary=state.dataset_summary,
                    program_description=state.program_description,
                    dataset_description=ctx.dataset.description,
                    baseline_score=state.baseline_val_score,
                    reviewer_notes=tuple(ctx.reviewer_notes),
                ),
                choices[:wanted],
                state.demo_sets.get(stage_name, []),
                example_texts,
                rng,
                wanted=wanted,
                attempts=plan.proposal_attempts,
                use_tips=settings.use_tips,
                max_tokens=settings.proposer_max_tokens,
                temperature=settings.proposer_temperature,
                seed_calls=settings.seed_lm_calls,
            )
            state.instructions[stage_name] = outcome.choices + instruction_variants(
                stage, outcome.choices
            )
            seed_layout = StageLayout.of(ctx.seed_candidate.components, stage_name)
            state.layouts[stage_name] = (
                layout_choices(stage, seed_layout) if settings.search_layouts else []
            )
            state.rejected.extend(outcome.rejected)
            for rejected in outcome.rejected:
                ctx.emit(MiproProposalRejected(**rejected.model_dump()))
            reasons = outcome.reasons()
            log.info(
                "mipro: stage %r: %d of %d proposals kept (%d repaired), rejected: %s%s",
                stage_name,
                outcome.kept,
                outcome.calls,
                outcome.repaired,
                ", ".join(f"{n} {kind}" for kind, n in reasons.items()) or "none",
                f"; retry round of {outcome.retry_calls} calls" if outcome.retry_calls else "",
            )
            ctx.emit(
                MiproInstructionsProposed(
                    stage=stage_name,
                    calls=outcome.calls,
                    rejected=len(outcome.rejected),
                    choices=list(outcome.choices),
                    kept=outcome.kept,
                    repaired=outcome.repaired,
                    reasons=reasons,
                    retry_calls=outcome.retry_calls,
                )
            )


def _program(ctx: SearchContext) -> StagedPrompts:
    if not isinstance(ctx.system, StagedPrompts):
        raise ConfigError(f"mipro optimizes prompt programs; system {ctx.system.name!r} is not one")
    return ctx.system


def _proposer(ctx: SearchContext) -> LM:
    return ctx.lms["proposer"] if "proposer" in ctx.lms else ctx.lm("task")


def _first_gold(ctx: SearchContext) -> object:
    return next((e.expected for e in ctx.train if e.expected is not None), None)


def _param_names(stages: list[str]) -> list[str]:
    return [name for stage in stages for name in (f"{stage}.instruction", f"{stage}.demos")]
