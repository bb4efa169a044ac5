"""Rejection sampling for SFT (``[sft] samples_per_example``, ``training/sampling.py``): the
source job's best prompt is run N times per train example by a scripted model that is right
on some samples; the job trains on exactly the verified replies (plus the stored chats),
stores the sampled rollouts under itself, says how many examples yielded one, takes a
named teacher's replies, keeps today's data with N = 0, and a resumed job does not sample
the rounds it stored again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import training_support as ts
from test_gepa_support import FORMAT_RULE, task_lm
from test_training_source import SIZES, _data, _training

from emery.config import resolve
from emery.config.schema import JobConfig
from emery.core.errors import ConfigError
from emery.core.models import ChatMessage
from emery.data.tasks import builtin_task
from emery.jobs import training_engine
from emery.jobs.kinds import kind_of
from emery.jobs.manage import create_job, run_job
from emery.lm.base import Completion, TokenUsage
from emery.sdk.arguments import optimize_config
from emery.store import MemoryStore
from emery.store.records import RolloutFilter
from emery.systems.prompt_program import PromptProgram
from emery.training import job as sft_job
from emery.training.data import Conversation, distinct, stored_conversations
from emery.training.events import SftSamples, SftSamplesKept
from emery.training.trainer import TrainingHooks, TrainingStats

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")

TASK = "local/smollm2-135m"
TEACHER = "local/qwen2.5-coder-0.5b"


class SeedScripted:
    """Answers each question right when its sampling seed is even (``right_every`` 1:
    always; 0: never), each reply marked with its model and seed; records every call."""

    def __init__(self, model: str, right_every: int = 2) -> None:
        self.model = model
        self.right_every = right_every
        self.gold = {e.input["question"]: int(e.expected) for e in _data()}
        self.calls: list[dict[str, Any]] = []
        self.right: list[str] = []

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        question = next(q for q in self.gold if q in messages[-1]["content"])
        seed = int(params["seed"])
        right = bool(self.right_every) and seed % self.right_every == 0
        answer = self.gold[question] + (0 if right else 1)
        mark = "".join(chr(97 + int(d)) for d in str(seed))  # no digits: one number per reply
        text = f"{self.model.split('/')[1]} try {mark}.\nAnswer: {answer}"
        self.calls.append({"seed": seed, "temperature": params["temperature"], "text": text})
        if right:
            self.right.append(text)
        return Completion(text=text, usage=TokenUsage(prompt_tokens=10, completion_tokens=5))


class Models:
    """``build_base_lm`` for the sampling (``resolve_lm``'s ``wrap`` path): one
    ``SeedScripted`` per model name."""

    def __init__(self, **right_every: int) -> None:
        self.models = {
            name: SeedScripted(name, right_every.get(name.split("/")[1][:4], 2))
            for name in (TASK, TEACHER)
        }

    def __call__(self, settings: Any) -> SeedScripted:
        return self.models[settings.model]


class Trained:
    """``train`` of the SFT job: records the chats it is given, writes an adapter."""

    def __init__(self) -> None:
        self.train_sets: list[list[Conversation]] = []

    def __call__(
        self,
        model: str,
        settings: Any,
        train_set: list[Conversation],
        val_set: Any,
        run_dir: Path,
        **_: Any,
    ) -> tuple[TrainingStats, Path]:
        self.train_sets.append(train_set)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "adapter").write_text("adapter")
        stats = ts._stats(settings.max_steps, 1, None)
        return stats.model_copy(update={"train_examples": len(train_set)}), run_dir / "adapter"


@pytest.fixture
def trained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Trained:
    """The real SFT kind with a recording trainer, its models counted as installed."""
    trainer = Trained()
    monkeypatch.setattr(sft_job, "train", trainer)
    monkeypatch.setattr(sft_job, "installed_path", lambda name: tmp_path / f"{name}.gguf")
    monkeypatch.setattr(sft_job, "local_model_path", lambda name: tmp_path / f"{name}.gguf")
    monkeypatch.setattr(training_engine, "installed_path", lambda name: tmp_path / name)
    monkeypatch.setattr(training_engine, "write_gguf_adapter", lambda adapter, base, target: 1)
    monkeypatch.setenv("EMERY_ADAPTER_DIR", str(tmp_path / "adapters"))
    return trainer


def _source(store: MemoryStore, tmp_path: Path, instruction: str = FORMAT_RULE) -> str:
    """A finished baseline prompt job on the built-in word problems (its seed, saying
    ``instruction``, is its best candidate, scored on val by the scripted task model)."""
    program = builtin_task("word_problems").program
    stage = program.stages[0].model_copy(update={"instruction": instruction})
    config, given, inputs = optimize_config(
        system=PromptProgram(program.model_copy(update={"stages": [stage]})),
        dataset=_data(),
        algorithm="baseline",
        budget=SIZES["n_val"],
        verifier="numeric",
        lm=task_lm(_data()),
        reflection_lm=None,
        seed=0,
        settings=None,
        runtime={"workdir": str(tmp_path / ".emery")},
        name="stage1",
        workdir=tmp_path / ".emery",
    )
    record = create_job(store, config, given=given, inputs=inputs, name="stage1")
    assert run_job(store, record.id, inputs=inputs).state == "succeeded"
    return record.id


def _config(source: str, **sft: Any) -> JobConfig:
    settings = {"splits": ["train"], "min_score": 1.0, "val_fraction": 0.0, "evaluate": False}
    return _training("sft", source, **(settings | sft))


def _marked(chats: list[Conversation]) -> list[str]:
    """The sampled replies among ``chats`` (those a ``SeedScripted`` wrote)."""
    return [c[-1]["content"] for c in chats if " try " in c[-1]["content"]]


def test_the_kept_chats_are_exactly_the_verified_samples(
    trained: Trained, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = Models()
    monkeypatch.setattr(resolve, "build_base_lm", models)
    store = MemoryStore()
    source = _source(store, tmp_path)
    config = _config(source, samples_per_example=3, sample_temperature=0.9)
    job = create_job(store, config, base_dir=tmp_path)
    heard: list[str] = []
    done = run_job(store, job.id, on_event=lambda events: heard.extend(e.kind for e in events))
    assert done.state == "succeeded", done.error
    task = models.models[TASK]
    n_train = len(_data().train)
    assert len(task.calls) == 3 * n_train
    assert {c["temperature"] for c in task.calls} == {0.9}
    assert 0 < len(task.right) < len(task.calls)  # right on some samples only
    [chats] = trained.train_sets
    assert sorted(_marked(chats)) == sorted(set(task.right))
    stored = distinct(
        stored_conversations(store, source, candidate="best", splits=("train",), min_score=1.0)
    )
    assert [c for c in chats if not _marked([c])] == stored
    rollouts = store.list_rollouts(RolloutFilter(job_id=job.id), limit=None).items
    assert len(rollouts) == 3 * n_train
    assert heard.count(SftSamples.kind) == 3
    [kept] = store.list_events(job.id, kinds=[SftSamplesKept.kind])
    right_questions = {
        c["content"] for chat in chats if _marked([chat]) for c in chat if c["role"] == "user"
    }
    assert kept.data["examples_kept"] == len(right_questions)
    assert kept.data["kept"] == len(set(task.right))
    assert kept.data["tokens"] == 15 * 3 * n_train
    report = sft_job.SFTResult.model_validate(store.get_job(job.id).result).report()
    assert f"kept from {len(right_questions)} of {n_train} examples" in report


def test_no_samples_keeps_the_stored_rollouts_only(
    trained: Trained, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = Models()
    monkeypatch.setattr(resolve, "build_base_lm", models)
    store = MemoryStore()
    source = _source(store, tmp_path)
    job = create_job(
        store, _config(source, splits=["train", "val"], min_score=0.0), base_dir=tmp_path
    )
    assert run_job(store, job.id).state == "succeeded"
    [chats] = trained.train_sets
    stored = stored_conversations(
        store, source, candidate="best", splits=("train", "val"), min_score=0.0
    )
    assert sorted(map(str, chats)) == sorted(map(str, stored))  # shuffled by the hold-out
    assert all(not m.calls for m in models.models.values())
    assert store.get_job(job.id).result["training"]["sampled"] is None


def test_a_named_teacher_samples_the_replies(
    trained: Trained, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = Models(qwen=1, smol=0)  # the teacher is always right, the task model never
    monkeypatch.setattr(resolve, "build_base_lm", models)
    store = MemoryStore()
    source = _source(store, tmp_path)
    config = _config(source, samples_per_example=2, teacher=TEACHER)
    job = create_job(store, config, base_dir=tmp_path)
    assert run_job(store, job.id).state == "succeeded"
    assert not models.models[TASK].calls
    teacher = models.models[TEACHER]
    [chats] = trained.train_sets
    assert sorted(_marked(chats)) == sorted(set(teacher.right))
    assert all(reply.startswith("qwen2.5-coder-0.5b try") for reply in _marked(chats))
    sampled = store.get_job(job.id).result["training"]["sampled"]
    assert sampled["model"] == TEACHER
    assert sampled["examples_kept"] == sampled["examples"] == len(_data().train)


def _sampled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pause_after_round: int | None
) -> list[Conversation]:
    """An SFT job's sampled data (3 rounds), paused after ``pause_after_round`` rounds and
    resumed, then read once more; each round is sampled once."""
    models = Models()
    monkeypatch.setattr(resolve, "build_base_lm", models)
    store = MemoryStore()
    config = _config(_source(store, tmp_path), samples_per_example=3)
    job = create_job(store, config, base_dir=tmp_path)
    task = models.models[TASK]
    per_round = len(_data().train)

    def requested() -> str | None:
        paused = pause_after_round and len(task.calls) >= pause_after_round * per_round
        return "pause" if paused else None

    hooks = TrainingHooks(on_loss=print, on_checkpoint=print, requested=requested)
    first = sft_job.sft_data(store, config, tmp_path, job.id, hooks)
    if pause_after_round:
        assert first == "pause"
        assert len(task.calls) == per_round
        hooks.requested = lambda: None
        first = sft_job.sft_data(store, config, tmp_path, job.id, hooks)
    assert len(task.calls) == 3 * per_round  # no round sampled twice
    again = sft_job.sft_data(store, config, tmp_path, job.id, hooks)
    assert len(task.calls) == 3 * per_round
    assert again == first
    assert len(store.list_events(job.id, kinds=[SftSamplesKept.kind])) == 1
    assert not isinstance(first, str)
    return first[0]


def test_a_resumed_job_does_not_sample_its_stored_rounds_again(
    trained: Trained, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _sampled(tmp_path / "whole", monkeypatch, None)
    resumed = _sampled(tmp_path / "resumed", monkeypatch, 1)
    assert resumed == whole  # the resumed job trains on the same chats
    assert _marked(whole)


def test_no_verified_reply_and_no_stored_chat_fails_in_one_line(
    trained: Trained, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resolve, "build_base_lm", Models(smol=0))
    store = MemoryStore()
    source = _source(store, tmp_path, "Say hello.")  # never the Answer format
    config = _config(source, samples_per_example=1)
    job = create_job(store, config, base_dir=tmp_path)
    hooks = TrainingHooks(on_loss=print, on_checkpoint=print, requested=lambda: None)
    with pytest.raises(ConfigError, match=r"^no chat to train on: neither job") as caught:
        sft_job.sft_data(store, config, tmp_path, job.id, hooks)
    assert "\n" not in str(caught.value)


class Broken:
    """A teacher endpoint that refuses every call."""

    model = TASK

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        raise ConnectionError("connection refused")


def test_a_round_whose_every_sample_failed_is_an_error_and_not_stored(
    trained: Trained, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resolve, "build_base_lm", lambda settings: Broken())
    store = MemoryStore()
    config = _config(_source(store, tmp_path), samples_per_example=2).model_copy(deep=True)
    config.runtime.max_attempts = 1
    job = create_job(store, config, base_dir=tmp_path)
    done = run_job(store, job.id)
    assert done.state == "failed"
    assert (done.error or "").startswith(
        f"every one of sampling round 1's {len(_data().train)} rollouts failed ({TASK})"
    )
    assert "\n" not in (done.error or "")
    assert not store.list_events(job.id, kinds=[SftSamples.kind])


def test_a_job_paused_while_sampling_resumes_with_its_next_round(
    trained: Trained, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = Models()
    monkeypatch.setattr(resolve, "build_base_lm", models)
    store = MemoryStore()
    config = _config(_source(store, tmp_path), samples_per_example=3)
    job = create_job(store, config, base_dir=tmp_path)
    engine = kind_of(store.get_job(job.id)).engine(store, job.id)
    task = models.models[TASK]
    per_round = len(_data().train)
    pause_at = per_round + 1  # asked during round 2: taken after it

    class Pausing(SeedScripted):
        async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
            if len(task.calls) + 1 == pause_at:
                engine.request("pause")
            return await task.complete(messages, **params)

    monkeypatch.setattr(resolve, "build_base_lm", lambda settings: Pausing(TASK))
    assert run_job(store, job.id, engine=engine).state == "paused"
    assert len(task.calls) == 2 * per_round
    assert not trained.train_sets
    monkeypatch.setattr(resolve, "build_base_lm", models)
    assert run_job(store, job.id).state == "succeeded"
    assert len(task.calls) == 3 * per_round  # rounds 1 and 2 were not sampled again
    [chats] = trained.train_sets
    assert sorted(_marked(chats)) == sorted(set(task.right))
    rounds = [e.data["round"] for e in store.list_events(job.id, kinds=[SftSamples.kind])]
    assert rounds == [1, 2, 3]


def test_a_teacher_is_any_model_an_lm_section_takes(tmp_path: Path) -> None:
    """A LiteLLM or plug-in provider's model is a teacher as it is an [lm.*] model; one
    that does not import is refused when the job is checked, in one line."""
    store = MemoryStore()
    source = _source(store, tmp_path)
    assert _config(source, samples_per_example=2, teacher="anthropic/claude-x").sft
    with pytest.raises(ValueError, match=r"'gpt-4o' must look like local/<name>"):
        _config(source, samples_per_example=2, teacher="gpt-4o")
    plug_in = _config(source, samples_per_example=2, teacher="no_such_pkg.models:KIND/big")
    with pytest.raises(ConfigError, match=r"^sft\.teacher: .*no_such_pkg") as caught:
        sft_job.check_sampling(plug_in)
    assert "\n" not in str(caught.value)
