"""Apply the gradient: ask the edit LM to rewrite the prompt, then check what it wrote.

Small models often answer an example instead of writing a prompt, echo the material they
were shown, stop mid-sentence, or lose a ``{placeholder}``: such an edit is rejected with
a reason (recorded in the edit event), never scored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from emery.algorithms.apo.critique import Sampling, ask, template_fields
from emery.algorithms.apo.prompts import PromptTemplate
from emery.algorithms.proposals import extract_proposal, instruction_problem, placeholder_problem
from emery.lm.base import LM

_FENCED = re.compile(r"```[^\n]*\n.*?```", re.DOTALL)
_TAGGED = re.compile(r"<prompt>\s*(.*?)\s*(?:</prompt>|$)", re.DOTALL | re.IGNORECASE)
_LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:the\s+)?(?:new|improved|updated|revised|edited|final)\s+prompt(?:\*\*)?\s*:"
    r"(?:\*\*)?\s*",
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
    text = _LABEL.sub("", text, count=1).strip()
    return text or None


def edit_problem(original: str, proposal: str | None, *, cut_off: bool) -> str | None:
    """Why ``proposal`` may not replace ``original``, or None when it may."""
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
    return instruction_problem(proposal, original=original)


async def edit_prompt(
    lm: LM,
    template: PromptTemplate,
    *,
    prompt: str,
    component: str,
    task: str,
    critique: str,
    experiments: str,
    sampling: Sampling,
) -> Edit:
    """Ask ``lm`` to rewrite ``prompt`` from ``critique``; the result says if it is usable."""
    message = template.render(
        **template_fields(prompt=prompt, component=component, task=task),
        critique=critique,
        experiments=experiments,
    )
    completion = await ask(lm, message, sampling)
    proposal = take_prompt(completion.text)
    # A reply stopped by the token limit is usable only if its fenced prompt was closed.
    cut_off = completion.finish_reason == "length" and not _FENCED.search(completion.text)
    problem = edit_problem(prompt, proposal, cut_off=cut_off)
    return Edit(variant=template.name, reply=completion.text, proposal=proposal, problem=problem)
