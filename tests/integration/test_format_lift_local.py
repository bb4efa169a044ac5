"""A seed that states the format but that the real local model does not follow is lifted.

SmolLM2-135M answers an intent-classification seed ("... End your reply with 'Intent:
<label>'.") with free text, so the seed scores 0 on val; MIPRO's search over demo sets
finds a program the model follows (labeled demos in the format). A true real-model test,
kept as cheap as it can be while it can still fail: no proposer, no bootstrapping, no
layouts, replies of up to 24 tokens (a label fits; 48 took 31 s against 20), two trials on
all 12 val messages and one chunk of 10 train pairs to confirm the winner, 56 metric calls
(measured: the seed 0/12, the format-hint instruction without demos 0/12, the labeled demos
4/12, confirmed on train).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from emery.algorithms.context import build_search_context
from emery.algorithms.mipro import Mipro, MiproSettings, MiproState
from emery.algorithms.search_loop import run_search
from emery.data.tasks import builtin_task
from emery.evaluation.budget import BudgetConfig
from emery.lm.cache import ResponseCache
from emery.lm.config import LMConfig, build_lm
from emery.lm.usage import UsageMeter
from emery.systems.parsers import ParserConfig
from emery.systems.prompt_program import (
    MessageTemplate,
    PromptProgram,
    PromptProgramConfig,
    StageConfig,
)
from emery.verifiers.config import build_verifier

pytestmark = pytest.mark.integration


@pytest.mark.timeout(900)
async def test_mipro_lifts_a_seed_whose_format_the_model_ignores(tmp_path: Path) -> None:
    task = builtin_task("intent")
    data = task.dataset(seed=3, n_train=10, n_val=12, n_test=0)
    labels = ", ".join(sorted({str(e.expected) for e in data}))
    program = PromptProgram(
        PromptProgramConfig(
            stages=[
                StageConfig(
                    name="classify",
                    instruction=(
                        f"Classify the intent of the customer's message as one of: {labels}."
                        " End your reply with 'Intent: <label>'."
                    ),
                    messages=[MessageTemplate(template="{message}")],
                    parser=ParserConfig(kind="regex", pattern=r"Intent:\s*([a-z_]+)"),
                )
            ]
        )
    )
    meter = UsageMeter()
    cache = ResponseCache(tmp_path / "lm_cache.db")
    config = LMConfig(model="local/smollm2-135m", max_tokens=24, n_ctx=2048)
    try:
        lms = {
            role: build_lm(config, role=role, meter=meter, cache=cache)
            for role in ("task", "proposer")
        }
        ctx = build_search_context(
            system=program,
            dataset=data,
            verifier=build_verifier(task.verifier),
            lms=lms,
            meter=meter,
            # the seed and 2 trials on 12 val examples (36 calls), and a chunk of train
            # pairs: val alone shows a winner only at 0.95 (mipro.winner)
            budget=BudgetConfig(metric_calls=60),
            concurrency=2,
        )
        settings = MiproSettings(
            num_instructions=1,
            num_demo_sets=2,
            num_trials=2,
            minibatch_size=12,
            full_eval_every=1,
            max_bootstrapped_demos=0,
            max_labeled_demos=4,
            bootstrap_examples=0,
            summary_batches=0,
            use_dataset_summary=False,
            proposal_attempts=0,
            search_layouts=False,
        )
        outcome = await run_search(Mipro(settings), ctx)
    finally:
        cache.close()

    state = outcome.state
    assert isinstance(state, MiproState)
    assert state.baseline_val_score == 0.0
    assert state.reasoning_stages == []  # it rambles without reaching the label
    assert state.best_val_score is not None
    assert state.best_val_score > 0.0
    assert ctx.budget.usage.metric_calls <= 60
