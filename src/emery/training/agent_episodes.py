"""An RL job's episodes of an agent: groups of rollouts per example, read back as training rows.

``AgentEpisodes`` is the ``RolloutSource`` of an RL job whose system is not a single-stage
prompt program (a function agent, a task app, a code harness, a workflow). Step ``s`` draws
``prompts_per_step`` examples of the ``[rl]`` splits (seeded by the job's seed and the
step) and runs ``num_generations`` episodes of each (``agent_policy.episode_example``:
``<example>@<step>.<n>``) through the ``Evaluator``, sampled from the local task model with
the policy after step ``s - 1`` applied as its llama.cpp LoRA (``<run dir>/policy-<s>.gguf``),
each call sampled at the ``[rl]`` temperature and cut at ``max_completion_length`` tokens
whatever the agent asks (``SamplingLM``: an agent asking for temperature 0 would make every
episode of a group the same, and the tokens are the training rows' length), its tokens
recorded (``record_tokens``), never cached.

Where: in this process by default (``executor`` None: the step's model is loaded here);
given the job's executor (``runners``, ``ray``, a plugin), the episodes run there, and the
worker samples each call from the policy its episode's step names (``agent_policy.
episode_lm``, rebuilt from the job's stored config). Either way the rollouts and their
spans are stored under the job; each episode's last attempt is read back from the store
and turned into ``CreditedCall`` rows by ``tracing.trajectories.credited_calls``: the group
is the example, the episode's reward its score (the verifier's, or the agent's own),
shared by the credit policy.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from emery.config.resolve import resolve_lm
from emery.config.schema import RLSection
from emery.core.errors import EmeryError
from emery.core.models import Candidate, ChatMessage, Example
from emery.core.trajectories import CreditedCall
from emery.evaluation.evaluator import Evaluator
from emery.evaluation.executor import Executor
from emery.lm.base import LM, Completion
from emery.lm.catalog import installed_path
from emery.lm.config import LMConfig
from emery.store.protocol import Store
from emery.systems.base import System
from emery.tracing.store_recorder import StoreRecorder, load_spans
from emery.tracing.trajectories import (
    AgentNamed,
    Credit,
    Selection,
    agents_in,
    credited_calls,
    every_call,
    same,
)
from emery.training.agent_policy import (
    SamplingLM,
    episode_example,
    parse_episode,
    policy_gguf,
    sampled_config,
    step_model,
)
from emery.training.gguf_adapter import write_gguf_adapter
from emery.verifiers.base import Verifier

PolicyModel = Callable[[Path | None, int], LM]
"""(the peft policy adapter or None, the step) → the model that samples the step's episodes."""


