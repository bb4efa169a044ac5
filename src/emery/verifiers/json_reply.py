"""Reading one JSON object out of a model reply.

A reply is read as the first ``{...}`` that parses as a JSON object, looked for first
inside fenced blocks (```` ```json ```` fences before other fences, each in order), then
anywhere in the reply, so leading prose, a trailing remark or an unclosed fence does not
hide it. Each ``{`` is tried in order with the JSON decoder itself, so nested objects and
braces inside strings are read as JSON reads them, and the first (outermost) object that
parses wins over any object nested in it or written after it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from emery.verifiers.base import clip

_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


def _fenced_blocks(text: str) -> list[str]:
    """The bodies of the fenced blocks in ``text``: ``json``-tagged ones first, in order."""
    blocks = [(match.group(1).lower(), match.group(2)) for match in _FENCE.finditer(text)]
    return [body for tag, body in blocks if tag == "json"] + [
        body for tag, body in blocks if tag != "json"
    ]


def _first_object(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the first ``{...}`` in ``text`` that parses as a JSON object, None) or (None, why
    the first ``{`` did not parse; None when ``text`` has no ``{``)."""
    why: str | None = None
    start = text.find("{")
    while start >= 0:
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            why = why or f"{exc.msg} at character {exc.pos - start} of the object"
        else:
            if isinstance(value, dict):
                return value, None
        start = text.find("{", start + 1)
    return None, why


def read_json_object(text: str) -> dict[str, Any]:
    """The JSON object ``text`` holds (see the module docstring), or ValueError saying why
    there is none."""
    if not text.strip():
        raise ValueError("the reply is empty; it must be a JSON object")
    why: str | None = None
    for source in [*_fenced_blocks(text), text]:
        found, reason = _first_object(source)
        if found is not None:
            return found
        why = why or reason
    if why is None:
        raise ValueError(f"the reply has no JSON object ({{...}}): {clip(text)!r}")
    raise ValueError(f"the reply has no JSON object that parses ({why}): {clip(text)!r}")
