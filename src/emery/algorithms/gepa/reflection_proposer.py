"""One component's proposal: reflective dataset → reflection call(s) → checked new text."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from emery.algorithms.approval import with_reviewer_notes
from emery.algorithms.base import SearchContext
from emery.algorithms.code_proposals import CodeProposals, ModuleReply, code_proposals
from emery.algorithms.gepa.checks import parse_proposal, proposal_problem
from emery.algorithms.gepa.compact import parse_compact
from emery.algorithms.gepa.events import GepaProposal, GepaProposalInvalid, GepaReflectiveDataset
from emery.algorithms.gepa.proposal import Proposal
from emery.algorithms.gepa.reflection import (
    Style,
    load_prompt,
    reflection_messages,
    retry_messages,
)
from emery.algorithms.gepa.reflective_dataset import (
    approx_tokens,
    build_records,
    render_compact,
    render_records,
)
from emery.algorithms.gepa.settings import GepaSettings
from emery.algorithms.proposal_checks import restore_placeholders
from emery.core.example_result import ExampleResult
from emery.core.models import ChatMessage, Example
from emery.lm.base import LM
from emery.verifiers.base import as_text


class ReflectionProposer:
    """Builds reflection prompts in the configured style and turns replies into texts."""

    def __init__(self, settings: GepaSettings) -> None:
        self.settings = settings
        self._templates: dict[Style, str] = {}

    def style(self, lm: LM) -> Style:
        """The configured style; ``auto`` is compact for local models (small ones, mostly)."""
        chosen = self.settings.reflection_style
        if chosen == "auto":
            return "compact" if lm.model.startswith("local/") else "standard"
        return chosen

    def temperature(self, style: Style, attempt: int) -> float | None:
        """Sampling temperature of an attempt (None: the role's own).

        Retries sample at ``retry_temperature`` so they differ from the unusable reply. In
        compact style the first attempt samples too: its prompts hide specifics, so many
        iterations show the same prompt, and a greedy model would repeat its proposal.
        """
        settings = self.settings
        if attempt == 1 and settings.reflection_temperature is not None:
            return settings.reflection_temperature
        if attempt == 1 and style == "standard":
            return None
        return settings.retry_temperature

    def template(self, style: Style) -> str:
        if style not in self._templates:
            self._templates[style] = load_prompt(self.settings.reflection_prompt, style)
        return self._templates[style]

    def render(
        self,
        style: Style,
        component: str,
        examples: Sequence[Example],
        results: Sequence[ExampleResult],
    ) -> tuple[str, list[str]]:
        """The reflective dataset as prompt text and the ids of the examples it shows."""
        settings = self.settings
        records = build_records(
            component,
            examples,
            results,
            excerpt_chars=settings.excerpt_chars,
            show_expected=settings.show_expected and style == "standard",
        )
        if style == "standard":
            text, shown = render_records(records, settings.reflection_token_budget)
            return text, [record.example_id for record in records[:shown]]
        mask = True if settings.mask_numbers is None else settings.mask_numbers
        text, shown = render_compact(records, settings.reflection_token_budget, mask=mask)
        return text, [record.example_id for record in records[:shown]]

    def parse(
        self, style: Style, reply: str, current: str, inputs: list[str]
    ) -> tuple[str | None, str | None]:
        """The proposed text and the reason it is unusable (None when usable)."""
        settings = self.settings
        joined = parse_compact(reply) if style == "compact" else None
        if joined is None:
            return parse_proposal(
                reply,
                current,
                example_inputs=inputs,
                reject_copies=settings.reject_example_copies,
                max_chars=settings.max_proposal_chars,
            )
        joined = restore_placeholders(joined, current)
        return joined, proposal_problem(
            joined,
            current,
            example_inputs=inputs,
            reject_copies=settings.reject_example_copies,
            max_chars=settings.max_proposal_chars,
        )

    async def propose(
        self,
        ctx: SearchContext,
        rng: random.Random,
        *,
        iteration: int,
        component: str,
        current: str,
        examples: Sequence[Example],
        results: Sequence[ExampleResult],
    ) -> Proposal:
        """Ask the reflection LM for a new text of ``component``; retry an unusable reply.

        Never raises for a bad reply: a proposal without text is a rejected proposal.
        """
        code = code_proposals(ctx, show_task=self.settings.show_task)
        if code is not None and code.system.is_code_component(component):
            return await self.propose_module(
                ctx,
                code,
                iteration=iteration,
                component=component,
                current=current,
                examples=examples,
                results=results,
            )
        lm = ctx.lm(self.settings.reflection_role)
        style = self.style(lm)
        messages = self.first_messages(ctx, iteration, style, component, current, examples, results)
        inputs = [as_text(value) for example in examples for value in example.input.values()]
        proposal = Proposal(component, text=None, prompt=messages[0]["content"], style=style)
        for attempt in range(1, self.settings.proposal_attempts + 1):
            reply = await self.ask(lm, messages, style, attempt, rng)
            text, problem = self.parse(style, reply, current, inputs)
            proposal.attempts.append({"reply": reply, "text": text, "problem": problem})
            if problem is None:
                proposal.text = text
                ctx.emit(
                    GepaProposal(
                        iteration=iteration, component=component, attempt=attempt, text=text
                    )
                )
                return proposal
            ctx.emit(
                GepaProposalInvalid(
                    iteration=iteration,
                    component=component,
                    attempt=attempt,
                    reason=problem,
                    reply=reply,
                )
            )
            messages = retry_messages(messages, reply, problem, current, style)
        return proposal

    async def propose_module(
        self,
        ctx: SearchContext,
        code: CodeProposals,
        *,
        iteration: int,
        component: str,
        current: str,
        examples: Sequence[Example],
        results: Sequence[ExampleResult],
    ) -> Proposal:
        """A whole new module for ``component``; a reply the system's check refuses (it does
        not compile, defines no ``run``) or that repeats the module is an invalid proposal
        (an event with the reason) and is asked again, told the reason."""
        messages = with_reviewer_notes(
            code.rewrite_messages(current, examples, results), ctx.reviewer_notes
        )
        proposal = Proposal(component, text=None, prompt=messages[0]["content"], style="standard")

        def report(attempt: int, module: ModuleReply) -> None:
            text, problem = module.text, module.problem
            proposal.attempts.append({"reply": module.reply, "text": text, "problem": problem})
            if text is not None:
                ctx.emit(
                    GepaProposal(
                        iteration=iteration, component=component, attempt=attempt, text=text
                    )
                )
                return
            ctx.emit(
                GepaProposalInvalid(
                    iteration=iteration,
                    component=component,
                    attempt=attempt,
                    reason=str(problem),
                    reply=module.reply,
                )
            )

        lm = ctx.lm(self.settings.reflection_role)
        attempts = self.settings.proposal_attempts
        module = await code.write(lm, messages, current, attempts=attempts, on_reply=report)
        proposal.text = module.text
        return proposal

    def first_messages(
        self,
        ctx: SearchContext,
        iteration: int,
        style: Style,
        component: str,
        current: str,
        examples: Sequence[Example],
        results: Sequence[ExampleResult],
    ) -> list[ChatMessage]:
        """The reflection chat for ``component``; reports the reflective dataset it shows."""
        shown, shown_ids = self.render(style, component, examples, results)
        task = ctx.dataset.description.strip() if self.settings.show_task else ""
        messages = with_reviewer_notes(
            reflection_messages(
                self.template(style),
                component=component,
                instruction=current,
                examples=shown,
                task=task,
            ),
            ctx.reviewer_notes,
        )
        prompt = messages[0]["content"]
        ctx.emit(
            GepaReflectiveDataset(
                iteration=iteration,
                component=component,
                style=style,
                size=len(shown_ids),
                example_ids=shown_ids,
                tokens=approx_tokens(prompt),
                prompt=prompt,
            )
        )
        return messages

    async def ask(
        self, lm: LM, messages: list[ChatMessage], style: Style, attempt: int, rng: random.Random
    ) -> str:
        """One reflection call: sampled (and seeded from ``rng``) as ``temperature`` says."""
        settings = self.settings
        temperature = self.temperature(style, attempt)
        params: dict[str, Any] = {}
        if temperature and settings.seed_lm_calls:
            params["seed"] = rng.randrange(2**31)
        completion = await lm.complete(
            messages,
            temperature=temperature,
            max_tokens=settings.reflection_max_tokens or (400 if style == "standard" else 200),
            **params,
        )
        return completion.text
