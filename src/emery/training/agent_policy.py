"""The policy an agent RL episode samples from, wherever the episode runs.

An episode is a rollout of the job on an ``Example`` whose id names its example, the step
and its number in the group: ``<example id>@<step>.<n>`` (``episode_example``; read back by
``parse_episode``). Step ``s``'s policy is the peft adapter after step ``s - 1`` written as
a llama.cpp LoRA to ``<run dir>/policy-<s>.gguf`` (``policy_gguf``; none at step 1: the
base model) before any of its episodes runs, so a process that runs episodes elsewhere (an
``emery runner`` on the same machine or a shared disk, a Ray worker) samples from it as the
training process does: ``episode_lm`` is the task model such a worker runs a job's episodes
with, each call answered by the model of the step its episode names (``StepPolicyLM``),
sampled at the ``[rl]`` temperature and cut at ``max_completion_length`` (``SamplingLM``),
its tokens recorded, never cached. A step's local model is seeded by the job's seed and
the step (``step_model``), in whichever process runs it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from emery.config.resolve import resolve_lm, resolve_local_lm
from emery.config.schema import JobConfig, RLSection
from emery.core.errors import EmeryError
from emery.core.models import ChatMessage, Example
from emery.lm.base import LM, Completion
from emery.lm.config import LMConfig
from emery.lm.wrapper import LMWrapper
from emery.tracing.scope import current_scope
from emery.training.paths import run_dir

_EPISODE = re.compile(r"^(?P<example>.+)@(?P<step>[0-9]+)\.(?P<n>[0-9]+)$")
KEPT_MODELS = 2
"""Step models a worker keeps loaded (the step running and the one before it)."""


def episode_example(example: Example, step: int, n: int) -> Example:
    """Episode ``n`` of ``example`` at step ``step``: the example under its episode id."""
    return example.model_copy(update={"id": f"{example.id}@{step}.{n}"})


def parse_episode(example_id: str) -> tuple[str, int, int] | None:
    """(example id, step, episode number) of an episode id; None for any other id."""
    found = _EPISODE.match(example_id)
    if found is None:
        return None
    return found["example"], int(found["step"]), int(found["n"])


def episode_of(
    examples: Mapping[tuple[str, str], Example], split: str, example_id: str
) -> Example | None:
    """The episode ``example_id`` names, of an example of ``examples`` ((split, id) → example)."""
    parsed = parse_episode(example_id)
    if parsed is None:
        return None
    example = examples.get((split, parsed[0]))
    return None if example is None else episode_example(example, parsed[1], parsed[2])


def policy_gguf(folder: Path, step: int) -> Path:
    """Where step ``step``'s policy is written as a llama.cpp LoRA in the run folder."""
    return folder / f"policy-{step}.gguf"


def sampled_config(lm: LMConfig, settings: RLSection) -> LMConfig:
    """``[lm.task]`` as the episodes call it: the local model, its tokens recorded, never
    cached, at the ``[rl]`` temperature and length."""
    base = lm.model.removeprefix("local/")
    return lm.model_copy(
        update={
            "model": f"local/{base}",
            "record_tokens": True,
            "cache": False,
            "temperature": settings.temperature,
            "max_tokens": settings.max_completion_length,
        }
    )


def step_model(lm: LMConfig, seed: int, step: int, lora: Path | None) -> LM:
    """The local model of ``lm`` (a ``sampled_config``) with ``lora`` applied, its sampling
    seeded by the job's seed and the step."""
    return resolve_local_lm(lm, lora=lora, seed=seed * 10_007 + step)


class SamplingLM(LMWrapper):
    """``inner`` sampled at ``temperature``, each reply cut at ``max_tokens`` tokens."""

    def __init__(self, inner: LM, *, temperature: float, max_tokens: int) -> None:
        super().__init__(inner)
        self.temperature = temperature
        self.max_tokens = max_tokens

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        asked = params.get("max_tokens")
        params["max_tokens"] = self.max_tokens if asked is None else min(asked, self.max_tokens)
        params["temperature"] = self.temperature
        return await self.inner.complete(messages, **params)


StepModel = Callable[[int], LM]
"""step → the model that samples its episodes."""


class StepPolicyLM:
    """Answers each call with the model of the step the calling episode names (its
    rollout's example id), built by ``build`` on the step's first call; the newest
    ``KEPT_MODELS`` stay loaded. A call outside an episode is an ``EmeryError``."""

    def __init__(self, build: StepModel, *, model: str) -> None:
        self.build = build
        self._model = model
        self._models: dict[int, LM] = {}

    @property
    def model(self) -> str:
        return self._model

    def for_step(self, step: int) -> LM:
        """The model of step ``step`` (built, and older ones closed, on first use)."""
        found = self._models.get(step)
        if found is None:
            found = self._models[step] = self.build(step)
            for old in sorted(self._models)[:-KEPT_MODELS]:
                _close(self._models.pop(old))
        return found

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        scope = current_scope()
        parsed = None if scope is None else parse_episode(scope.rollout.example_id or "")
        if parsed is None:
            raise EmeryError("an agent RL job's task model answers its episodes only")
        return await self.for_step(parsed[1]).complete(messages, **params)

    def close(self) -> None:
        for model in self._models.values():
            _close(model)
        self._models.clear()


def _close(model: LM) -> None:
    close = getattr(model, "close", None)
    if close is not None:
        close()


def episode_lm(
    config: JobConfig, base_dir: Path, job_id: str, *, build: StepModel | None = None
) -> LM:
    """The task model a worker runs agent RL job ``job_id``'s episodes with: each call
    sampled from the policy of its episode's step, read from the job's run folder (which
    the worker must see); ``build`` replaces ``step_model`` (a scripted model, in tests)."""
    settings = config.rl
    if settings is None:
        raise EmeryError(f"job {job_id} has no [rl] section: it runs no agent episodes")
    lm = sampled_config(config.lm.task, settings)
    folder = run_dir(base_dir, config, job_id)

    def model(step: int) -> LM:
        lora = None if step == 1 else policy_gguf(folder, step)
        if lora is not None and not lora.is_file():
            raise EmeryError(
                f"step {step}'s policy {lora} is not here: a worker running an agent RL"
                " job's episodes must see the job's workdir (the same machine or a shared disk)"
            )
        if build is not None:
            return build(step)
        return step_model(lm, config.job.seed, step, lora)

    policy = StepPolicyLM(model, model=lm.model)
    sampled = SamplingLM(
        policy, temperature=settings.temperature, max_tokens=settings.max_completion_length
    )
    return resolve_lm(lm, base=sampled)
