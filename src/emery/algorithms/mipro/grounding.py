"""What the proposer is told about the task: a dataset summary and a program description.

The dataset summary is written by the proposer LM itself: it reads a few batches of train
examples, notes observations batch by batch, then condenses them. A reply that is empty
or too short falls back to the observations, then to a plain description of the fields,
so a weak proposer never leaves the grounding blank.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from emery.core.hashing import call_seed
from emery.core.models import Candidate, ChatMessage, Dataset, Example
from emery.lm.base import LM
from emery.systems.capabilities import StagedPrompts
from emery.systems.formats import format_description, gold_text
from emery.systems.templates import placeholders
from emery.verifiers.base import as_text, clip

SUMMARY_SYSTEM = (
    "You study datasets for a team that writes instructions for language models. "
    "Be factual and brief."
)
MIN_SUMMARY_CHARS = 20


def render_example(example: Example, *, limit: int = 300) -> str:
    """One example on a few lines: its input fields and, when known, its gold output."""
    lines = [f"{name}: {clip(as_text(value), limit)}" for name, value in example.input.items()]
    if example.expected is not None:
        lines.append(f"correct output: {clip(gold_text(example.expected), limit)}")
    return "\n".join(lines)


def observation_messages(
    batch: Sequence[Example], prior: Sequence[str], description: str
) -> list[ChatMessage]:
    examples = "\n\n".join(
        f"Example {i}:\n{render_example(example)}" for i, example in enumerate(batch, 1)
    )
    parts = [f"Here are {len(batch)} examples from the training data of a language-model task."]
    if description:
        parts.append(f"The data comes with this description: {description}")
    parts.append(examples)
    if prior:
        parts.append("Observations so far:\n" + "\n".join(prior))
    parts.append(
        "List up to four short new observations about this data: what kind of task it is, "
        "what the inputs look like and what a correct output looks like. "
        "Reply with the observations only, one per line."
    )
    return [
        {"role": "system", "content": SUMMARY_SYSTEM},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def summary_messages(observations: Sequence[str]) -> list[ChatMessage]:
    return [
        {"role": "system", "content": SUMMARY_SYSTEM},
        {
            "role": "user",
            "content": "Observations about a dataset:\n"
            + "\n".join(observations)
            + "\n\nSummarize them in at most three sentences: the task, the inputs and the "
            "expected outputs. Reply with the summary only.",
        },
    ]


def fallback_summary(dataset: Dataset) -> str:
    """A summary without a model: the data's own description and its fields."""
    fields = sorted({name for example in dataset.train for name in example.input})
    text = f"{len(dataset.train)} training examples with the input fields {', '.join(fields)}."
    return f"{dataset.description} {text}".strip() if dataset.description else text


async def summarize_dataset(
    proposer: LM,
    dataset: Dataset,
    rng: random.Random,
    *,
    batches: int,
    batch_size: int,
    max_tokens: int,
    temperature: float | None,
    seed_calls: bool = False,
) -> tuple[str, list[str]]:
    """(summary, observations) written by ``proposer`` from shuffled train batches."""
    examples = list(dataset.train)
    rng.shuffle(examples)
    observations: list[str] = []
    for index in range(batches):
        batch = examples[index * batch_size : (index + 1) * batch_size]
        if not batch:
            break
        reply = await proposer.complete(
            observation_messages(batch, observations, dataset.description),
            temperature=temperature,
            max_tokens=max_tokens,
            **_seed(seed_calls, index, [example.id for example in batch]),
        )
        observations.extend(
            line.strip(" -*\t") for line in reply.text.splitlines() if line.strip(" -*\t")
        )
    if not observations:
        return fallback_summary(dataset), observations
    reply = await proposer.complete(
        summary_messages(observations),
        temperature=temperature,
        max_tokens=max_tokens,
        **_seed(seed_calls, observations),
    )
    summary = " ".join(reply.text.split())
    if len(summary) < MIN_SUMMARY_CHARS:
        summary = " ".join(observations)
    return clip(summary, 1200), observations


def program_description(program: StagedPrompts, candidate: Candidate) -> str:
    """The stages in order: what each reads, writes and must reply, and its instruction."""
    stages = program.config.stages
    lines = [
        f"The program {program.name!r} has {len(stages)} stage(s), run in order; each stage "
        "is one call to a language model whose system message is the stage's instruction."
    ]
    for number, stage in enumerate(stages, 1):
        reads = sorted(set().union(*(placeholders(m.template) for m in stage.messages)))
        instruction = candidate.components.get(stage.name, stage.instruction)
        messages = "; ".join(f"{m.role}: {clip(m.template, 200)!r}" for m in stage.messages)
        lines.append(
            f"Stage {number} {stage.name!r}: reads {', '.join(reads) or 'nothing'}; its output "
            f"becomes the field {stage.output_field!r}; {format_description(stage)}."
        )
        lines.append(f"  Messages: {messages}")
        lines.append(
            f"  Current instruction: {instruction!r}" if instruction else "  No instruction yet."
        )
    return "\n".join(lines)


def stage_reads(program: StagedPrompts) -> Mapping[str, list[str]]:
    """The fields each stage's messages read, by stage name."""
    return {
        stage.name: sorted(set().union(*(placeholders(m.template) for m in stage.messages)))
        for stage in program.config.stages
    }


def _seed(seed_calls: bool, *parts: Any) -> dict[str, Any]:
    """A seed that is a function of what the call sees, so sampled replies repeat."""
    return {"seed": call_seed("mipro.summary", *parts)} if seed_calls else {}
