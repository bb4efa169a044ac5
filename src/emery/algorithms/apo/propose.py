"""One expansion of the beam: critique a parent's component, edit it, keep a usable child."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from emery.algorithms.apo.critique import Critique, Sampling, critique_prompt
from emery.algorithms.apo.edit import Edit, edit_prompt
from emery.algorithms.apo.events import ApoCritique, ApoEdit
from emery.algorithms.apo.experiments import as_text, build_experiments
from emery.algorithms.apo.prompts import MetaPrompt
from emery.algorithms.apo.settings import ApoSettings
from emery.algorithms.apo.state import ApoState
from emery.algorithms.base import SearchContext
from emery.algorithms.code_proposals import CODE_MAX_TOKENS, CodeProposals, code_proposals
from emery.algorithms.sources import count
from emery.core.models import Candidate, Example, Lineage
from emery.evaluation.eval_result import EvalResult

OPERATION = "apo_edit"
CODE_VARIANT = "code"
"""The critique and edit variant recorded for code modules (they have their own prompts)."""


@dataclass(frozen=True)
class Expansion:
    """One parent's component to improve from its runs on a train batch."""

    parent: Candidate
    component: str
    branch: int
    examples: Sequence[Example]
    result: EvalResult
    experiments: str

    @property
    def prompt(self) -> str:
        return self.parent.components[self.component]

    def where(self, state: ApoState) -> dict[str, Any]:
        """The fields that place a critique or an edit event in the search."""
        return {
            "round": state.round,
            "expansion": state.expansions_done,
            "parent_id": self.parent.id,
            "branch": self.branch,
            "component": self.component,
        }


@dataclass(frozen=True)
class Draft:
    """An expansion's critique and edit (none when the critique was empty), not yet
    recorded."""

    expansion: Expansion
    critique: Critique
    edit: Edit | None


