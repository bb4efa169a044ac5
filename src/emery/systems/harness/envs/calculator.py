"""Calculator and unit conversion: answer a two-step quantity question with tools."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from emery.systems.harness.envs.arithmetic import evaluate, number_text
from emery.systems.harness.observation import Observation

UNITS: dict[str, tuple[str, float]] = {
    "mm": ("length", 0.001),
    "cm": ("length", 0.01),
    "m": ("length", 1.0),
    "km": ("length", 1000.0),
    "g": ("mass", 0.001),
    "kg": ("mass", 1.0),
    "t": ("mass", 1000.0),
    "ml": ("volume", 0.001),
    "l": ("volume", 1.0),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "h": ("time", 3600.0),
}
TOOLS = [
    {
        "name": "calculate",
        "description": "Evaluate an arithmetic expression (+ - * / ** % and parentheses).",
        "parameters": {"expression": "e.g. (3 + 4) * 2"},
    },
    {
        "name": "convert",
        "description": "Convert a quantity between units (" + ", ".join(UNITS) + ").",
        "parameters": {"value": "a number", "from_unit": "unit", "to_unit": "unit"},
    },
]


def convert(value: float, source: str, target: str) -> float:
    """``value`` in unit ``source`` expressed in unit ``target``."""
    if source not in UNITS or target not in UNITS:
        unknown = source if source not in UNITS else target
        raise ValueError(f"unknown unit {unknown!r} (known: {', '.join(UNITS)})")
    (kind_a, factor_a), (kind_b, factor_b) = UNITS[source], UNITS[target]
    if kind_a != kind_b:
        raise ValueError(f"cannot convert {kind_a} ({source}) to {kind_b} ({target})")
    return value * factor_a / factor_b


class CalculatorEnv:
    """Tools ``calculate`` and ``convert``; the question needs a conversion and a sum."""

    tools = TOOLS

    def reset(self, task: Mapping[str, Any]) -> str:
        return str(task["question"])

    def execute(self, action: Mapping[str, Any]) -> Observation:
        arguments = action.get("arguments") or {}
        try:
            if action["tool"] == "calculate":
                return Observation(number_text(evaluate(str(arguments["expression"]))))
            value = float(arguments["value"])
            result = convert(value, str(arguments["from_unit"]), str(arguments["to_unit"]))
            return Observation(number_text(result))
        except KeyError as exc:
            return Observation(f"missing argument {exc}", ok=False)
        except (TypeError, ValueError) as exc:
            return Observation(str(exc), ok=False)

    @staticmethod
    def generate(rng: random.Random) -> tuple[dict[str, Any], Any]:
        """A question ``a UNIT1 plus b UNIT2, in UNIT2`` and its numeric answer."""
        kind = rng.choice(sorted({kind for kind, _ in UNITS.values()}))
        units = [name for name, (k, _) in UNITS.items() if k == kind]
        big, small = sorted(rng.sample(units, 2), key=lambda u: -UNITS[u][1])
        a, b = rng.randint(2, 40), rng.randint(1, 900)
        question = f"What is {a} {big} plus {b} {small}, expressed in {small}?"
        answer = number_text(convert(a, big, small) + b)
        return {"question": question}, answer
