"""Grounded instruction proposals for one stage: prompt, tips, checks and deduplication.

Each proposal prompt carries the dataset summary, the program description, the stage's
required format, a sampled demo set, the instructions tried so far with their scores, the
latest reasons a person gave for rejecting candidates of the job (``[job] approve``) and a
randomly drawn tip. A reply is repaired first (a label or quotes around it removed, a
dropped placeholder put back, an added placeholder of a field the stage already shows
written as words), then accepted only if it reads as an instruction (not an answer, not a
copy of an example or of the prompt, placeholders intact) and is not a near-duplicate of a
choice the stage already has. A stage whose proposals are all rejected is asked once more
with a short prompt at a higher temperature (the retry round).
"""

from __future__ import annotations

import difflib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from emery.algorithms.approval import reviewer_section
from emery.algorithms.mipro.presets import retry_calls
from emery.algorithms.mipro.state import DemoSet, InstructionChoice, RejectedProposal
from emery.algorithms.proposal_checks import (
    extract_proposal,
    instruction_problem,
    name_fields,
    restore_placeholders,
    unwrap_proposal,
)
from emery.core.hashing import call_seed
from emery.core.models import ChatMessage, Demo
from emery.lm.base import LM
from emery.verifiers.base import as_text, clip

TIPS: dict[str, str] = {
    "none": "",
    "concise": "Keep the instruction short and to the point.",
    "creative": "Be creative: an unusual framing is welcome if it helps the model succeed.",
    "persona": "Give the model a persona suited to the task, for example 'You are a careful ...'.",
    "high_stakes": "Describe a high-stakes situation in which getting the reply right matters.",
    "describe": (
        "Describe the task precisely: what the input is and exactly what the reply must contain."
    ),
}

PROPOSER_SYSTEM = (
    "You write instructions for one stage of a language-model program. An instruction "
    "tells the model how to do the task for every input. Never solve an example yourself. "
    "Reply with the new instruction only."
)
RETRY_SYSTEM = "You rewrite instructions for a language model. Reply with one instruction only."
RETRY_TEMPERATURE = 1.0
"""The least temperature of the retry round; 0.3 above the first round's if that is more."""
NEAR_DUPLICATE = 0.9
MIN_COPY_CHARS = 30
PROMPT_COPY_CHARS = 80
# The request, system message and tips are about writing instructions: no real instruction
# for the task shares this much of them.
META_COPY_CHARS = 40
HEADERS = (
    "Dataset summary:",
    "Task description given with the data",
    "Program description:",
    "Stage to write for:",
    "Instructions tried so far",
    "Examples of this stage replying correctly",
    "A person reviewing this search rejected",
    "Task summary:",
    "Current instruction:",
)


@dataclass
class StageGrounding:
    """What the proposer is told about one stage and the task."""

    stage: str
    reads: list[str]
    format: str
    dataset_summary: str
    program_description: str
    dataset_description: str = ""
    baseline_score: float | None = None
    reviewer_notes: Sequence[str] = ()
    """Reasons a person gave for rejecting candidates of the job, oldest first."""


@dataclass
class ProposalRound:
    """The outcome for one stage: the accepted choices and the rejected replies."""

    choices: list[InstructionChoice]
    rejected: list[RejectedProposal] = field(default_factory=list)
    calls: int = 0
    kept: int = 0
    """Proposals accepted as new choices."""
    repaired: int = 0
    """Of the kept, those whose text a repair changed (``repaired_reply``)."""
    retry_calls: int = 0
    """Calls of the retry round (part of ``calls``): asked when the first kept none."""

    def reasons(self) -> dict[str, int]:
        """The rejections counted by kind of reason (``reason_kind``)."""
        counts: dict[str, int] = {}
        for rejected in self.rejected:
            kind = reason_kind(rejected.reason)
            counts[kind] = counts.get(kind, 0) + 1
        return counts


def render_demos(demos: Sequence[Demo], *, limit: int = 3) -> str:
    blocks = []
    for demo in demos[:limit]:
        inputs = "\n".join(f"{k}: {clip(as_text(v), 300)}" for k, v in demo.inputs.items())
        blocks.append(f"Input:\n{inputs}\nReply:\n{clip(demo.output, 400)}")
    return "\n\n".join(blocks)


