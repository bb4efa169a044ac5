"""A label-set verifier: the reply must be exactly one label of the task set, and the right one.

The labels are the task set's own (`metadata.labels` in reviews.json). The feedback says
which of the two rules a reply broke, in words a reflective search can act on: a reply that
is not a label at all (a sentence, a made-up label) is told the allowed labels; a label
that is wrong is told the right one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TASK_SET = Path(__file__).with_name("reviews.json")
LABELS: list[str] = json.loads(TASK_SET.read_text(encoding="utf-8"))["metadata"]["labels"]


def normalize(reply: str) -> str:
    """The reply as a label would be written: lowercased, quotes, spaces and a final
    full stop removed, inner spaces and hyphens as underscores."""
    text = reply.strip().strip("\"'`").strip().rstrip(".").strip().lower()
    return "_".join(text.replace("-", " ").split())


def verify(example: Any, output: Any) -> tuple[float, str]:
    """1 for the gold label; 0 with a sentence saying what is wrong otherwise."""
    label = normalize(str(output or ""))
    if label not in LABELS:
        shown = str(output or "").strip()[:80] or "an empty reply"
        return 0.0, (
            f"{shown!r} is not a label: reply with exactly one of {', '.join(LABELS)}"
            " and nothing else."
        )
    if label != example.expected:
        return 0.0, f"Wrong label {label!r}: this review belongs to {example.expected!r}."
    return 1.0, f"Correct: {label!r}."
