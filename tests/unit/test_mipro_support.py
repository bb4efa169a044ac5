"""Scripted models and contexts shared by the MIPRO unit tests (no tests here)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from emery.algorithms.base import SearchContext
from emery.algorithms.context import build_search_context
from emery.algorithms.mipro import Mipro, MiproSettings
from emery.algorithms.search_loop import SearchOutcome, StepRecord, run_search
from emery.core.models import ChatMessage, Dataset
from emery.data.tasks import builtin_task
from emery.evaluation.budget import BudgetConfig, BudgetUsage
from emery.evaluation.service import eval_key
from emery.lm import FakeLM
from emery.lm.usage import UsageMeter
from emery.systems.parsers import ParserConfig
from emery.systems.prompt_program import (
    MessageTemplate,
    PromptProgram,
    PromptProgramConfig,
    StageConfig,
)
from emery.verifiers.config import build_verifier

TASK = builtin_task("word_problems")
SUMMARY = "Arithmetic word problems about everyday objects; each answer is a whole number."


def dataset(n_train: int = 20, n_val: int = 30) -> Dataset:
    return TASK.dataset(seed=7, n_train=n_train, n_val=n_val, n_test=5)


def gold_table(data: Dataset) -> dict[str, int]:
    return {example.input["question"]: int(example.expected) for example in data}


def system_text(messages: Sequence[ChatMessage]) -> str:
    return next((m["content"] for m in messages if m["role"] == "system"), "")


def has_demos(messages: Sequence[ChatMessage]) -> bool:
    return any(m["role"] == "assistant" for m in messages)


def format_and_demos_lm(data: Dataset) -> FakeLM:
    """Right only with 'Answer:' in the instruction and demos in the prompt; with the format
    alone it is right on even answers; with neither its reply does not parse."""
    gold = gold_table(data)

    def reply(messages: Sequence[ChatMessage]) -> str:
        answer = gold[messages[-1]["content"]]
        if "Answer:" in system_text(messages) and has_demos(messages):
            return f"Work it out.\nAnswer: {answer}"
        if "Answer:" in system_text(messages):
            return f"Answer: {answer if answer % 2 == 0 else answer + 1}"
        return f"The answer is {answer}."

    return FakeLM(reply, model="fake/format-and-demos")


def step_by_step_lm(data: Dataset) -> FakeLM:
    """Right only when the instruction says 'step by step' and 'Answer:' and demos are shown
    (wherever the layout puts the instruction: system message or the last user turn)."""
    gold = gold_table(data)

    def reply(messages: Sequence[ChatMessage]) -> str:
        content = messages[-1]["content"]
        answer = gold[next(q for q in gold if q in content)]
        instruction = f"{system_text(messages)}\n{content}"
        if "Answer:" not in instruction:
            return f"The answer is {answer}."
        if "step by step" in instruction.lower() and has_demos(messages):
            return f"Step 1: read.\nStep 2: compute.\nAnswer: {answer}"
        return f"Answer: {answer + 3}"

    return FakeLM(reply, model="fake/step-by-step")


PROPOSALS = {
    "none": "Read the question and reply with care.",
    "concise": "Give the result briefly and clearly, no extra words.",
    "creative": "Imagine you are explaining the puzzle to a curious child.",
    "persona": "You are a patient math teacher helping a student with homework.",
    "high_stakes": "A scholarship depends on this result, so double-check every number.",
    "describe": (
        "Solve the word problem step by step, then end with a final line 'Answer: <number>'."
    ),
}


def tip_of(prompt: str) -> str:
    from emery.algorithms.mipro.proposer import TIPS

    found = re.search(r"^Tip: (.*)$", prompt, re.MULTILINE)
    if found is None:
        return "none"
    return next(name for name, text in TIPS.items() if text and text == found.group(1))


def proposer_lm(proposals: dict[str, str] | None = None) -> FakeLM:
    """Writes observations, the summary, then one instruction per tip."""
    table = proposals or PROPOSALS

    def reply(messages: Sequence[ChatMessage]) -> str:
        prompt = messages[-1]["content"]
        if "List up to four" in prompt:
            return "- everyday arithmetic\n- whole-number answers"
        if "Summarize them" in prompt:
            return SUMMARY
        return table[tip_of(prompt)]  # a proposal request

    return FakeLM(reply, model="fake/proposer")


def make_ctx(
    data: Dataset,
    task_lm: FakeLM,
    proposer: FakeLM,
    *,
    seed: int = 0,
    budget: BudgetConfig | None = None,
    **kwargs: Any,
) -> SearchContext:
    return build_search_context(
        system=PromptProgram(TASK.program),
        dataset=data,
        verifier=build_verifier(TASK.verifier),
        lms={"task": task_lm, "proposer": proposer},
        budget=budget,
        seed=seed,
        **kwargs,
    )


async def run_recorded(
    settings: MiproSettings,
    ctx: SearchContext,
    *,
    stop_after: int | None = None,
    state: Any = None,
) -> tuple[SearchOutcome, list[StepRecord]]:
    """Run MIPRO, keeping every StepRecord; stop after ``stop_after`` committed records."""
    records: list[StepRecord] = []

    async def keep(record: StepRecord) -> None:
        records.append(record)

    def should_stop() -> str | None:
        return "killed" if stop_after is not None and len(records) >= stop_after else None

    outcome = await run_search(
        Mipro(settings), ctx, state=state, on_step=keep, should_stop=should_stop
    )
    return outcome, records


def resumed_ctx(
    data: Dataset,
    task_lm: FakeLM,
    proposer: FakeLM,
    records: Sequence[StepRecord],
    *,
    seed: int = 0,
    budget: BudgetConfig | None = None,
) -> SearchContext:
    """A fresh context as the engine builds it on resume: stored results, spending, candidates."""
    last = records[-1]
    known = {
        eval_key(result.candidate_id, result.example_id, result.split): result
        for record in records
        for result in record.results
    }
    ctx = make_ctx(
        data,
        task_lm,
        proposer,
        seed=seed,
        budget=budget,
        known=known,
        budget_usage=BudgetUsage.model_validate(last.budget.model_dump()),
        meter=UsageMeter(initial=dict(last.usage)),
    )
    for record in records:
        for candidate in record.candidates:
            ctx.candidates[candidate.id] = candidate
    return ctx


def event_kinds(records: Sequence[StepRecord]) -> list[str]:
    return [e.kind for record in records for e in record.events]


def events_of(records: Sequence[StepRecord], kind: str) -> list[dict[str, Any]]:
    return [e.data for record in records for e in record.events if e.kind == kind]


TWO_STAGES = PromptProgramConfig(
    name="two",
    stages=[
        StageConfig(
            name="plan",
            instruction="Say how to solve it.",
            messages=[MessageTemplate(template="{question}")],
        ),
        StageConfig(
            name="solve",
            instruction="Solve it.",
            messages=[MessageTemplate(template="Question: {question}\nPlan: {plan}")],
            parser=ParserConfig(kind="regex", pattern=r"Answer:\s*(-?\d+)"),
        ),
    ],
)


def two_stage_lm(gold: dict[str, int]) -> FakeLM:
    def reply(messages: Sequence[ChatMessage]) -> str:
        last = messages[-1]["content"]
        if not last.startswith("Question: "):
            return "Add or multiply the numbers."
        question = last.removeprefix("Question: ").split("\nPlan:")[0]
        if "Answer:" in system_text(messages):
            return f"Following the plan.\nAnswer: {gold[question]}"
        return "Done."

    return FakeLM(reply, model="fake/two-stage")
