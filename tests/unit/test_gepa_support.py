"""Scripted models and systems for the GEPA tests (no tests here).

The task model solves the built-in word problems only as well as its instruction tells it
to: it writes the required final line only when the instruction mentions ``Answer:``, and
it gets a kind of problem right only when the instruction names the operation that kind
needs. The reflection model reads the reflection prompt like a careful editor: it finds
the current instruction and the feedback, and adds the single rule the first failure asks
for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from emery.algorithms import StepRecord, build_algorithm, run_search
from emery.algorithms.base import AlgorithmState, SearchContext
from emery.algorithms.context import build_search_context
from emery.core.models import Candidate, ChatMessage, Dataset, Example
from emery.data.tasks import builtin_task
from emery.evaluation.budget import BudgetConfig
from emery.lm import FakeLM
from emery.lm.base import LM
from emery.lm.usage import MeteredLM, UsageMeter
from emery.systems.base import ComponentCall, RunContext, SystemRun
from emery.systems.prompt_program import PromptProgram
from emery.verifiers.base import SyncVerifier, Verdict
from emery.verifiers.config import VerifierConfig, build_verifier

FORMAT_RULE = "End with a final line 'Answer: <number>'."
RULES = {
    "subtract": "When something is given away, spent or shared out, subtract it.",
    "multiply": "When there are several groups of the same size, multiply.",
    "divide": "When things are shared equally, divide.",
}


def needed_operations(question: str) -> set[str]:
    """The operations the scripted task model must be told about to solve ``question``
    (it adds without being told)."""
    q = question.lower()
    needs = set()
    if "equally" in q:
        needs.add("divide")
    if " each" in q or "per hour" in q:
        needs.add("multiply")
    if "gave away" in q or "gives" in q or "spends" in q:
        needs.add("subtract")
    return needs


def word_problems(n_train: int = 30, n_val: int = 10, n_test: int = 20) -> Dataset:
    return builtin_task("word_problems").dataset(
        seed=0, n_train=n_train, n_val=n_val, n_test=n_test
    )


def task_lm(dataset: Dataset) -> FakeLM:
    """The scripted task model for ``dataset``'s questions."""
    gold = {e.input["question"]: int(e.expected) for e in dataset}

    def reply(messages: Sequence[ChatMessage]) -> str:
        instruction = next((m["content"] for m in messages if m["role"] == "system"), "")
        turn = messages[-1]["content"]  # the question, with a reminder when a layout adds one
        question = turn if turn in gold else next(q for q in gold if q in turn)
        told = {op for op in RULES if op in instruction.lower()}
        answer = gold[question] if needed_operations(question) <= told else gold[question] + 1
        if "Answer:" in instruction:
            return f"Working it out.\nAnswer: {answer}"
        return f"I think it is {answer}."

    return FakeLM(reply, model="fake/task")


_FENCED = re.compile(r"```[a-z]*\n?(.*?)```", re.DOTALL)


def reflect_reply(messages: Sequence[ChatMessage]) -> str:
    """A new instruction: the current one plus the rule its first failure asks for."""
    prompt = messages[0]["content"]
    current = _FENCED.findall(prompt)[0].strip()
    blocks = re.split(r"### Example \d+\n", prompt)[1:]
    for block in blocks:
        if "Correct:" in block:
            continue
        if "must match the pattern" in block and "Answer:" not in current:
            return f"```\n{current} {FORMAT_RULE}\n```"
        question = block.split("Input: ", 1)[1].split("\n", 1)[0]
        missing = sorted(needed_operations(question) - {op for op in RULES if op in current})
        if missing:
            return f"```\n{current} {RULES[missing[0]]}\n```"
    return f"```\n{current} Check the arithmetic twice.\n```"


def reflection_lm(*, broken_every: int = 0) -> FakeLM:
    """The scripted reflection model; every ``broken_every``-th call answers an example."""
    calls = {"n": 0}

    def reply(messages: Sequence[ChatMessage]) -> str:
        calls["n"] += 1
        if broken_every and calls["n"] % broken_every == 0:
            return "Answer: Jamal has 46 coins left."
        return reflect_reply(messages)

    return FakeLM(reply, model="fake/reflection")


def word_problem_context(
    dataset: Dataset,
    *,
    budget: BudgetConfig | None = None,
    reflection: LM | None = None,
    meter: UsageMeter | None = None,
    seed: int = 0,
    known: dict[Any, Any] | None = None,
    budget_usage: Any = None,
    task: LM | None = None,
) -> SearchContext:
    """A search context over the built-in word-problems program with the scripted models."""
    task_model: LM = task or task_lm(dataset)
    reflection_model: LM = reflection or reflection_lm()
    lms: dict[str, LM] = {"task": task_model, "reflection": reflection_model}
    if meter is not None:
        lms = {role: MeteredLM(lm, meter, role) for role, lm in lms.items()}
    return build_search_context(
        system=PromptProgram(builtin_task("word_problems").program),
        dataset=dataset,
        verifier=build_verifier(VerifierConfig(kind="numeric")),
        lms=lms,
        budget=budget,
        meter=meter,
        seed=seed,
        known=known,
        budget_usage=budget_usage,
        concurrency=4,
    )


