"""What makes a stored evaluation reusable: the evaluation scope and the example's content.

An evaluation is keyed by (candidate content hash, example id, split, example content hash)
within a *scope*: the system's version (everything but its optimizable texts), the task
model settings that change outputs and the verifier. A stored result is reused only for an
example with the same id and the same content, so two datasets that give one id to
different examples never share results.
"""

from __future__ import annotations

from typing import Any

from emery.config.schema import JobConfig
from emery.core.hashing import content_hash
from emery.core.models import Dataset, Example
from emery.lm.base import LM
from emery.systems.base import System
from emery.verifiers.base import Verifier
from emery.verifiers.judge import uses_judge
from emery.verifiers.rubric import RubricJudge


def evaluation_scope(
    config: JobConfig,
    system: System,
    verifier: Verifier,
    *,
    dataset: Dataset | None = None,
    task_lm: LM | None = None,
    verifier_overridden: bool = False,
) -> str:
    """The scope hash of a job's evaluations (with the judge model's settings when the
    verifier asks one)."""
    lm = config.lm.task
    if verifier_overridden:
        verifier_key: Any = verifier_identity(verifier)
    elif config.verifier is not None:
        verifier_key = config.verifier.scope_settings()
    else:
        verifier_key = dataset.verifier if dataset is not None else None
    scope: dict[str, Any] = {
        "system": [system.name, system.version()],
        "lm": {
            "model": task_lm.model if task_lm is not None else lm.model,
            "temperature": lm.temperature,
            "max_tokens": lm.max_tokens,
            "base_url": lm.base_url,
            "n_ctx": lm.n_ctx,
        },
        "verifier": verifier_key,
    }
    if uses_judge(verifier):
        judge = config.lm.for_role("judge")
        scope["judge"] = judge.model_dump(
            mode="json", include={"model", "base_url", "temperature", "max_tokens", "n_ctx"}
        )
    return content_hash(scope)


def _name(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', type(obj).__name__)}"


def verifier_identity(verifier: Verifier) -> dict[str, Any]:
    """What tells a verifier object apart: its class, the function it wraps (a Python
    verifier), its plain settings (tolerances, patterns, flags) and a rubric's criteria."""
    settings: dict[str, Any] = {
        key: value
        for key, value in sorted(getattr(verifier, "__dict__", {}).items())
        if not key.startswith("_") and isinstance(value, str | int | float | bool | None)
    }
    if isinstance(verifier, RubricJudge):
        settings["criteria"] = [c.model_dump(mode="json") for c in verifier.criteria]
    function = getattr(verifier, "fn", None)
    return {
        "class": _name(type(verifier)),
        "function": _name(function) if function is not None else None,
        "settings": settings,
    }


def example_hash(example: Example) -> str:
    """The content hash of an example (input and gold output)."""
    return content_hash({"input": example.input, "expected": example.expected})


def example_hashes(dataset: Dataset) -> dict[tuple[str, str], str]:
    """(split, example id) → content hash, for every example of the dataset."""
    return {
        (split, example.id): example_hash(example)
        for split in ("train", "val", "test")
        for example in dataset.split(split)
    }
