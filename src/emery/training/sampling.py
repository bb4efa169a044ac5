"""Rejection sampling for an SFT job (``[sft] samples_per_example``): the chats the source
job's candidate earns when it is run again on the training examples.

Before training, the candidate the SFT job takes from its ``source_job`` (``candidate``:
"best" or an id) is run ``samples_per_example`` times on every example of the ``[sft]``
splits, through the job's system, verifier and ``Evaluator``, sampled by the teacher
(``[sft] teacher``, default ``[lm.task]``) at ``sample_temperature``. Sample ``n`` of an
example is the example under the id ``<id>@sample<n>``; each call's sampling seed is a
pure function of the job's seed, ``n`` and the messages (``SeededSampling``), so a round
run again gives the same replies. Round ``n`` (every example once) is stored in one
transaction: its evaluations (scope ``sft-samples:<job id>``, never reused by a search)
with an ``sft_samples`` event (its rollouts, kept replies and tokens); its rollouts and
spans are stored under the SFT job as they run. A resumed job runs only the rounds not
stored (a pause is taken between rounds; a round cut by a kill is run again, its cut
rollouts left unfinished; a round whose every rollout failed is an error, not stored), and
every run reads the kept chats back from the store: the replies scoring at least
``min_score``, without repeats, which join the source job's stored chats.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from emery.config.evaluation_scope import example_hash
from emery.config.resolve import resolve_job, resolve_lm
from emery.config.schema import JobConfig
from emery.core.errors import ConfigError, EmeryError
from emery.core.events import Event
from emery.core.hashing import call_seed
from emery.core.models import Candidate, ChatMessage
from emery.core.rollouts import RolloutConfig
from emery.evaluation.evaluator import Evaluator
from emery.lm.base import Completion
from emery.lm.config import LMConfig
from emery.lm.wrapper import LMWrapper
from emery.store.protocol import Store
from emery.store.records import EvaluationFilter, EvaluationRecord, StepWrite
from emery.tracing.export import chosen_candidates
from emery.tracing.store_recorder import StoreRecorder
from emery.training.data import Conversation, SampledData, distinct, record_conversations
from emery.training.events import SftSamples
from emery.training.source import source_prompt
from emery.training.trainer import TrainingHooks

MARK = "@sample"


def sample_id(example_id: str, n: int) -> str:
    """The id of sample ``n`` of example ``example_id``."""
    return f"{example_id}{MARK}{n}"


def sampled_example_id(example_id: str) -> str:
    """The example a sample's id names."""
    return example_id.rsplit(MARK, 1)[0]


def sample_scope(job_id: str) -> str:
    """The evaluation scope of an SFT job's sampled rollouts (its own: never reused)."""
    return f"sft-samples:{job_id}"


def teacher_config(config: JobConfig) -> LMConfig:
    """The model that samples: ``[sft] teacher`` with ``[lm.task]``'s other settings,
    else ``[lm.task]``."""
    assert config.sft is not None
    teacher = config.sft.teacher
    if teacher is None:
        return config.lm.task
    return config.lm.task.model_copy(update={"model": teacher})


class SeededSampling(LMWrapper):
    """``inner`` at ``temperature``, each call seeded by ``seed`` and its messages."""

    def __init__(self, inner: Any, *, temperature: float, seed: int) -> None:
        super().__init__(inner)
        self.temperature = temperature
        self.seed = seed

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        params["temperature"] = self.temperature
        params["seed"] = call_seed(self.seed, [dict(m) for m in messages])
        return await self.inner.complete(messages, **params)