async def run_gepa(
    ctx: SearchContext,
    settings: dict[str, Any] | None = None,
    *,
    state: AlgorithmState | None = None,
    should_stop: Callable[[], str | None] | None = None,
    records: list[StepRecord] | None = None,
) -> tuple[Any, list[StepRecord]]:
    """Run GEPA to the end and return the outcome and every committed step."""
    kept = records if records is not None else []

    async def on_step(record: StepRecord) -> None:
        kept.append(record)

    algorithm = build_algorithm("gepa", settings or {})
    outcome = await run_search(
        algorithm, ctx, state=state, on_step=on_step, should_stop=should_stop
    )
    return outcome, kept


def events(records: Sequence[StepRecord], kind: str | None = None) -> list[Any]:
    return [e for r in records for e in r.events if kind is None or e.kind == kind]


class KeywordSystem:
    """Two components, ``a`` and ``b``. An example lists the word each component's text must
    contain (``needs``) and may forbid one (``avoid``); the single LM call per component
    replies "ok" or "bad", and the output is every component's reply."""

    name = "keywords"

    def __init__(self, a: str = "Rule A.", b: str = "Rule B.") -> None:
        self.texts = {"a": a, "b": b}

    def seed_candidate(self) -> Candidate:
        return Candidate(components=dict(self.texts))

    def version(self) -> str:
        return "keywords-1"

    def check_inputs(self, fields: set[str]) -> None:
        return None

    async def run(self, candidate: Candidate, ctx: RunContext) -> SystemRun:
        calls = []
        for name in ("a", "b"):
            messages: list[ChatMessage] = [
                {"role": "system", "content": candidate.components[name]},
                {"role": "user", "content": f"{name}|{ctx.example.id}"},
            ]
            completion = await ctx.lm.complete(messages)
            calls.append(
                ComponentCall(
                    component=name,
                    inputs={"case": ctx.example.id},
                    messages=messages,
                    reply=completion.text,
                    output=completion.text,
                )
            )
        return SystemRun(output={c.component: c.output for c in calls}, calls=calls)


def keyword_lm(examples: Sequence[Example]) -> FakeLM:
    """Replies "ok" when a component's text meets the example's demands on that component."""
    by_id = {e.id: e for e in examples}

    def reply(messages: Sequence[ChatMessage]) -> str:
        text = messages[0]["content"].lower()
        name, example_id = messages[-1]["content"].split("|")
        example = by_id[example_id]
        need = example.input.get("needs", {}).get(name)
        avoid = example.input.get("avoid", {}).get(name)
        if need and need not in text:
            return "bad"
        if avoid and avoid in text:
            return "bad"
        return "ok"

    return FakeLM(reply, model="fake/keywords")


class KeywordVerifier(SyncVerifier):
    """1 when every component replied "ok"; the feedback names the words that were missing."""

    def check(self, example: Example, output: Any) -> Verdict:
        bad = [name for name, reply in sorted(output.items()) if reply != "ok"]
        if not bad:
            return Verdict(score=1.0, feedback="Correct: every rule was followed.")
        wants = [
            f"component {n} must mention {example.input.get('needs', {}).get(n)!r}"
            if example.input.get("needs", {}).get(n)
            else f"component {n} must not mention {example.input.get('avoid', {}).get(n)!r}"
            for n in bad
        ]
        return Verdict(score=0.0, feedback="; ".join(wants))


def keyword_reflection_lm() -> FakeLM:
    """Adds the word the first failure of the reflected component asks for."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        prompt = messages[0]["content"]
        current = _FENCED.findall(prompt)[0].strip()
        name = "a" if current.startswith("Rule A") else "b"
        for word in re.findall(rf"component {name} must mention '(\w+)'", prompt):
            if word not in current.lower():
                return f"```\n{current} Say {word}.\n```"
        return f"```\n{current} Be careful.\n```"

    return FakeLM(reply, model="fake/keyword-reflection")


def keyword_example(example_id: str, avoid: dict[str, str] | None = None, **needs: str) -> Example:
    return Example(id=example_id, input={"needs": needs, "avoid": avoid or {}})


def keyword_context(
    dataset: Dataset, *, budget: BudgetConfig | None = None, seed: int = 0
) -> SearchContext:
    examples = list(dataset)
    return build_search_context(
        system=KeywordSystem(),
        dataset=dataset,
        verifier=KeywordVerifier(),
        lms={"task": keyword_lm(examples), "reflection": keyword_reflection_lm()},
        budget=budget,
        seed=seed,
        concurrency=2,
    )
