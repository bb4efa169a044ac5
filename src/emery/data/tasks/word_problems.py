"""Arithmetic word problems of one or two steps with integer answers."""

from __future__ import annotations

import random
from typing import Any

from emery.data.tasks.base import BuiltinTask
from emery.systems.parsers import ParserConfig
from emery.systems.prompt_program import MessageTemplate, PromptProgramConfig, StageConfig
from emery.verifiers.kinds import NumericConfig

NAMES = [
    "Ava",
    "Ben",
    "Carla",
    "Dev",
    "Elena",
    "Farid",
    "Grace",
    "Hugo",
    "Iris",
    "Jamal",
    "Kenji",
    "Lena",
    "Mateo",
    "Nora",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sam",
    "Tara",
]
ITEMS = [
    "apples",
    "stickers",
    "marbles",
    "books",
    "pencils",
    "cookies",
    "stamps",
    "shells",
    "cards",
    "balloons",
    "coins",
    "crayons",
]
CONTAINERS = ["boxes", "bags", "packs", "jars", "crates", "baskets"]


def _one_step(rng: random.Random, name: str, item: str) -> tuple[str, int]:
    kind = rng.choice(["add", "sub", "mul", "div"])
    if kind == "add":
        a, b = rng.randint(5, 60), rng.randint(3, 40)
        return (
            f"{name} has {a} {item}. {name} gets {b} more. How many {item} does {name} have now?",
            a + b,
        )
    if kind == "sub":
        a = rng.randint(20, 90)
        b = rng.randint(3, a - 2)
        return (
            f"{name} had {a} {item} and gave away {b}. How many {item} does {name} have left?",
            a - b,
        )
    if kind == "mul":
        a, b = rng.randint(3, 12), rng.randint(3, 12)
        box = rng.choice(CONTAINERS)
        return (
            f"{name} buys {a} {box} of {item}. Each of the {box} holds {b} {item}. "
            f"How many {item} did {name} buy?",
            a * b,
        )
    b = rng.randint(2, 9)
    each = rng.randint(3, 12)
    return (
        f"{name} shares {b * each} {item} equally among {b} friends. "
        f"How many {item} does each friend get?",
        each,
    )


def _two_step(rng: random.Random, name: str, item: str) -> tuple[str, int]:
    kind = rng.choice(["mul_sub", "add_add", "mul_add", "money"])
    box = rng.choice(CONTAINERS)
    if kind == "mul_sub":
        a, b = rng.randint(3, 9), rng.randint(4, 12)
        c = rng.randint(2, a * b - 2)
        return (
            f"{name} has {a} {box} with {b} {item} in each. {name} gives {c} {item} to a friend. "
            f"How many {item} does {name} have left?",
            a * b - c,
        )
    if kind == "add_add":
        a, b, c = rng.randint(5, 40), rng.randint(5, 40), rng.randint(5, 40)
        return (
            f"{name} collected {a} {item} on Monday, {b} on Tuesday and {c} on Wednesday. "
            f"How many {item} did {name} collect in total?",
            a + b + c,
        )
    if kind == "mul_add":
        a, b, c = rng.randint(2, 8), rng.randint(3, 10), rng.randint(2, 20)
        return (
            f"{name} already has {c} {item} and then buys {a} {box} with {b} {item} in each. "
            f"How many {item} does {name} have now?",
            c + a * b,
        )
    price, hours, spent = rng.randint(6, 15), rng.randint(2, 8), rng.randint(5, 30)
    return (
        f"{name} earns {price} dollars per hour and works {hours} hours. Then {name} spends "
        f"{spent} dollars on lunch. How many dollars does {name} have left?",
        price * hours - spent,
    )


def generate(rng: random.Random) -> tuple[dict[str, Any], Any]:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    step = _two_step if rng.random() < 0.5 else _one_step
    question, answer = step(rng, name, item)
    return {"question": question}, answer


ANSWER_PATTERN = r"Answer:\s*\$?(-?[\d,]*\.?\d+)"

TASK = BuiltinTask(
    name="word_problems",
    description=(
        "Arithmetic word problems (one or two steps). The reply must end with a line"
        " 'Answer: <number>' giving the whole-number answer."
    ),
    generate=generate,
    program=PromptProgramConfig(
        name="word_problems",
        stages=[
            StageConfig(
                name="solve",
                instruction="Answer the question.",
                messages=[MessageTemplate(template="{question}")],
                parser=ParserConfig(kind="regex", pattern=ANSWER_PATTERN),
            )
        ],
    ),
    verifier=NumericConfig(),
)
