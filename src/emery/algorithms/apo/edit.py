"""Apply the gradient: ask the edit LM to rewrite the prompt, then check what it wrote.

Small models often answer an example instead of writing a prompt (naming its people or
quoting its numbers), echo the material they were shown, stop mid-sentence, or lose a
``{placeholder}``: such an edit is rejected with a reason (recorded in the edit event),
never scored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from emery.algorithms.apo.critique import Sampling, ask, template_fields
from emery.algorithms.apo.prompts import MetaPrompt
from emery.algorithms.proposal_checks import (
    extract_proposal,
    instruction_problem,
    placeholder_problem,
    restore_placeholders,
)
from emery.lm.base import LM
from emery.systems.templates import placeholders

_FENCED = re.compile(r"```.*?```", re.DOTALL)
_STRAY_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*$|^\s*```|```\s*$", re.MULTILINE)
_TAGGED = re.compile(r"<prompt>\s*(.*?)\s*(?:</prompt>|$)", re.DOTALL | re.IGNORECASE)
_LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:the\s+)?(?:new|improved|updated|revised|edited|final)\s+prompt(?:\*\*)?\s*:"
    r"(?:\*\*)?\s*",
    re.IGNORECASE,
)
# A capitalised word right after a lower-case word: a name, not the start of a sentence.
_NAME = re.compile(r"(?<=[a-z,;] )[A-Z][a-z]+\b")
_QUESTION = re.compile(r"[^.!?\n]*\?")
_NUMBER = re.compile(r"(?<![\w.])\d[\d,.]*\d(?![\w])")
# Talk about the prompt or the review instead of instructions to the assistant.
_META = re.compile(
    r"\b(?:the|this|current) (?:instruction|instructions|prompt)s? (?:is|are|was|were|should|does"
    r"|do|must|needs?|lacks?)\b|\b(?:the reviewer|the critique|the advice)\b",
    re.IGNORECASE,
)
# Lines of the material shown to the edit LM; a prompt that contains them copied it.
_ECHO_MARKERS = ("[reply]", "[assistant]", "[trace]", "Checker:", "A reviewer found", "The task:")


@dataclass(frozen=True)
class Edit:
    """The edit LM's reply, the prompt taken from it, and why it was rejected (if it was)."""

    variant: str
    reply: str
    proposal: str | None
    problem: str | None

    @property
    def accepted(self) -> bool:
        return self.problem is None and self.proposal is not None


def take_prompt(reply: str) -> str | None:
    """The new prompt in an edit reply: fenced or tagged text, without a "New prompt:" label."""
    text = extract_proposal(reply)
    if text is None:
        return None
    tagged = _TAGGED.search(text)
    if tagged and tagged.group(1).strip():
        text = tagged.group(1)
    text = _LABEL.sub("", text, count=1)
    text = _STRAY_FENCE.sub("", text).strip()
    return text or None


def example_detail(proposal: str, examples: Sequence[str], allowed: str) -> str | None:
    """A name or a number of two or more digits that ``proposal`` takes from ``examples``
    (train inputs) and that ``allowed`` (the old prompt, the task) does not already use."""
    text = " ".join(examples)
    for pattern, what in ((_NAME, "name"), (_NUMBER, "number")):
        details = {m.group(0) for m in pattern.finditer(text)} - set(pattern.findall(allowed))
        for detail in sorted(details):
            if re.search(rf"(?<![\w.]){re.escape(detail)}(?![\w])", proposal):
                return f"quotes the {what} {detail!r} from a train example: an answer, not a prompt"
    return None


def edit_problem(
    original: str,
    proposal: str | None,
    *,
    cut_off: bool,
    examples: Sequence[str] = (),
    allowed: str = "",
) -> str | None:
    """Why ``proposal`` may not replace ``original``, or None when it may.

    ``examples`` are the train inputs the critique was based on; ``allowed`` is text whose
    names and numbers a prompt may use (the task description).
    """
    if proposal is None:
        return "the reply holds no prompt"
    if cut_off:
        return "the reply was cut off at the token limit"
    problem = placeholder_problem(original, proposal)
    if problem is not None:
        return problem
    echoed = next((marker for marker in _ECHO_MARKERS if marker in proposal), None)
    if echoed is not None:
        return f"copies the material it was shown ({echoed!r})"
    if proposal.rstrip().endswith(":"):
        return "ends with a colon: a lead-in to text that is missing"
    if _QUESTION.fullmatch(proposal.strip()) and not placeholders(proposal):
        return "a question back, not an instruction"
    meta = _META.search(proposal)
    if meta is not None:
        return f"talks about the prompt ({meta.group(0)!r}) instead of instructing the assistant"
    detail = example_detail(proposal, examples, f"{original}\n{allowed}")
    if detail is not None:
        return detail
    return instruction_problem(proposal, original=original)


MAX_ADDITION_WORDS = 60


def appended(original: str, addition: str) -> str:
    """``original`` with ``addition`` at its end (on a new line if it has several lines)."""
    if not original.strip():
        return addition.strip()
    joiner = "\n" if "\n" in original.strip() else " "
    return original.rstrip() + joiner + addition.strip()


def addition_problem(original: str, addition: str) -> str | None:
    """Why ``addition`` is not a sentence or two worth adding to ``original``."""
    if _QUESTION.fullmatch(addition.strip()):
        return "a question back, not an instruction"
    words = len(addition.split())
    if words > MAX_ADDITION_WORDS:
        return f"too long to add ({words} words; at most {MAX_ADDITION_WORDS})"
    if " ".join(addition.split()) in " ".join(original.split()):
        return "adds nothing the prompt does not already say"
    return instruction_problem(addition)


async def edit_prompt(
    lm: LM,
    template: MetaPrompt,
    *,
    prompt: str,
    component: str,
    task: str,
    critique: str,
    experiments: str,
    examples: Sequence[str],
    sampling: Sampling,
) -> Edit:
    """Ask ``lm`` to rewrite ``prompt`` from ``critique``; the result says if it is usable."""
    messages = template.messages(
        **template_fields(prompt=prompt, component=component, task=task),
        critique=critique,
        experiments=experiments,
    )
    completion = await ask(lm, messages, sampling)
    text = take_prompt(completion.text)
    if text is not None and not template.append:
        text = restore_placeholders(text, prompt)
    # A reply stopped by the token limit is usable only if its fenced prompt was closed.
    cut_off = completion.finish_reason == "length" and not _FENCED.search(completion.text)
    proposal, problem = text, None
    if template.append and text is not None and not cut_off:
        problem = addition_problem(prompt, text)
        proposal = appended(prompt, text)
    if problem is None:
        problem = edit_problem(prompt, proposal, cut_off=cut_off, examples=examples, allowed=task)
    return Edit(variant=template.name, reply=completion.text, proposal=proposal, problem=problem)