class AgentEpisodes:
    """Episodes of ``system`` under ``candidate`` on ``examples``, scored by ``verifier``,
    sampled from the local model of ``lm`` (see the module docstring)."""

    def __init__(
        self,
        *,
        system: System,
        candidate: Candidate,
        verifier: Verifier,
        examples: Sequence[Example],
        lm: LMConfig,
        settings: RLSection,
        store: Store,
        job_id: str,
        run_dir: Path,
        seed: int,
        concurrency: int = 8,
        executor: Executor | None = None,
        credit: Credit = same,
        select: Selection = every_call,
        model: PolicyModel | None = None,
    ) -> None:
        if not examples:
            raise EmeryError("an rl job needs examples to run its episodes on")
        self.system = system
        self.candidate = candidate
        self.verifier = verifier
        self.examples = list(examples)
        self.base = lm.model.removeprefix("local/")
        self.lm = sampled_config(lm, settings)
        self.settings = settings
        self.store = store
        self.job_id = job_id
        self.run_dir = run_dir
        self.seed = seed
        self.concurrency = concurrency
        self.executor = executor
        self.credit = credit
        self.select = select
        self.model: PolicyModel = model or self.local_model

    def draw(self, step: int) -> list[Example]:
        """The examples of step ``step``: the same for a step in every run of the job."""
        rng = random.Random(f"{self.seed}:{step}")
        return rng.sample(self.examples, min(self.settings.prompts_per_step, len(self.examples)))

    def batch(self, step: int) -> list[Example]:
        """Step ``step``'s episodes: ``num_generations`` of each drawn example, in order."""
        return [
            episode_example(example, step, n)
            for example in self.draw(step)
            for n in range(self.settings.num_generations)
        ]

    def rows(self, step: int, policy: Path | None) -> list[CreditedCall]:
        """The credited calls of step ``step``'s episodes, sampled with ``policy``."""
        if self.executor is not None:
            self.write_policy(step, policy)
            return asyncio.run(self._episodes(step, EpisodesElsewhere(self.lm.model)))
        model = self.model(policy, step)
        try:
            return asyncio.run(self._episodes(step, model))
        finally:
            close = getattr(model, "close", None)
            if close is not None:
                close()

    def write_policy(self, step: int, policy: Path | None) -> Path | None:
        """``policy`` as step ``step``'s llama.cpp LoRA (``policy_gguf``; older steps'
        removed); None at step 1 (no policy: the base model)."""
        if policy is None:
            return None
        lora = policy_gguf(self.run_dir, step)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        partial = lora.with_name(lora.name + ".partial")
        write_gguf_adapter(policy, installed_path(self.base), partial)
        partial.replace(lora)  # a worker never reads half a file
        for old in self.run_dir.glob("policy-*.gguf"):
            if old != lora:
                old.unlink(missing_ok=True)
        return lora

    def local_model(self, policy: Path | None, step: int) -> LM:
        """The local task model with ``policy`` as its llama.cpp LoRA (written as GGUF),
        its sampling seeded by the job's seed and the step."""
        return step_model(self.lm, self.seed, step, self.write_policy(step, policy))

    async def _episodes(self, step: int, model: LM) -> list[CreditedCall]:
        sampled = SamplingLM(
            model,
            temperature=self.settings.temperature,
            max_tokens=self.settings.max_completion_length,
        )
        lm = resolve_lm(self.lm, base=sampled)
        recorder = StoreRecorder(self.store, self.job_id)
        evaluator = Evaluator(
            self.system,
            self.verifier,
            lm,
            concurrency=self.concurrency,
            recorder=recorder,
            job_id=self.job_id,
            executor=self.executor,
        )
        try:
            result = await evaluator.evaluate(self.candidate, self.batch(step), "train")
        finally:
            recorder.flush()
        failed = [episode.error for episode in result.results if episode.error is not None]
        if result.results and len(failed) == len(result.results):
            raise EmeryError(
                f"every one of step {step}'s {len(failed)} episodes failed; the first:"
                f" {failed[0].splitlines()[0] if failed[0] else 'no reason given'}"
            )
        rows: list[CreditedCall] = []
        agents: set[str] = set()
        for episode in result.results:
            if episode.rollout_id is None:
                continue
            attempts = self.store.list_attempts(episode.rollout_id)
            if not attempts:
                continue
            spans = load_spans(self.store, episode.rollout_id, attempts[-1].id)
            agents |= agents_in(spans)
            parsed = parse_episode(episode.example_id)
            rows += credited_calls(
                spans,
                group_id=episode.example_id if parsed is None else parsed[0],
                reward=episode.score,
                credit=self.credit,
                select=self.select,
            )
        if not rows and isinstance(self.select, AgentNamed):
            seen = ", ".join(sorted(agents)) or "none named"
            raise EmeryError(
                f"no LM call of step {step}'s {len(result.results)} episodes was made by"
                f" agent {self.select.name!r} (rl.agent; agents seen: {seen})"
            )
        unrecorded = sum(1 for row in rows if not row.completion_token_ids)
        if unrecorded == len(rows) and rows:
            raise EmeryError(
                f"none of the {len(rows)} LM calls of step {step} recorded its tokens:"
                " does the agent call the job's task model (the LM it is given, or the LM proxy)?"
            )
        return rows


class EpisodesElsewhere:
    """The job process's task model while its episodes run on its executor: never asked
    (the workers sample from the policy themselves, ``agent_policy.episode_lm``)."""

    def __init__(self, model: str) -> None:
        self._model = model

    @property
    def model(self) -> str:
        return self._model

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        raise EmeryError("this job's agent episodes run on its executor, not in this process")