def request(stage: str) -> str:
    """The proposer prompt's closing request for one new instruction of ``stage``."""
    return (
        f"Write a new instruction for stage {stage!r} that will score higher than the ones"
        " tried so far. Do not repeat them and do not solve an example. Reply with the"
        " instruction only."
    )


def proposal_messages(
    grounding: StageGrounding,
    choices: Sequence[InstructionChoice],
    demos: Sequence[Demo],
    tip: str,
) -> list[ChatMessage]:
    """The proposer prompt for one new instruction of ``grounding.stage``."""
    parts = []
    if grounding.dataset_summary:
        parts.append(f"Dataset summary:\n{grounding.dataset_summary}")
    if grounding.dataset_description:
        parts.append(f"Task description given with the data:\n{grounding.dataset_description}")
    parts.append(f"Program description:\n{grounding.program_description}")
    if demos:
        parts.append("Examples of this stage replying correctly:\n" + render_demos(demos))
    # The history comes before the request, not last: a weak proposer tends to continue
    # whatever list it saw last instead of writing something new.
    history = []
    for choice in choices:
        score = (
            f"validation score {grounding.baseline_score:.2f}"
            if choice.source == "original" and grounding.baseline_score is not None
            else "not scored yet"
        )
        history.append(f"- {choice.text!r} ({score})")
    parts.append("Instructions tried so far for this stage:\n" + "\n".join(history))
    if (reviewed := reviewer_section(grounding.reviewer_notes)) is not None:
        parts.append(reviewed)
    parts.append(
        f"Stage to write for: {grounding.stage!r}. It reads"
        f" {', '.join(grounding.reads) or 'nothing'}; {grounding.format}."
    )
    if tip:
        parts.append(f"Tip: {tip}")
    parts.append(request(grounding.stage))
    return [
        {"role": "system", "content": PROPOSER_SYSTEM},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def retry_messages(grounding: StageGrounding, original: str) -> list[ChatMessage]:
    """The retry round's short prompt: the task, what the stage reads and must reply, its
    current instruction (no history, demos or tips for a weak proposer to echo)."""
    summary = clip(grounding.dataset_summary or grounding.dataset_description, 400)
    parts = [f"Task summary: {summary}"] if summary else []
    parts += [
        f"The model reads {', '.join(grounding.reads) or 'no fields'}; {grounding.format}.",
        f"Current instruction: {original!r}",
        retry_request(),
    ]
    return [
        {"role": "system", "content": RETRY_SYSTEM},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def retry_request() -> str:
    """The retry prompt's closing request."""
    return (
        "Write a different instruction of one to three sentences that tells the model how"
        " to handle any such input."
    )


def retry_temperature(temperature: float | None) -> float:
    """The retry round's temperature: above the first round's, at least ``RETRY_TEMPERATURE``."""
    return min(2.0, max(RETRY_TEMPERATURE, (temperature or 0.0) + 0.3))


def reason_kind(reason: str) -> str:
    """A rejection reason without its particulars: "near-duplicate of choice 2" and "too
    short (5 characters)" count as "near-duplicate" and "too short"."""
    return re.sub(r"\s+(?:\(\d+ characters\)|\{.*|of choice \d+)$", "", reason)


_ENUMERATOR = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+")
_ANNOTATION = re.compile(r"\s*\((?:validation score [\d.]+|not scored yet)\)\s*$")


def _clean(text: str | None) -> str | None:
    """A proposal without a list marker, a trailing score note or wrapping quotes."""
    if text is None:
        return None
    text = _ANNOTATION.sub("", _ENUMERATOR.sub("", text.strip()))
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text or None


def _normalized(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def near_duplicate(text: str, others: Sequence[str]) -> int | None:
    """The index of an existing text nearly identical to ``text``, or None."""
    mine = _normalized(text)
    for index, other in enumerate(others):
        theirs = _normalized(other)
        if mine == theirs or difflib.SequenceMatcher(None, mine, theirs).ratio() >= NEAR_DUPLICATE:
            return index
    return None


def _longest_shared(text: str, other: str) -> int:
    mine, theirs = _normalized(text), _normalized(other)
    match = difflib.SequenceMatcher(None, mine, theirs, autojunk=False).find_longest_match(
        0, len(mine), 0, len(theirs)
    )
    return match.size


def copies_prompt(text: str, program_description: str, stage: str = "") -> bool:
    """Whether ``text`` echoes the proposer prompt: its section headers, a long stretch of
    the program description, or part of the request, system message or a tip (a weak
    proposer often repeats what it was shown, even the request itself)."""
    lowered = text.lower()
    if any(header.lower() in lowered for header in HEADERS):
        return True
    if _longest_shared(text, program_description) >= PROMPT_COPY_CHARS:
        return True
    meta = [request(stage), PROPOSER_SYSTEM, retry_request(), RETRY_SYSTEM, *TIPS.values()]
    return any(_longest_shared(text, part) >= META_COPY_CHARS for part in meta if part)


def proposal_problem(
    text: str,
    original: str,
    existing: Sequence[str],
    example_texts: Sequence[str],
    program_description: str = "",
    stage: str = "",
) -> str | None:
    """Why ``text`` cannot be a new choice, or None."""
    problem = instruction_problem(text, original=original)
    if problem is not None:
        return problem
    for snippet in example_texts:
        if len(snippet) >= MIN_COPY_CHARS and _normalized(snippet) in _normalized(text):
            return "copies a training example"
    if copies_prompt(text, program_description, stage):
        return "echoes the proposer prompt"
    duplicate = near_duplicate(text, existing)
    if duplicate is not None:
        return f"near-duplicate of choice {duplicate + 1}"
    return None


def repaired_reply(reply: str, original: str, fields: Sequence[str]) -> str | None:
    """The instruction in ``reply``: unwrapped from labels, list markers and quotes, with
    added placeholders of ``fields`` written as words and dropped ones put back."""
    text = _clean(extract_proposal(reply))
    if text is None:
        return None
    text = name_fields(unwrap_proposal(text), original, fields)
    return restore_placeholders(text, original)


async def propose_stage(
    proposer: LM,
    grounding: StageGrounding,
    choices: list[InstructionChoice],
    demo_sets: Sequence[DemoSet],
    example_texts: Sequence[str],
    rng: random.Random,
    *,
    wanted: int,
    attempts: int,
    use_tips: bool,
    max_tokens: int,
    temperature: float | None,
    seed_calls: bool = False,
) -> ProposalRound:
    """Ask for instructions until ``wanted`` choices exist or ``attempts`` calls are spent;
    if none was kept, ask the retry round once (a call per missing choice, at most
    ``attempts``)."""
    outcome = ProposalRound(choices=list(choices))
    with_demos = [demo_set.demos for demo_set in demo_sets if demo_set.demos]

    async def ask(messages: list[ChatMessage], tip: str, heat: float | None) -> None:
        params: dict[str, Any] = {"seed": call_seed(messages, outcome.calls)} if seed_calls else {}
        reply = await proposer.complete(messages, temperature=heat, max_tokens=max_tokens, **params)
        outcome.calls += 1
        _judge(outcome, reply.text, tip, grounding, example_texts)

    while len(outcome.choices) < wanted and outcome.calls < attempts:
        tip_name = rng.choice(sorted(TIPS)) if use_tips else "none"
        demos = rng.choice(with_demos) if with_demos else []
        await ask(
            proposal_messages(grounding, outcome.choices, demos, TIPS[tip_name]),
            tip_name,
            temperature,
        )
    if outcome.calls and not outcome.kept:
        retry = retry_messages(grounding, choices[0].text)
        for _ in range(retry_calls(attempts, wanted - len(outcome.choices))):
            if len(outcome.choices) >= wanted:
                break
            await ask(retry, "retry", retry_temperature(temperature))
            outcome.retry_calls += 1
    return outcome


def _judge(
    outcome: ProposalRound,
    reply: str,
    tip: str,
    grounding: StageGrounding,
    example_texts: Sequence[str],
) -> None:
    """Add ``reply`` to ``outcome``: a new choice once repaired and checked, else a rejection."""
    original = outcome.choices[0].text
    text = repaired_reply(reply, original, grounding.reads)
    problem = (
        "empty reply"
        if text is None
        else proposal_problem(
            text,
            original,
            [c.text for c in outcome.choices],
            example_texts,
            grounding.program_description,
            grounding.stage,
        )
    )
    if problem is not None or text is None:
        outcome.rejected.append(
            RejectedProposal(
                stage=grounding.stage, text=clip(reply, 500), reason=problem or "empty"
            )
        )
        return
    outcome.kept += 1
    outcome.repaired += text != reply.strip()
    outcome.choices.append(InstructionChoice(text=text, source="proposed", tip=tip))