class RejectionSampler:
    """The sampling of SFT job ``job_id`` of ``config`` (see the module docstring)."""

    def __init__(self, store: Store, config: JobConfig, base_dir: Path, job_id: str) -> None:
        assert config.sft is not None
        self.store = store
        self.config = config
        self.settings = config.sft
        self.job_id = job_id
        resolved = resolve_job(config, base_dir)
        dataset, self.system, self.verifier = resolved.dataset, resolved.system, resolved.verifier
        self.examples = {split: list(dataset.split(split)) for split in self.settings.splits}
        self.teacher = teacher_config(config)

    def candidate(self) -> Candidate:
        """The source job's candidate named by ``[sft] candidate`` (checked against this
        job's system, ``training.source``)."""
        best = source_prompt(self.store, self.config, self.system.seed_candidate())
        assert best is not None
        source = self.store.get_job(self.store.resolve_job_id(self.settings.source_job or ""))
        chosen = chosen_candidates(self.store, source, self.settings.candidate) or [best.id]
        return self.store.get_candidate(source.id, chosen[0])

    def done(self) -> set[int]:
        """The rounds already stored."""
        rounds = self.store.list_events(self.job_id, kinds=[SftSamples.kind])
        return {item.payload_as(SftSamples).round for item in rounds}

    def run(self, hooks: TrainingHooks) -> str | None:
        """Run and store the rounds not stored yet; the stop request that cut them, if any."""
        total = sum(len(examples) for examples in self.examples.values())
        if not total:
            raise ConfigError(
                f"the dataset has no examples on {'/'.join(self.settings.splits)}:"
                " nothing for sft.samples_per_example to sample"
            )
        done = self.done()
        candidate = None
        for n in range(1, self.settings.samples_per_example + 1):
            if n in done:
                continue
            if (action := hooks.requested()) is not None:
                return action
            candidate = candidate or self.candidate()
            stored = self._store_round(n, asyncio.run(self._round(candidate, n)))
            if hooks.on_events is not None:
                hooks.on_events(stored)
        return None

    async def _round(self, candidate: Candidate, n: int) -> list[EvaluationRecord]:
        """Round ``n``: every example once, as evaluation records of this job."""
        seed = call_seed(self.config.job.seed, n)
        lm = resolve_lm(
            self.teacher,
            wrap=lambda model: SeededSampling(
                model, temperature=self.settings.sample_temperature, seed=seed
            ),
        )
        recorder = StoreRecorder(self.store, self.job_id)
        evaluator = Evaluator(
            self.system,
            self.verifier,
            lm,
            concurrency=self.config.runtime.concurrency,
            rollouts=RolloutConfig.from_runtime(self.config.runtime),
            recorder=recorder,
            job_id=self.job_id,
        )
        records = []
        try:
            for split, examples in self.examples.items():
                samples = [e.model_copy(update={"id": sample_id(e.id, n)}) for e in examples]
                result = await evaluator.evaluate(candidate, samples, split)
                hashes = {sample_id(e.id, n): example_hash(e) for e in examples}
                records += [
                    EvaluationRecord(
                        scope=sample_scope(self.job_id),
                        example_hash=hashes[r.example_id],
                        job_id=self.job_id,
                        rollout_id=r.rollout_id,
                        result=r,
                    )
                    for r in result.results
                ]
        finally:
            recorder.flush()
        failed = [r.result.error for r in records if r.result.error is not None]
        if records and len(failed) == len(records):
            first = (failed[0] or "no reason given").splitlines()[0]
            raise EmeryError(
                f"every one of sampling round {n}'s {len(records)} rollouts failed"
                f" ({self.teacher.model}); the first: {first}"
            )
        return records

    def _store_round(self, n: int, records: list[EvaluationRecord]) -> list[Event]:
        """Round ``n``'s evaluations and its event, in one transaction."""
        kept = sum(1 for r in records if self._kept(r))
        tokens = sum(r.result.usage.total_tokens for r in records)
        note = Event.of(SftSamples(round=n, rollouts=len(records), kept=kept, tokens=tokens))
        return self.store.commit_step(self.job_id, StepWrite(evaluations=records, events=[note]))

    def _kept(self, record: EvaluationRecord) -> bool:
        result = record.result
        return result.error is None and result.score >= self.settings.min_score

    def kept(self) -> tuple[list[Conversation], SampledData]:
        """The stored rounds' kept chats (distinct, in round and example order) and what
        they are."""
        records = self.store.list_evaluations(
            EvaluationFilter(scope=sample_scope(self.job_id)), limit=None
        ).items
        chats: list[Conversation] = []
        examples: set[tuple[str, str]] = set()
        for record in records:
            if not self._kept(record):
                continue
            found = record_conversations(self.store, record, record.rollout_id or "")
            if found:
                chats += found
                result = record.result
                examples.add((result.split or "", sampled_example_id(result.example_id)))
        rounds = self.store.list_events(self.job_id, kinds=[SftSamples.kind])
        summary = SampledData(
            model=self.teacher.model,
            samples_per_example=self.settings.samples_per_example,
            temperature=self.settings.sample_temperature,
            examples=sum(len(e) for e in self.examples.values()),
            rollouts=len(records),
            kept=len(distinct(chats)),
            examples_kept=len(examples),
            tokens=sum(e.payload_as(SftSamples).tokens for e in rounds),
        )
        return distinct(chats), summary
