"""A key-value store: the answer needs a chain of lookups (person → team → lead → city)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from emery.systems.harness.observation import Observation

NAMES = ["ada", "bo", "cy", "dee", "eli", "fay", "gus", "hal", "ivy", "jo", "kai", "lu"]
TEAMS = ["atlas", "birch", "comet", "delta", "ember", "fjord"]
CITIES = ["Oslo", "Lima", "Pune", "Kyiv", "Graz", "Hue", "Cork", "Bern"]
TOOLS = [
    {"name": "get", "description": "The value stored under a key.", "parameters": {"key": "text"}},
    {
        "name": "list_keys",
        "description": "The keys that start with a prefix.",
        "parameters": {"prefix": "text"},
    },
]


class KeyValueEnv:
    """Tools ``get`` and ``list_keys`` over the task's ``store``."""

    tools = TOOLS

    def __init__(self) -> None:
        self.store: dict[str, str] = {}

    def reset(self, task: Mapping[str, Any]) -> str:
        self.store = {str(k): str(v) for k, v in dict(task["store"]).items()}
        return str(task["question"])

    def execute(self, action: Mapping[str, Any]) -> Observation:
        arguments = action.get("arguments") or {}
        if action["tool"] == "list_keys":
            prefix = str(arguments.get("prefix", ""))
            keys = sorted(k for k in self.store if k.startswith(prefix))
            return Observation(", ".join(keys) or "no keys", data=keys)
        key = str(arguments.get("key", ""))
        if key not in self.store:
            return Observation(f"no key {key!r}", ok=False)
        return Observation(self.store[key])

    @staticmethod
    def generate(rng: random.Random) -> tuple[dict[str, Any], Any]:
        """A store of people, teams and leads, and a question needing three lookups."""
        people = rng.sample(NAMES, 6)
        store: dict[str, str] = {}
        teams = rng.sample(TEAMS, 3)
        for team in teams:
            lead = rng.choice(people)
            store[f"team:{team}:lead"] = lead
        for person in people:
            store[f"person:{person}:team"] = rng.choice(teams)
            store[f"person:{person}:city"] = rng.choice(CITIES)
        subject = rng.choice(people)
        lead = store[f"team:{store[f'person:{subject}:team']}:lead"]
        question = (
            f"In which city does the lead of {subject}'s team live? Keys look like"
            " person:<name>:team, team:<team>:lead and person:<name>:city."
        )
        return {"question": question, "store": store}, store[f"person:{lead}:city"]
