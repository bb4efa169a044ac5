"""Checks on text a proposer or reflection model wrote, shared by GEPA, MIPRO and APO.

Small models often answer the question instead of writing an instruction, wrap the text
in chatter, or drop ``{placeholders}``. What can be repaired is (a label or quotes around
the text, a dropped placeholder put back, an added placeholder of a field the stage
already shows written as words); a proposal that still fails these checks is rejected
(recorded, not scored), never a crash.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from emery.systems.templates import placeholders

# A language tag counts only when a line break follows it: ```Solve it.``` keeps "Solve".
_FENCE = re.compile(r"```(?:[a-zA-Z0-9_-]*[ \t]*\n)?(.*?)```", re.DOTALL)
_PREFACE = re.compile(
    r"^\s*(?:sure[,!.]?\s*)?(?:here(?:'s| is) (?:the |an |my )?"
    r"(?:new |improved |updated |revised )?(?:instruction|prompt|version)s?[^:\n]*:"
    r"|(?:new |improved |updated |revised )?(?:instruction|prompt)\s*:)\s*",
    re.IGNORECASE,
)


def extract_proposal(reply: str) -> str | None:
    """The proposed text in a reply: the longest fenced block, else the reply without a
    leading "Here is the new instruction:" (or "New instruction:") and surrounding quotes.
    None if nothing is left."""
    blocks = [block.strip() for block in _FENCE.findall(reply) if block.strip()]
    text = max(blocks, key=len) if blocks else _PREFACE.sub("", reply.strip(), count=1).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text or None


# A label before the text: "**New instruction:**", "The improved prompt is:",
# "Instruction for stage 'solve':". Nothing else may come between the words and the colon.
_LABEL = re.compile(
    r"^\s*[*_#>\s]*(?:(?:the|my|a|an)\s+)?"
    r"(?:(?:new|improved|updated|revised|final|better|rewritten)\s+)?(?:instruction|prompt)s?"
    r"(?:\s+for\s+(?:the\s+)?(?:stage\s+)?[`'\"]?[\w-]+[`'\"]?)?(?:\s+is)?"
    r"\s*[*_]*\s*:\s*[*_]*\s*",
    re.IGNORECASE,
)
_PAIRS = {'"': '"', "'": "'", "`": "`", "\u201c": "\u201d", "\u2018": "\u2019", "*": "*"}


def unwrap_proposal(text: str) -> str:
    """``text`` without a leading label ("New instruction:", "**Instruction:**", "Here is
    the prompt:") and the quotes, backticks or emphasis around it, as often as they nest."""
    text = text.strip()
    while True:
        stripped = _LABEL.sub("", _PREFACE.sub("", text, count=1), count=1).strip()
        while len(stripped) >= 2 and _PAIRS.get(stripped[0]) == stripped[-1]:
            stripped = stripped[1:-1].strip()
        if stripped == text or not stripped:
            return stripped or text
        text = stripped


_ARTICLE = r"(\b(?:[Tt]he|[Tt]his|[Tt]hat|[Ee]ach|[Ee]very|[Aa]n?|[Yy]our|[Gg]iven|[Ii]ts)\s+)?"


def name_fields(proposal: str, original: str, fields: Iterable[str]) -> str:
    """``proposal`` with each placeholder it added that names one of ``fields`` written as
    words: "Solve {question}." becomes "Solve the question.".

    ``fields`` are what the stage's messages already show the model. A placeholder in an
    instruction is filled with the field's value, so such a placeholder would show the
    value a second time; named in words, the instruction says the same thing once.
    """
    added = sorted((placeholders(proposal) - placeholders(original)) & set(fields))
    if not added:
        return proposal
    pattern = re.compile(_ARTICLE + r"(?<!\{)\{(" + "|".join(map(re.escape, added)) + r")\}(?!\})")

    def words(match: re.Match[str]) -> str:
        name = match.group(2).replace("_", " ")
        if match.group(1):
            return match.group(1) + name
        before = match.string[: match.start()].rstrip()
        return ("The " if not before or before[-1] in ".!?" else "the ") + name

    return pattern.sub(words, proposal)


def restore_placeholders(proposal: str, original: str) -> str:
    """``proposal`` with every sentence (or line) of ``original`` that holds a placeholder
    the proposal dropped appended, so the rewritten instruction still shows its inputs.

    A small proposer often rewrites "Classify ... into one of: {labels}." without the
    ``{labels}`` it cannot see the value of; putting the original's sentence back keeps a
    usable rewrite instead of rejecting it. Placeholders the proposal invented are left
    for the checks to reject.
    """
    dropped = placeholders(original) - placeholders(proposal)
    if not dropped:
        return proposal
    pieces = [p for p in re.split(r"(?<=[.!?])\s+|\n+", original) if p.strip()]
    kept = [p.strip() for p in pieces if placeholders(p) & dropped]
    return "\n".join([proposal.rstrip(), *dict.fromkeys(kept)])


def placeholder_problem(original: str, proposal: str) -> str | None:
    """Why ``proposal`` cannot replace ``original``: a dropped or invented placeholder."""
    before, after = placeholders(original), placeholders(proposal)
    dropped, invented = sorted(before - after), sorted(after - before)
    if dropped:
        return "dropped placeholder " + ", ".join("{" + p + "}" for p in dropped)
    if invented:
        return "invented placeholder " + ", ".join("{" + p + "}" for p in invented)
    return None


def instruction_problem(
    proposal: str, *, original: str = "", min_chars: int = 12, max_chars: int = 6000
) -> str | None:
    """Why ``proposal`` does not look like an instruction, or None if it does.

    Rejects empty or tiny texts, texts far too long, bare numbers or one-word answers,
    a text that repeats itself (a small model's decoding loop), and an unchanged copy of
    the original.
    """
    text = proposal.strip()
    if len(text) < min_chars:
        return f"too short ({len(text)} characters)"
    if len(text) > max_chars:
        return f"too long ({len(text)} characters)"
    if re.fullmatch(r"[-+$]?\d[\d,.]*\s*\w{0,12}", text):
        return "an answer, not an instruction"
    if len(text.split()) < 3:
        return "fewer than three words"
    if repeats_itself(text):
        return "repeats the same line over and over"
    if original and " ".join(text.split()) == " ".join(original.split()):
        return "unchanged"
    return placeholder_problem(original, text) if original else None


def repeats_itself(text: str, times: int = 3, min_chars: int = 20, span: int = 6) -> bool:
    """True when a line of ``min_chars`` or more, or a run of ``span`` words, occurs
    ``times`` times: the sign of a decoding loop."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        key = re.sub(r"^\W*\d*\W*", "", line.strip().lower())
        if len(key) >= min_chars:
            counts[key] = counts.get(key, 0) + 1
            if counts[key] >= times:
                return True
    words = re.findall(r"\w+", text.lower())
    runs: dict[tuple[str, ...], int] = {}
    for start in range(len(words) - span + 1):
        key_words = tuple(words[start : start + span])
        runs[key_words] = runs.get(key_words, 0) + 1
        if runs[key_words] >= times:
            return True
    return False
