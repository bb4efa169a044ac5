"""Checks on text a proposer or reflection model wrote, shared by GEPA, MIPRO and APO.

Small models often answer the question instead of writing an instruction, wrap the text
in chatter, or drop ``{placeholders}``. A proposal that fails these checks is rejected
(recorded, not scored), never a crash.
"""

from __future__ import annotations

import re

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
