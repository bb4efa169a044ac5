"""One expansion of the beam: critique a parent's component, edit it, keep a usable child."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from emery.algorithms.apo.critique import Sampling, critique_prompt
from emery.algorithms.apo.edit import edit_prompt
from emery.algorithms.apo.experiments import as_text, build_experiments
from emery.algorithms.apo.prompts import PromptTemplate
from emery.algorithms.apo.settings import ApoSettings
from emery.algorithms.apo.state import ApoState
from emery.algorithms.base import SearchContext
from emery.core.models import Candidate, Example, Lineage
from emery.evaluation.results import EvalResult

OPERATION = "apo_edit"


@dataclass(frozen=True)
class Proposer:
    """Turns a parent and its train-batch results into a child (or a recorded rejection).

    The critique and edit prompt variants are drawn at random from the search RNG; so is
    the seed sent with each sampled call, which makes reruns and resumes reproducible.
    """

    settings: ApoSettings
    critique_prompts: Sequence[PromptTemplate]
    edit_prompts: Sequence[PromptTemplate]

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
        """Critique the parent's ``component`` from the batch, edit it, keep a usable child."""
        settings = self.settings
        prompt = parent.components[component]
        task = ctx.dataset.description
        experiments = build_experiments(
            examples,
            result.results,
            component=component,
            prompt=prompt,
            max_chars=settings.max_message_chars,
        )
        critique_template = rng.choice(self.critique_prompts)
        edit_template = rng.choice(self.edit_prompts)
        where: dict[str, Any] = {
            "round": state.round,
            "expansion": state.expansions_done,
            "parent_id": parent.id,
            "branch": branch,
            "component": component,
        }
        critique = await critique_prompt(
            ctx.lm(settings.gradient_role),
            critique_template,
            prompt=prompt,
            component=component,
            task=task,
            experiments=experiments,
            sampling=self.sampling(rng, settings.critique_max_tokens),
        )
        state.critiques += 1
        ctx.emit(
            "apo.critique",
            **where,
            variant=critique.variant,
            train_examples=[e.id for e in examples],
            batch_score=result.mean,
            critique=critique.text,
        )
        if not critique.text:
            state.edits_rejected += 1
            ctx.emit(
                "apo.edit",
                **where,
                variant=None,
                reply="",
                proposal=None,
                accepted=False,
                reason="the critique was empty",
                child_id=None,
            )
            return
        edit = await edit_prompt(
            ctx.lm(settings.edit_role),
            edit_template,
            prompt=prompt,
            component=component,
            task=task,
            critique=critique.text,
            experiments=experiments,
            examples=[as_text(e.input) for e in examples],
            sampling=self.sampling(rng, settings.edit_max_tokens),
        )
        problem, child_id = edit.problem, None
        if edit.accepted and edit.proposal is not None:
            child = parent.derive(
                components={component: edit.proposal},
                lineage=Lineage(
                    parents=(parent.id,),
                    generation=parent.lineage.generation + 1,
                    operation=OPERATION,
                    iteration=state.round,
                    details={
                        "component": component,
                        "critique_variant": critique.variant,
                        "edit_variant": edit.variant,
                    },
                ),
            )
            if child.id in state.beam or child.id in state.children:
                problem = f"same text as candidate {child.id} of this round"
            else:
                child = self.register(ctx, state, child)
                state.children.append(child.id)
                state.pool[child.id] = child
                child_id = child.id
        if problem is None:
            state.edits_accepted += 1
        else:
            state.edits_rejected += 1
        ctx.emit(
            "apo.edit",
            **where,
            variant=edit.variant,
            reply=edit.reply,
            proposal=edit.proposal,
            accepted=problem is None,
            reason=problem,
            child_id=child_id,
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
