"""Turn ``emery.optimize`` arguments into a job config plus in-process objects.

Whatever can be written down goes into the config (so the job can be resumed from the
command line): prompt-program systems, built-in tasks and data files, verifier and model
settings. A ``Dataset`` object is saved as a data file under the working directory.
Objects that cannot be written down (a custom ``System``, ``Verifier`` or ``LM``, a metric
function, an ``openai`` client) are passed to the engine in-process.
"""

from __future__ import annotations

import json
import sys
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
from emery.verifiers.function import FunctionMetric

SystemArg = System | PromptProgramConfig | Mapping[str, Any] | Callable[..., Any] | None
DatasetArg = Dataset | str | Path | Sequence[Example] | Mapping[str, Any]
VerifierArg = Verifier | VerifierConfig | Mapping[str, Any] | str | Callable[..., Any] | None
LMArg = LM | LMConfig | Mapping[str, Any] | str | None
"""A model spec, an LMConfig or its dict, an LM object, or ``{"client": openai_client,
"model": name, ...settings}``."""
BudgetArg = BudgetConfig | Mapping[str, Any] | int | None


class ArgumentError(ConfigError, ValueError):
    """An SDK argument of the wrong kind (also a ``ValueError``)."""


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


def is_openai_client(value: object) -> bool:
    """Whether ``value`` is an ``openai.OpenAI`` or ``openai.AsyncOpenAI`` client (none can
    exist before ``openai`` is imported, so this never imports it)."""
    openai = sys.modules.get("openai")
    return openai is not None and isinstance(value, openai.OpenAI | openai.AsyncOpenAI)


def _client_section(value: Mapping[str, Any], argument: str) -> dict[str, Any]:
    """The ``[lm.<role>]`` section of ``{"client": ..., "model": ...}``: the model as
    ``openai/<model>`` and the client's ``base_url`` (never its API key), with the other
    settings given."""
    client = value["client"]
    if not is_openai_client(client):
        raise ArgumentError(
            f"{argument}: 'client' must be an openai.OpenAI or openai.AsyncOpenAI client,"
            f" not {type(client).__name__}"
        )
    model = value.get("model")
    if not isinstance(model, str) or not model:
        raise ArgumentError(
            f"{argument}: give the client's model name too:"
            f" {argument}={{'client': client, 'model': 'gpt-4.1-mini'}}"
        )
    taken = sorted(set(value) & {"base_url", "api_key", "api_key_env"})
    if taken:
        raise ArgumentError(f"{argument}: {taken[0]} comes from the client; leave it out")
    settings = {key: item for key, item in value.items() if key not in ("client", "model")}
    base_url = str(client.base_url).rstrip("/")
    return {"model": f"openai/{model.removeprefix('openai/')}", "base_url": base_url, **settings}


def _client_lm(client: Any, config: LMConfig) -> LM:
    """An LM calling ``config``'s model through ``client``'s endpoint, key and headers,
    with the settings ``lm.config.build_base_lm`` gives an ``openai/`` model."""
    from emery.lm.openai_compat import OpenAICompatibleLM  # openai is slow to import
    from emery.lm.retry import RetryPolicy

    return OpenAICompatibleLM(
        config.model.removeprefix("openai/"),
        client=client,
        concurrency=config.concurrency,
        timeout_s=config.timeout_s,
        retry=RetryPolicy(max_attempts=config.max_attempts, max_wait_s=config.max_wait_s),
        requests_per_minute=config.requests_per_minute,
        tokens_per_minute=config.tokens_per_minute,
    )


def _lm_section(value: LMArg, argument: str) -> tuple[dict[str, Any] | None, Any]:
    """(the ``[lm.<role>]`` section, the object passed in-process: an LM, an ``openai``
    client to build one from once the config is read, or None)."""
    if value is None:
        return None, None
    if isinstance(value, str):
        return {"model": value}, None
    if isinstance(value, LMConfig):
        return value.model_dump(mode="json", exclude_defaults=True), None
    if isinstance(value, Mapping):
        if "client" in value:
            return _client_section(value, argument), value["client"]
        return dict(value), None
    if is_openai_client(value):
        raise ArgumentError(
            f"{argument}: pass an OpenAI client with its model name:"
            f" {argument}={{'client': client, 'model': 'gpt-4.1-mini'}}"
        )
    return {"model": f"python/{type(value).__module__}:{type(value).__qualname__}"}, value


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
        inputs.verifier = verifier_object(verifier)
    return None


def verifier_object(verifier: Verifier | Callable[..., Any]) -> Verifier:
    """``verifier`` as a Verifier: a metric function is wrapped in ``FunctionMetric``."""
    if isinstance(verifier, Verifier):
        return verifier
    if callable(verifier):
        return FunctionMetric(verifier)
    raise ArgumentError(
        "verifier: give a verifier kind, a [verifier] dict, a Verifier or a metric function"
        f" (example, output) -> score, not {type(verifier).__name__}"
    )


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
    task_section, task_object = _lm_section(lm, "lm")
    reflection_section, reflection_object = _lm_section(reflection_lm, "reflection_lm")
    sections = {
        "task": task_section,
        "reflection": reflection_section,
        "proposer": reflection_section,
    }
    data["lm"] = {role: section for role, section in sections.items() if section is not None}
    if settings:
        data["algorithm"] = {algorithm: dict(settings)}
    if runtime:
        data["runtime"] = dict(runtime)
    if tracking:
        data["tracking"] = dict(tracking)
    config = parse_config(data, "emery.optimize")
    lms: dict[str, LM] = {}
    for role, given in (("task", task_object), ("reflection", reflection_object)):
        if is_openai_client(given):
            lms[role] = _client_lm(given, config.lm.for_role(role))
        elif given is not None:
            lms[role] = given
    if "reflection" in lms:
        lms["proposer"] = lms["reflection"]
    if lms:
        inputs.lms = lms
    return config, data, inputs
