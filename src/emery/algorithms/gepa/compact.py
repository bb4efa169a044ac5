"""Compact-style reflection for small models: labelled lines in, an instruction out.

A small reflection model does poorly at writing a whole instruction: shown concrete
examples it answers them, copies them, or writes an "instruction" about one of them. It
does better at filling in three short labelled lines (TASK, METHOD, FORMAT) about problems
stated without specifics; GEPA joins the lines into the instruction.
"""

from __future__ import annotations

import re

LABELS = ("TASK", "METHOD", "FORMAT")
_LABELLED = re.compile(
    r"^[^\w\n]*(" + "|".join(LABELS) + r")[ \t*_]*:[ \t*_]*(.*?)[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_HINT = re.compile(r"^<?(?:one|two|one or two) sentences?\s*:\s*", re.IGNORECASE)


def _unwrap(text: str) -> str:
    """``text`` without wrapping <>, [] or quotes that a small model copies from hints."""
    text = text.strip()
    while len(text) >= 2 and (text[0], text[-1]) in {("<", ">"), ("[", "]"), ('"', '"')}:
        text = text[1:-1].strip()
    if text[:1] in "<[" and not any(c in text for c in ">]"):
        text = text[1:].strip()
    if text[-1:] in ">]" and not any(c in text for c in "<["):
        text = text[:-1].strip()
    return text


def parse_compact(reply: str) -> str | None:
    """The instruction joined from the labelled lines of a compact reply.

    TASK and METHOD become the first line(s), FORMAT a last line of its own starting
    "Reply format:" (a small task model follows a labelled format line far more often than
    one lost at the end of a sentence). A label's text runs to the next label or a blank
    line (five lines at most; FORMAT is one line). None when no label carries text: the
    reply is then parsed as a standard one.
    """
    parts: dict[str, str] = {}
    matches = list(_LABELLED.finditer(reply))
    for index, match in enumerate(matches):
        label = match.group(1).upper()
        end = matches[index + 1].start() if index + 1 < len(matches) else len(reply)
        rest = reply[match.end() : end].strip("\n").split("\n\n", 1)[0].splitlines()[:4]
        lines = [match.group(2)] if label == "FORMAT" else [match.group(2), *rest]
        text = _unwrap(_HINT.sub("", _unwrap(" ".join(lines).strip())))
        if text and label not in parts:
            ended = label == "FORMAT" or text.endswith((".", "!", "?", ":"))
            parts[label] = text if ended else text + "."
    if not parts:
        return None
    text = " ".join(parts[label] for label in ("TASK", "METHOD") if label in parts)
    form = parts.get("FORMAT")
    if form is None:
        return text
    form = form if form.lower().startswith("reply format") else f"Reply format: {form}"
    return f"{text}\n{form}" if text else form
