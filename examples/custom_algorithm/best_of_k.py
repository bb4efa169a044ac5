"""Best-of-k rewriting with random restarts: a small search written outside emery.

Each round picks a parent (the best candidate so far, or, by chance, the seed again: a
random restart out of a local optimum), scores it on a train minibatch, asks the proposer
model for ``k`` rewrites of one of its texts (each shown the examples the parent missed),
screens the ``k`` children on the same minibatch and scores the best of them on val. A
child better on val than the best so far becomes the best.

Name it in a job config as ``[job] algorithm = "best_of_k:SPEC"`` (with this folder on
``PYTHONPATH``), or install it with an ``emery.algorithms`` entry point. Its settings are
``[algorithm.best_of_k]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import Field

from emery.plugin import (
    AlgorithmSettings,
    AlgorithmSpec,
    AlgorithmState,
    BaselineEvaluated,
    BestUpdated,
    Candidate,
    EvalResult,
    Example,
    Lineage,
    SearchContext,
    load_rng,
    save_rng,
    text_components,
)

REWRITE = """You improve one instruction of a program.

Current instruction:
{text}

Examples it got wrong (input, expected answer, feedback):
{misses}

Write one improved instruction (variant {variant} of {k}: try a different idea from the
others). Reply with the instruction only."""


class BestOfKSettings(AlgorithmSettings):
    """``[algorithm.best_of_k]``: rounds, rewrites per round, minibatch size, restart chance."""

    rounds: int = Field(default=4, ge=1)
    k: int = Field(default=3, ge=1)
    minibatch: int = Field(default=4, ge=1)
    restart: float = Field(default=0.25, ge=0.0, le=1.0)
    """The chance that a round rewrites the seed instead of the best candidate so far."""


class BestOfKState(AlgorithmState):
    """Everything the search needs to resume: val scores by candidate (and the base's RNG)."""

    val_scores: dict[str, float] = Field(default_factory=dict)


class BestOfK:
    """The algorithm: ``start`` scores the seed on val, each ``step`` is one round."""

    name: ClassVar[str] = "best_of_k"
    state_type = BestOfKState

    def __init__(self, settings: BestOfKSettings) -> None:
        self.settings = settings

    async def start(self, ctx: SearchContext) -> BestOfKState:
        seed = ctx.add_candidate(ctx.seed_candidate)
        scored = await ctx.evaluate(seed, ctx.val, "val")
        ctx.emit(
            BaselineEvaluated(
                candidate_id=seed.id, split="val", score=scored.mean, n=len(scored.results)
            )
        )
        state = BestOfKState(seed_candidate_id=seed.id, baseline_val_score=scored.mean)
        self._consider(ctx, state, seed, scored.mean)
        return state

    async def step(self, ctx: SearchContext, state: BestOfKState) -> BestOfKState:
        rng = load_rng(state.rng_state, ctx.seed)
        restart = rng.random() < self.settings.restart
        parent = ctx.candidates[state.seed_candidate_id if restart else state.best_candidate_id]
        component = rng.choice(text_components(ctx))
        batch = rng.sample(ctx.train, min(self.settings.minibatch, len(ctx.train)))
        before = await ctx.evaluate(parent, batch, "train")
        children: list[Candidate] = []
        for variant in range(1, self.settings.k + 1):
            prompt = REWRITE.format(
                text=parent.components[component],
                misses=_misses(before, batch),
                variant=variant,
                k=self.settings.k,
            )
            reply = await ctx.lm("proposer").complete([{"role": "user", "content": prompt}])
            text = reply.text.strip()
            if text and text != parent.components[component]:
                lineage = Lineage(
                    parents=(parent.id,),
                    generation=parent.lineage.generation + 1,
                    operation="best_of_k",
                    iteration=state.iteration,
                    details={"restart": restart, "variant": variant},
                )
                children.append(
                    ctx.add_candidate(parent.derive(components={component: text}, lineage=lineage))
                )
        screened = [(await ctx.evaluate(child, batch, "train")).mean for child in children]
        if children and max(screened) >= before.mean:
            best_child = children[screened.index(max(screened))]
            if best_child.id not in state.val_scores:
                scored = await ctx.evaluate(best_child, ctx.val, "val")
                self._consider(ctx, state, best_child, scored.mean)
        state.iteration += 1
        state.rng_state = save_rng(rng)
        if state.iteration >= self.settings.rounds:
            state.done, state.done_reason = True, f"{self.settings.rounds} rounds done"
        return state

    @staticmethod
    def _consider(
        ctx: SearchContext, state: BestOfKState, candidate: Candidate, score: float
    ) -> None:
        """Record ``candidate``'s val score; it becomes the best when it beats the best."""
        state.val_scores[candidate.id] = score
        previous = state.best_val_score
        if previous is None or score > previous:
            state.best_candidate_id, state.best_val_score = candidate.id, score
            ctx.emit(BestUpdated(candidate_id=candidate.id, score=score, previous_score=previous))


def _misses(scored: EvalResult, batch: Sequence[Example]) -> str:
    """Up to three examples of ``batch`` the parent scored below 1, one line each."""
    by_id = {example.id: example for example in batch}
    lines = [
        f"- {by_id[r.example_id].input} -> {by_id[r.example_id].expected!r}: {r.feedback}"
        for r in scored.results
        if r.score < 1.0 and r.example_id in by_id
    ]
    return "\n".join(lines[:3]) or "(none: it got the whole minibatch right)"


SPEC = AlgorithmSpec(name="best_of_k", settings=BestOfKSettings, factory=BestOfK)
