"""Is a reflection reply a usable new instruction? Checks beyond the shared ones.

The shared checks (``emery.algorithms.proposal_checks``) reject empty, tiny, unchanged, looping
and placeholder-breaking texts. Small reflection models fail in two more ways, caught here:
they answer one of the examples ("Answer: 46", "\\boxed{46}"), and they copy an example's
input into the "instruction".
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from emery.algorithms.proposal_checks import (
    extract_proposal,
    instruction_problem,
    restore_placeholders,
)

_ANSWER_LINE = re.compile(
    r"^\s*(?:the\s+)?(?:final\s+)?answer\s*(?:is|:|=)\s*[^<\s{].*\d", re.IGNORECASE
)
_BOXED = re.compile(r"\\boxed\{\s*-?\d")


def looks_like_answer(text: str) -> bool:
    """True for a short reply that states a result rather than telling how to get one."""
    if len(text.split()) >= 40:
        return False
    first = text.strip().splitlines()[0] if text.strip() else ""
    return bool(_ANSWER_LINE.match(first) or _BOXED.search(text))


def copied_input(text: str, inputs: Iterable[str], min_chars: int = 30) -> str | None:
    """The first example input of ``min_chars`` or more that ``text`` contains verbatim."""
    flat = " ".join(text.split()).lower()
    for value in inputs:
        probe = " ".join(value.split()).lower()
        if len(probe) >= min_chars and probe in flat:
            return probe
    return None


def proposal_problem(
    text: str,
    original: str,
    *,
    example_inputs: Iterable[str] = (),
    reject_copies: bool = True,
    max_chars: int = 4000,
) -> str | None:
    """Why ``text`` cannot replace ``original``, or None when it can."""
    problem = instruction_problem(text, original=original, max_chars=max_chars)
    if problem is not None:
        return problem
    if looks_like_answer(text):
        return "an answer to an example, not an instruction"
    if reject_copies and copied_input(text, example_inputs) is not None:
        return "copies an example's input instead of describing the task in general"
    return None


def parse_proposal(
    reply: str,
    original: str,
    *,
    example_inputs: Iterable[str] = (),
    reject_copies: bool = True,
    max_chars: int = 4000,
) -> tuple[str | None, str | None]:
    """``(text, None)`` for a usable proposal, ``(text or None, reason)`` otherwise."""
    text = extract_proposal(reply)
    if text is None:
        return None, "the reply is empty"
    text = restore_placeholders(text, original)
    problem = proposal_problem(
        text,
        original,
        example_inputs=example_inputs,
        reject_copies=reject_copies,
        max_chars=max_chars,
    )
    return text, problem
