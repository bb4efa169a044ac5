"""The serving benchmark's model: a scripted two-stage solver with no latency of its own.

``python/mock_models:planner_solver`` (the job's config names it; the config's folder is on
the import path). The plan stage (a user turn without ``Plan:``) gets a plan naming the
numbers; the solve stage an answer line with their sum, so outputs differ by input.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from emery.core.models import ChatMessage
from emery.lm import FakeLM

NUMBER = re.compile(r"-?\d+")


def planner_solver() -> FakeLM:
    def reply(messages: Sequence[ChatMessage]) -> str:
        last = messages[-1]["content"]
        question = last.split("\nPlan:")[0]
        numbers = [int(n) for n in NUMBER.findall(question)]
        if "Plan:" not in last:
            return f"Add {' and '.join(map(str, numbers)) or 'nothing'}."
        return f"The plan says add them.\nAnswer: {sum(numbers)}"

    return FakeLM(reply, model="mock/planner-solver")
