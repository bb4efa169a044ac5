"""Turn ``emery.optimize`` arguments into a job config plus in-process objects.

Whatever can be written down goes into the config (so the job can be resumed from the
command line): prompt-program systems, built-in tasks and data files, verifier and model
settings. A ``Dataset`` object is saved as a data file under the working directory.
Objects that cannot be written down (a custom ``System``, ``Verifier`` or ``LM``) are
passed to the engine in-process.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from emery.config.loading import parse_config
from emery.config.resolve import JobInputs
from emery.config.schema import JobConfig
from emery.core.errors import ConfigError
from emery.core.hashing import content_hash
from emery.core.models import Dataset, Example
from emery.evaluation.budget import BudgetConfig
from emery.lm.base import LM
from emery.lm.config import LMConfig
from emery.systems.base import System
from emery.systems.function_agent import FunctionAgent
from emery.systems.graph.system import GraphSystem
from emery.systems.prompt_program import PromptProgram, PromptProgramConfig
from emery.verifiers.base import Verifier
from emery.verifiers.config import VerifierConfig

SystemArg = System | PromptProgramConfig | Mapping[str, Any] | Callable[..., Any] | None
DatasetArg = Dataset | str | Path | Sequence[Example] | Mapping[str, Any]
VerifierArg = Verifier | VerifierConfig | Mapping[str, Any] | str | None
LMArg = LM | LMConfig | Mapping[str, Any] | str | None
BudgetArg = BudgetConfig | Mapping[str, Any] | int | None


def save_dataset(dataset: Dataset, folder: Path) -> Path:
    """Write ``dataset`` as a task-set JSON file (splits, name and verifier kept)."""
    rows = [
        {
            "id": example.id,
            "input": example.input,
            "expected": example.expected,
            "meta": example.meta,
            "split": split,
        }
        for split in ("train", "val", "test")
        for example in dataset.split(split)
    ]
    document = {
        "metadata": {"name": dataset.name, "description": dataset.description},
        "verifier": dataset.verifier,
        "tasks": rows,
    }
    text = json.dumps(document, ensure_ascii=False, sort_keys=True, default=str)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dataset.name}-{content_hash(text)}.json"
    if not path.exists():
        path.write_text(text, encoding="utf-8")
    return path


def _dataset_section(dataset: DatasetArg, workdir: Path) -> dict[str, Any]:
    if isinstance(dataset, Mapping):
        return dict(dataset)
    if isinstance(dataset, Dataset):
        return {"path": str(save_dataset(dataset, workdir / "datasets"))}
    if isinstance(dataset, str | Path):
        text = str(dataset)
        if Path(text).suffix.lower() in (".jsonl", ".json", ".csv"):
            return {"path": str(Path(text).resolve())}
        return {"task": text}
    examples = list(dataset)
    if not all(isinstance(example, Example) for example in examples):
        raise ConfigError("dataset: give a Dataset, a task name, a file or a list of Examples")
    return _dataset_section(Dataset(val=examples), workdir)


def _lm_section(value: LMArg, role: str, inputs: dict[str, LM]) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return {"model": value}
    if isinstance(value, LMConfig):
        return value.model_dump(mode="json", exclude_defaults=True)
    if isinstance(value, Mapping):
        return dict(value)
    inputs[role] = value
    return {"model": f"python/{type(value).__module__}:{type(value).__qualname__}"}


def _job_section(algorithm: str, seed: int, name: str | None, budget: BudgetArg) -> dict[str, Any]:
    """``[job]``: algorithm, seed, name and budget."""
    job: dict[str, Any] = {"algorithm": algorithm, "seed": seed}
    if name is not None:
        job["name"] = name
    if isinstance(budget, int):
        job["budget"] = {"metric_calls": budget}
    elif isinstance(budget, BaseModel):
        job["budget"] = budget.model_dump(mode="json", exclude_defaults=True)
    elif budget is not None:
        job["budget"] = dict(budget)
    return job


def _system_section(system: SystemArg, inputs: JobInputs) -> dict[str, Any] | None:
    """``[system]`` for a system that can be written down; else it goes to ``inputs``."""
    if isinstance(system, GraphSystem):
        return system.graph.model_dump(mode="json")
    if isinstance(system, PromptProgram):
        return system.config.model_dump(mode="json")
    if isinstance(system, PromptProgramConfig):
        return system.model_dump(mode="json")
    if isinstance(system, Mapping):
        return dict(system)
    if isinstance(system, System):
        inputs.system = system
    elif callable(system):
        inputs.system = FunctionAgent(system)
    elif system is not None:
        raise ConfigError("system: give a System, a function, a PromptProgram or a [system] dict")
    return None


def _verifier_section(verifier: VerifierArg, inputs: JobInputs) -> dict[str, Any] | None:
    """``[verifier]`` for a verifier that can be written down; else it goes to ``inputs``."""
    if isinstance(verifier, str):
        return {"kind": verifier}
    if isinstance(verifier, VerifierConfig):
        return {"kind": verifier.kind, **verifier.model_dump(mode="json", exclude_defaults=True)}
    if isinstance(verifier, Mapping):
        return dict(verifier)
    if verifier is not None:
        inputs.verifier = verifier
    return None


def optimize_config(
    *,
    system: SystemArg,
    dataset: DatasetArg,
    algorithm: str,
    budget: BudgetArg,
    verifier: VerifierArg,
    lm: LMArg,
    reflection_lm: LMArg,
    seed: int,
    settings: Mapping[str, Any] | None,
    runtime: Mapping[str, Any] | None,
    name: str | None,
    workdir: Path,
    tracking: Mapping[str, Any] | None = None,
    warm_start: str | None = None,
) -> tuple[JobConfig, dict[str, Any], JobInputs]:
    """(the config, the config as a dict, the objects passed in-process)."""
    data: dict[str, Any] = {"job": _job_section(algorithm, seed, name, budget)}
    if warm_start is not None:
        data["job"]["warm_start"] = warm_start
    inputs = JobInputs()
    system_section = _system_section(system, inputs)
    if system_section is not None:
        data["system"] = system_section
    data["dataset"] = _dataset_section(dataset, workdir)
    verifier_section = _verifier_section(verifier, inputs)
    if verifier_section is not None:
        data["verifier"] = verifier_section
    lms: dict[str, LM] = {}
    sections = {"task": _lm_section(lm, "task", lms)}
    for role in ("reflection", "proposer"):
        sections[role] = _lm_section(reflection_lm, role, lms)
    data["lm"] = {role: section for role, section in sections.items() if section is not None}
    if lms:
        inputs.lms = lms
    if settings:
        data["algorithm"] = {algorithm: dict(settings)}
    if runtime:
        data["runtime"] = dict(runtime)
    if tracking:
        data["tracking"] = dict(tracking)
    config = parse_config(data, "emery.optimize")
    return config, data, inputs
