"""A training job's prompt from an earlier prompt job (``[sft]``/``[rl]`` ``source_job``):
the job trains and scores exactly that job's best candidate, a name is pinned to its id as
the job is stored, and a source that is unknown, no prompt search or another system is one
error line before any job exists (``training/source.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import training_support as ts
from test_gepa_support import FORMAT_RULE, reflect_reply, task_lm

from emery.config.schema import JobConfig
from emery.core.errors import ConfigError
from emery.core.models import ChatMessage, Dataset
from emery.data.tasks import builtin_task
from emery.jobs.manage import create_job, run_job
from emery.lm import FakeLM
from emery.lm.base import Completion
from emery.sdk.arguments import optimize_config
from emery.store import MemoryStore
from emery.systems.prompt_program import PromptProgram
from emery.training import scoring
from emery.training.data import job_conversations

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")

SIZES = {"n_train": 4, "n_val": 4, "n_test": 2}


def _data(task: str = "word_problems") -> Dataset:
    return builtin_task(task).dataset(seed=0, **SIZES)


def _prompt_job(store: MemoryStore, tmp_path: Path, name: str, instruction: str) -> str:
    """A finished GEPA job on the built-in word problems whose seed says ``instruction``."""
    data = _data()
    program = builtin_task("word_problems").program
    stage = program.stages[0].model_copy(update={"instruction": instruction})
    config, given, inputs = optimize_config(
        system=PromptProgram(program.model_copy(update={"stages": [stage]})),
        dataset=data,
        algorithm="gepa",
        budget=24,
        verifier="numeric",
        lm=task_lm(data),
        reflection_lm=FakeLM(reflect_reply),
        seed=0,
        settings=None,
        runtime={"workdir": str(tmp_path / ".emery")},
        name=name,
        workdir=tmp_path / ".emery",
    )
    record = create_job(store, config, given=given, inputs=inputs, name=name)
    assert run_job(store, record.id, inputs=inputs).state == "succeeded"
    return record.id


def _training(kind: str, source: str, task: str = "word_problems", **section: Any) -> JobConfig:
    settings: dict[str, Any] = {"source_job": source, "max_steps": 2, "save_steps": 2}
    if kind == "sft":
        settings |= {"candidate": "best", "splits": ["train", "val"], "min_score": 0.0}
    return JobConfig.model_validate(
        {
            "job": {"type": kind},
            kind: settings | section,
            "dataset": {"task": task, **SIZES},
            "lm": {"task": {"model": "local/smollm2-135m"}},
        }
    )


class _Recording:
    """A scripted model that records each call's system prompt."""

    def __init__(self, inner: FakeLM, model: str, seen: list[str]) -> None:
        self.inner, self.model, self.seen = inner, model, seen

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        self.seen.append(next(m["content"] for m in messages if m["role"] == "system"))
        return await self.inner.complete(messages, **params)


class _Scorer:
    """``build_lm`` for the training job's test scoring: the scripted task model, recording
    the system prompts it is sent per model name."""

    def __init__(self, data: Dataset) -> None:
        self.task = task_lm(data)
        self.prompts: dict[str, list[str]] = {}

    def __call__(self, settings: Any, **_: Any) -> _Recording:
        return _Recording(self.task, settings.model, self.prompts.setdefault(settings.model, []))


@pytest.mark.parametrize("kind", ["sft", "rl"])
def test_a_training_job_named_by_a_prompt_job_s_name_scores_exactly_its_best_prompt(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ts.scripted_kinds(monkeypatch, tmp_path, ts.ScriptedTrainer())
    scorer = _Scorer(_data())
    monkeypatch.setattr(scoring, "resolve_lm", scorer)
    store = MemoryStore()
    first = _prompt_job(store, tmp_path, "stage1", f"Answer the question. {FORMAT_RULE}")
    best = store.get_candidate(first, store.get_job(first).best_candidate_id or "")
    assert best.components["solve"] != "Answer the question."  # not this job's own seed
    job = create_job(store, _training(kind, "stage1"), base_dir=tmp_path)
    stored = job.resolved_config[kind]["source_job"]
    assert stored == first  # the name is pinned to the job it named when the job was stored
    _prompt_job(store, tmp_path, "stage1", "A later job of the same name.")
    assert run_job(store, job.id).state == "succeeded"
    result = store.get_job(job.id).result
    assert result["test"]["candidate_id"] == best.id
    tuned = f"local/smollm2-135m+{job.id}"
    assert set(scorer.prompts) == {"local/smollm2-135m", tuned}
    for prompts in scorer.prompts.values():
        assert prompts
        assert set(prompts) == {best.components["solve"]}


def test_sft_on_the_best_candidate_takes_only_that_candidate_s_rollouts(tmp_path: Path) -> None:
    store = MemoryStore()
    first = _prompt_job(store, tmp_path, "stage1", f"Answer the question. {FORMAT_RULE}")
    job = store.get_job(first)
    best = store.get_candidate(first, job.best_candidate_id or "")
    others = {c.components["solve"] for c in store.job_candidates(first)} - {
        best.components["solve"]
    }
    assert others  # the search tried other prompts, whose rollouts are not taken
    chats = job_conversations(store, first, candidate="best", splits=("train", "val"), min_score=0)
    assert chats
    assert {chat[0]["content"] for chat in chats} == {best.components["solve"]}


def _one_line_refusal(store: MemoryStore, config: JobConfig, tmp_path: Path, match: str) -> None:
    before = [j.id for j in store.list_jobs().items]
    with pytest.raises(ConfigError, match=match) as caught:
        create_job(store, config, base_dir=tmp_path)
    assert "\n" not in str(caught.value)
    assert [j.id for j in store.list_jobs().items] == before


@pytest.mark.parametrize("kind", ["sft", "rl"])
def test_a_bad_source_job_is_one_line_before_the_job_exists(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ts.scripted_kinds(monkeypatch, tmp_path, ts.ScriptedTrainer())
    store = MemoryStore()
    first = _prompt_job(store, tmp_path, "stage1", f"Answer the question. {FORMAT_RULE}")
    _one_line_refusal(
        store, _training(kind, "nope"), tmp_path, rf"^{kind}\.source_job: no job 'nope'"
    )
    tuned = create_job(store, _training("sft", first, evaluate=False), base_dir=tmp_path)
    assert run_job(store, tuned.id).state == "succeeded"
    _one_line_refusal(
        store,
        _training(kind, tuned.id),
        tmp_path,
        rf"^{kind}\.source_job: job {tuned.id} is an sft job; only a prompt search's best",
    )
    _one_line_refusal(
        store,
        _training(kind, first, task="intent"),
        tmp_path,
        rf"^{kind}\.source_job: job {first} optimized the components solve, this job's system"
        " has classify: name a prompt job on the same system",
    )
