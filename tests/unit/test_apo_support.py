"""Shared builders for the APO unit tests (no tests here).

The task model's behaviour depends only on the system prompt it is given, so a prompt's
quality is known exactly: a prompt that names the "Answer:" line is always right, one that
says "number" is right on even answers only, one containing "CRASH" raises, anything else
replies without the answer line (a parse failure, score 0).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import emery.algorithms.apo as apo_package
from emery.algorithms import SearchContext, StepRecord, run_search
from emery.algorithms.apo import Apo, ApoSettings
from emery.algorithms.context import build_search_context
from emery.core.example_result import ExampleResult
from emery.core.models import ChatMessage, Dataset, Example
from emery.evaluation.budget import BudgetConfig, BudgetUsage
from emery.evaluation.service import EvalKey, eval_key
from emery.lm import FakeLM
from emery.systems.parsers import ParserConfig
from emery.systems.prompt_program import (
    MessageTemplate,
    PromptProgram,
    PromptProgramConfig,
    StageConfig,
)
from emery.verifiers.numeric import NumericMatch

SHIPPED = Path(apo_package.__file__).parent / "prompts"
REWRITE = SHIPPED / "edit_rewrite.md"
CONSERVATIVE = SHIPPED / "edit_conservative.md"
ANSWER_PATTERN = r"Answer:\s*(-?\d+)"
GOOD = "Work it out, then end with the line Answer: <number>."
HALF = "Reply with the number."
CRITIQUE = '- no answer line: "End with the line Answer: <number>."'


def dataset(n_train: int = 8, n_val: int = 6) -> Dataset:
    def example(split: str, i: int) -> Example:
        n = 10 + i if split == "train" else 40 + i
        return Example(id=f"{split}-{i}", input={"question": f"Compute {n}."}, expected=n)

    return Dataset(
        name="numbers",
        description="Read the number. The reply must end with 'Answer: <number>'.",
        train=[example("train", i) for i in range(n_train)],
        val=[example("val", i) for i in range(n_val)],
    )


def task_reply(messages: Sequence[ChatMessage]) -> str:
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    found = re.search(r"\d+", messages[-1]["content"])
    assert found is not None
    n = int(found.group())
    if "CRASH" in system:
        raise RuntimeError("the task model crashed")
    if "Answer:" in system:
        return f"Let me see.\nAnswer: {n}"
    if "number" in system:
        return f"Answer: {n if n % 2 == 0 else n + 1}"
    return f"It is {n}."


def program(instruction: str = "Reply.", stages: int = 1) -> PromptProgram:
    names = ["solve", "check"][:stages]
    return PromptProgram(
        PromptProgramConfig(
            name="numbers",
            stages=[
                StageConfig(
                    name=name,
                    instruction=instruction,
                    messages=[MessageTemplate(template="{question}")],
                    parser=ParserConfig(kind="regex", pattern=ANSWER_PATTERN),
                    output=f"{name}_out",
                )
                for name in names
            ],
        )
    )


def is_critique_request(messages: Sequence[ChatMessage]) -> bool:
    return "what the checker said" in messages[-1]["content"]


def reflection_lm(
    edits: Callable[[str], str] | Sequence[str],
    critique: str = CRITIQUE,
) -> FakeLM:
    """Critiques with ``critique``; edits with ``edits`` (a function of the request, or a list
    replayed in order, the last repeated)."""
    replayed: list[int] = [0]

    def reply(messages: Sequence[ChatMessage]) -> str:
        content = messages[-1]["content"]
        if is_critique_request(messages):
            return critique
        if callable(edits):
            return edits(content)
        index = min(replayed[0], len(edits) - 1)
        replayed[0] += 1
        return edits[index]

    return FakeLM(reply, model="fake/reflection")


def fenced(text: str) -> str:
    return f"Here is the new prompt:\n```\n{text}\n```"


def context(
    reflection: FakeLM,
    *,
    system: PromptProgram | None = None,
    data: Dataset | None = None,
    budget: BudgetConfig | None = None,
    known: dict[EvalKey, ExampleResult] | None = None,
    budget_usage: BudgetUsage | None = None,
    task: Any = None,
    seed: int = 0,
    concurrency: int = 8,
) -> SearchContext:
    return build_search_context(
        system=system or program(),
        dataset=data or dataset(),
        verifier=NumericMatch(),
        lms={"task": task or FakeLM(task_reply, model="fake/task"), "reflection": reflection},
        budget=budget,
        seed=seed,
        known=known,
        budget_usage=budget_usage,
        concurrency=concurrency,
    )


def settings(**overrides: Any) -> ApoSettings:
    """Small search settings; edits are full rewrites unless ``edit_prompts`` says otherwise.

    Only the LM proposes (no LM-free operator children) unless ``operator_children`` says
    otherwise: these tests count and compare the LM's edits (test_apo_operators has both)."""
    base: dict[str, Any] = {
        "edit_prompts": [REWRITE],
        "operator_children": 0,
        "beam_width": 2,
        "branch_factor": 2,
        "rounds": 2,
        "gradient_batch_size": 3,
        "val_batch_size": 16,
    }
    return ApoSettings.model_validate({**base, **overrides})


async def run(ctx: SearchContext, apo: Apo, **kwargs: Any) -> tuple[Any, list[StepRecord]]:
    records: list[StepRecord] = []

    async def keep(record: StepRecord) -> None:
        records.append(record)

    outcome = await run_search(apo, ctx, on_step=keep, **kwargs)
    return outcome, records


def stored_results(records: Sequence[StepRecord]) -> dict[EvalKey, ExampleResult]:
    return {
        eval_key(r.candidate_id, r.example_id, r.split): r
        for record in records
        for r in record.results
    }
