"""An RL job's episodes of an agent: groups of rollouts per example, read back as training rows.

``AgentEpisodes`` is the ``RolloutSource`` of an RL job whose system is not a single-stage
prompt program (a function agent, a task app, a code harness, a workflow). Step ``s`` draws
``prompts_per_step`` examples of the ``[rl]`` splits (seeded by the job's seed and the
step) and runs ``num_generations`` episodes of each through the ``Evaluator`` (its
executor; in this process by default) on the local task model with the policy after step
``s - 1`` applied as its llama.cpp LoRA (written as GGUF), each call sampled at the
``[rl]`` temperature and cut at ``max_completion_length`` tokens whatever the agent asks
(``SamplingLM``: an agent asking for temperature 0 would make every episode of a group the
same, and the tokens are the training rows' length), its tokens recorded
(``record_tokens``), never cached. The rollouts and their spans are stored under the job;
each episode's last attempt is read back from the store and turned into ``CreditedCall``
rows by ``tracing.trajectories.credited_calls``: the group is the example, the episode's
reward its score (the verifier's, or the agent's own), shared by the credit policy.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from emery.config.schema import RLSection
from emery.core.errors import EmeryError
from emery.core.models import Candidate, ChatMessage, Example
from emery.core.trajectories import CreditedCall
from emery.evaluation.evaluator import Evaluator
from emery.evaluation.executor import Executor
from emery.lm.base import LM, Completion
from emery.lm.catalog import installed_path
from emery.lm.config import LMConfig, build_lm
from emery.lm.local import LocalLM
from emery.lm.usage import UsageMeter
from emery.lm.wrapper import LMWrapper
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
from emery.training.gguf_adapter import write_gguf_adapter
from emery.verifiers.base import Verifier

POLICY_GGUF = "policy.gguf"

PolicyModel = Callable[[Path | None, int], LM]
"""(the peft policy adapter or None, the step) → the model that samples the step's episodes."""


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
        self.lm = lm.model_copy(
            update={
                "model": f"local/{self.base}",
                "record_tokens": True,
                "cache": False,
                "temperature": settings.temperature,
                "max_tokens": settings.max_completion_length,
            }
        )
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

    def rows(self, step: int, policy: Path | None) -> list[CreditedCall]:
        """The credited calls of step ``step``'s episodes, sampled with ``policy``."""
        model = self.model(policy, step)
        try:
            return asyncio.run(self._episodes(step, model))
        finally:
            close = getattr(model, "close", None)
            if close is not None:
                close()

    def local_model(self, policy: Path | None, step: int) -> LM:
        """The local task model with ``policy`` as its llama.cpp LoRA (written as GGUF),
        its sampling seeded by the job's seed and the step."""
        lora = None
        if policy is not None:
            lora = self.run_dir / POLICY_GGUF
            write_gguf_adapter(policy, installed_path(self.base), lora)
        return LocalLM(
            installed_path(self.base),
            model=self.lm.model,
            n_ctx=self.lm.n_ctx,
            n_parallel=self.lm.n_parallel,
            n_threads=self.lm.n_threads,
            prefix_reuse=self.lm.prefix_reuse,
            seed=self.seed * 10_007 + step,
            lora_path=lora,
        )

    async def _episodes(self, step: int, model: LM) -> list[CreditedCall]:
        sampled = SamplingLM(
            model,
            temperature=self.settings.temperature,
            max_tokens=self.settings.max_completion_length,
        )
        lm = build_lm(self.lm, role="task", meter=UsageMeter(), cache=None, base=sampled)
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
        batch = [e for e in self.draw(step) for _ in range(self.settings.num_generations)]
        try:
            result = await evaluator.evaluate(self.candidate, batch, "train")
        finally:
            recorder.flush()
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
            rows += credited_calls(
                spans,
                group_id=episode.example_id,
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