@dataclass(frozen=True)
class Proposer:
    """Turns a parent and its train-batch results into a child (or a recorded rejection).

    The critique and edit prompt variants are drawn at random from the search RNG; so is
    the seed sent with each sampled call, which makes reruns and resumes reproducible.
    """

    settings: ApoSettings
    critique_prompts: Sequence[MetaPrompt]
    edit_prompts: Sequence[MetaPrompt]

    async def propose(
        self,
        ctx: SearchContext,
        state: ApoState,
        rng: random.Random,
        parent: Candidate,
        component: str,
        branch: int,
        examples: Sequence[Example],
        result: EvalResult,
    ) -> None:
        """Critique the parent's ``component`` from the batch, edit it, keep a usable child
        (harness code: a whole new module that must compile and pass a smoke run)."""
        code = code_proposals(ctx)
        if code is not None and code.system.is_code_component(component):
            expansion = Expansion(parent, component, branch, examples, result, experiments="")
            await self.propose_module(ctx, code, state, rng, expansion)
            return
        draft = await self.draft(ctx, rng, parent, component, branch, examples, result)
        self.commit(ctx, state, draft)

    async def draft(
        self,
        ctx: SearchContext,
        rng: random.Random,
        parent: Candidate,
        component: str,
        branch: int,
        examples: Sequence[Example],
        result: EvalResult,
    ) -> Draft:
        """The critique and the edit of a text component (the LM calls of ``propose``; it
        changes no state, so several run at once, each with its own ``rng``)."""
        experiments = build_experiments(
            examples,
            result.results,
            component=component,
            prompt=parent.components[component],
            max_chars=self.settings.max_message_chars,
        )
        expansion = Expansion(parent, component, branch, examples, result, experiments)
        critique_template = rng.choice(self.critique_prompts)
        edit_template = rng.choice(self.edit_prompts)
        critique = await self.critique(ctx, rng, expansion, critique_template)
        if not critique.text:
            return Draft(expansion, critique, None)
        edit = await self.edit(ctx, rng, expansion, edit_template, critique)
        return Draft(expansion, critique, edit)

    def commit(self, ctx: SearchContext, state: ApoState, draft: Draft) -> None:
        """Report the draft's critique and edit and keep its usable child (drafts of one
        step are committed in order)."""
        expansion, critique, edit = draft.expansion, draft.critique, draft.edit
        self.record_critique(ctx, state, expansion, critique)
        if edit is None:
            self.reject(ctx, state, expansion, "the critique was empty")
            return
        problem, child_id = edit.problem, None
        if edit.accepted and edit.proposal is not None:
            child = self.child(state, expansion, critique, edit.proposal, edit.variant)
            if child.id in state.beam or child.id in state.children:
                problem = f"same text as candidate {child.id} of this round"
            else:
                child_id = self.keep(ctx, state, child).id
        self.record_edit(ctx, state, expansion, edit, problem, child_id)

    async def propose_module(
        self,
        ctx: SearchContext,
        code: CodeProposals,
        state: ApoState,
        rng: random.Random,
        expansion: Expansion,
    ) -> None:
        """Code modules: the gradient LM critiques the module from the parent's episodes,
        the edit LM writes a whole new module from that critique. A reply the system's check
        refuses is an invalid proposal; a new module that crashes, raises, exits or hangs
        on the batch's first example (the smoke run) is rejected before the beam pays for
        scoring it. Both are edit events with the reason."""
        settings = self.settings
        shown = (expansion.prompt, expansion.examples, expansion.result.results)
        sampling = self.sampling(rng, settings.critique_max_tokens)
        completion = await ctx.lm(settings.gradient_role).complete(
            code.critique_messages(*shown), **sampling.params()
        )
        critique = Critique(CODE_VARIANT, completion.text.strip(), completion.finish_reason)
        self.record_critique(ctx, state, expansion, critique)
        if not critique.text:
            self.reject(ctx, state, expansion, "the critique was empty")
            return
        sampling = self.sampling(rng, max(CODE_MAX_TOKENS, settings.edit_max_tokens))
        module = await code.ask(
            ctx.lm(settings.edit_role),
            code.rewrite_messages(*shown, critique.text),
            expansion.prompt,
            **sampling.params(),
        )
        edit = Edit(CODE_VARIANT, module.reply, module.text, module.problem)
        problem, child_id = edit.problem, None
        if edit.proposal is None:
            state.code_invalid += 1
        else:
            child = self.child(state, expansion, critique, edit.proposal, CODE_VARIANT)
            if child.id in state.beam or child.id in state.children:
                problem = f"same module as candidate {child.id} of this round"
            else:
                task_lm = ctx.lm("task")
                problem = await code.smoke_rejection(child, expansion.examples[0], task_lm)
                if problem is None:
                    child_id = self.keep(ctx, state, child).id
                else:
                    state.smoke_rejected += 1
        self.record_edit(ctx, state, expansion, edit, problem, child_id)

    async def critique(
        self,
        ctx: SearchContext,
        rng: random.Random,
        expansion: Expansion,
        template: MetaPrompt,
    ) -> Critique:
        """The gradient LM's critique of the prompt from the experiments."""
        return await critique_prompt(
            ctx.lm(self.settings.gradient_role),
            template,
            prompt=expansion.prompt,
            component=expansion.component,
            task=ctx.dataset.description,
            experiments=expansion.experiments,
            sampling=self.sampling(rng, self.settings.critique_max_tokens),
            notes=ctx.reviewer_notes,
        )

    @staticmethod
    def record_critique(
        ctx: SearchContext, state: ApoState, expansion: Expansion, critique: Critique
    ) -> None:
        """Count and report a critique."""
        state.critiques += 1
        ctx.emit(
            ApoCritique(
                **expansion.where(state),
                variant=critique.variant,
                train_examples=[e.id for e in expansion.examples],
                batch_score=expansion.result.mean,
                critique=critique.text,
            )
        )

    async def edit(
        self,
        ctx: SearchContext,
        rng: random.Random,
        expansion: Expansion,
        template: MetaPrompt,
        critique: Critique,
    ) -> Edit:
        """The edit LM's rewrite of the prompt from the critique, checked for usability."""
        return await edit_prompt(
            ctx.lm(self.settings.edit_role),
            template,
            prompt=expansion.prompt,
            component=expansion.component,
            task=ctx.dataset.description,
            critique=critique.text,
            experiments=expansion.experiments,
            examples=[as_text(e.input) for e in expansion.examples],
            sampling=self.sampling(rng, self.settings.edit_max_tokens),
        )

    @staticmethod
    def child(
        state: ApoState, expansion: Expansion, critique: Critique, text: str, edit_variant: str
    ) -> Candidate:
        """The parent with the edited component (not yet recorded)."""
        parent = expansion.parent
        return parent.derive(
            components={expansion.component: text},
            lineage=Lineage(
                parents=(parent.id,),
                generation=parent.lineage.generation + 1,
                operation=OPERATION,
                iteration=state.round,
                details={
                    "component": expansion.component,
                    "critique_variant": critique.variant,
                    "edit_variant": edit_variant,
                },
            ),
        )

    def keep(self, ctx: SearchContext, state: ApoState, child: Candidate) -> Candidate:
        """Add a new child to the round and the pool."""
        child = self.register(ctx, state, child)
        state.children.append(child.id)
        state.pool[child.id] = child
        return child

    @staticmethod
    def reject(ctx: SearchContext, state: ApoState, expansion: Expansion, reason: str) -> None:
        """Record an expansion that produced no edit."""
        state.edits_rejected += 1
        count(state.sources, OPERATION, "invalid")
        ctx.emit(
            ApoEdit(
                **expansion.where(state),
                variant=None,
                reply="",
                proposal=None,
                accepted=False,
                reason=reason,
                child_id=None,
            )
        )

    @staticmethod
    def record_edit(
        ctx: SearchContext,
        state: ApoState,
        expansion: Expansion,
        edit: Edit,
        problem: str | None,
        child_id: str | None,
    ) -> None:
        """Count the edit as accepted or rejected and report it."""
        if problem is None:
            state.edits_accepted += 1
            count(state.sources, OPERATION, "proposed")
        else:
            state.edits_rejected += 1
            count(state.sources, OPERATION, "invalid")
        ctx.emit(
            ApoEdit(
                **expansion.where(state),
                variant=edit.variant,
                reply=edit.reply,
                proposal=edit.proposal,
                accepted=problem is None,
                reason=problem,
                child_id=child_id,
            )
        )

    @staticmethod
    def register(ctx: SearchContext, state: ApoState, child: Candidate) -> Candidate:
        """Record a new child; a text proposed before (even before a resume) is not new."""
        if child.id in state.seen:
            return ctx.candidates.setdefault(child.id, child)
        state.seen.append(child.id)
        return ctx.add_candidate(child)

    def sampling(self, rng: random.Random, max_tokens: int) -> Sampling:
        seed = rng.randrange(2**31) if self.settings.seed_lm_calls else None
        return Sampling(
            temperature=self.settings.diversity_temperature, max_tokens=max_tokens, seed=seed
        )
