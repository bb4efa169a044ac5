"""A built-in task: a seeded example generator, a seed prompt program and a verifier."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from emery.core.models import Dataset, Example
from emery.systems.prompt_program import PromptProgramConfig
from emery.verifiers.config import VerifierConfig

Generator = Callable[[random.Random], tuple[dict[str, Any], Any]]


@dataclass(frozen=True)
class BuiltinTask:
    """Examples come from ``generate``; ``program`` is the deliberately plain starting prompt,
    or ``system`` (a ``[system]`` table) the starting system of another kind."""

    name: str
    description: str
    generate: Generator
    program: PromptProgramConfig | None
    verifier: VerifierConfig
    sizes: tuple[int, int, int] = (40, 40, 60)
    system: dict[str, Any] | None = None

    def dataset(
        self,
        *,
        seed: int = 0,
        n_train: int | None = None,
        n_val: int | None = None,
        n_test: int | None = None,
    ) -> Dataset:
        """Distinct examples split into train/val/test; the same seed gives the same data."""
        sizes = (
            self.sizes[0] if n_train is None else n_train,
            self.sizes[1] if n_val is None else n_val,
            self.sizes[2] if n_test is None else n_test,
        )
        rng = random.Random(f"{self.name}:{seed}")
        seen: set[str] = set()
        examples: list[Example] = []
        attempts = 0
        while len(examples) < sum(sizes):
            attempts += 1
            if attempts > 50 * sum(sizes) + 1000:
                raise RuntimeError(
                    f"task {self.name}: cannot generate {sum(sizes)} distinct examples"
                )
            inputs, expected = self.generate(rng)
            key = repr(sorted(inputs.items()))
            if key in seen:
                continue
            seen.add(key)
            examples.append(
                Example(id=f"{self.name}-{len(examples):04d}", input=inputs, expected=expected)
            )
        n_train, n_val, _ = sizes
        return Dataset(
            name=self.name,
            description=self.description,
            train=examples[:n_train],
            val=examples[n_train : n_train + n_val],
            test=examples[n_train + n_val :],
            verifier={
                "kind": self.verifier.kind,
                **self.verifier.model_dump(exclude_defaults=True),
            },
        )
