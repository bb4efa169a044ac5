"""Extract a person's name, age and city from a sentence into JSON."""

from __future__ import annotations

import random
from typing import Any

from emery.data.tasks.base import BuiltinTask
from emery.systems.parsers import ParserConfig
from emery.systems.prompt_program import MessageTemplate, PromptProgramConfig, StageConfig
from emery.verifiers.kinds import JsonFieldConfig

FIRST = [
    "Maria",
    "John",
    "Aisha",
    "Wei",
    "Lucas",
    "Sofia",
    "Ravi",
    "Hannah",
    "Diego",
    "Yuki",
    "Olga",
    "Kwame",
    "Chloe",
    "Ibrahim",
    "Mei",
    "Pavel",
]
LAST = [
    "Lopez",
    "Smith",
    "Khan",
    "Chen",
    "Silva",
    "Rossi",
    "Patel",
    "Muller",
    "Garcia",
    "Tanaka",
    "Ivanova",
    "Mensah",
    "Martin",
    "Hassan",
    "Wong",
    "Novak",
]
CITIES = [
    "Denver",
    "Porto",
    "Kyoto",
    "Accra",
    "Lyon",
    "Austin",
    "Bergen",
    "Cusco",
    "Perth",
    "Tallinn",
    "Quito",
    "Leeds",
]
SENTENCES = [
    "{name}, {age}, moved to {city} last spring.",
    "At {age}, {name} opened a bakery in {city}.",
    "The {city} marathon was won by {name}, who is {age} years old.",
    "{name} ({age}) has lived in {city} for a decade.",
    "Born {age} years ago, {name} now teaches music in {city}.",
    "Our new neighbour in {city} is {name}; she turned {age} this week.",
    "{name} is a {age}-year-old engineer based in {city}.",
    "In {city}, {age}-year-old {name} repairs old bicycles.",
]


def generate(rng: random.Random) -> tuple[dict[str, Any], Any]:
    name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    age, city = rng.randint(19, 78), rng.choice(CITIES)
    text = rng.choice(SENTENCES).format(name=name, age=age, city=city)
    return {"text": text}, {"name": name, "age": age, "city": city}


TASK = BuiltinTask(
    name="extraction",
    description="Extract the person's name, age (a number) and city from a sentence as JSON.",
    generate=generate,
    program=PromptProgramConfig(
        name="extraction",
        stages=[
            StageConfig(
                name="extract",
                instruction="Extract the person's details from the text.",
                messages=[MessageTemplate(template="{text}")],
                parser=ParserConfig(kind="raw"),
            )
        ],
    ),
    verifier=JsonFieldConfig(fields=["name", "age", "city"]),
)
