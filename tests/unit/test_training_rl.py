"""RL jobs without torch: ``[rl]`` config checks, the verifier reward on parsed completions,
the prompt rows, and what an rl job refuses before it exists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from emery.config.resolve import resolve_dataset, resolve_system, resolve_verifier
from emery.config.schema import JobConfig
from emery.core.errors import ConfigError
from emery.jobs.manage import create_job
from emery.lm import FakeLM
from emery.store import MemoryStore
from emery.training.reward import VerifierReward, completion_text
from emery.training.rl_job import job_reward


def _config(**override: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "job": {"type": "rl"},
        "rl": {"max_steps": 3},
        "dataset": {"task": "word_problems", "n_train": 4, "n_val": 0, "n_test": 2},
        "lm": {"task": {"model": "local/smollm2-135m"}},
    }
    return data | override


def test_rl_config_validation() -> None:
    config = JobConfig.model_validate(_config())
    assert config.job.type == "rl"
    assert config.rl is not None
    assert config.sft is None
    rl = config.rl
    assert (rl.max_steps, rl.prompts_per_step, rl.num_generations) == (3, 2, 4)
    assert rl.max_completion_length <= 64
    assert rl.beta > 0
    bad = [
        ({"rl": None}, r"an \[rl\] section goes with"),
        ({"job": {"type": "prompt"}}, r"an \[rl\] section goes with"),
        ({"job": {"type": "sft"}}, r"an \[sft\] section goes with"),
        ({"lm": {"task": {"model": "openai/gpt-4o"}}}, "an rl job tunes a known local model"),
        ({"lm": {"task": {"model": "local/smollm2-135m+j-1"}}}, "known local model"),
        ({"rl": {"num_generations": 1}}, "num_generations"),
        ({"rl": {"beta": -0.1}}, "beta"),
        ({"rl": {"splits": ["test"]}}, "splits"),
        ({"rl": {"batch_size": 4}}, "batch_size"),
    ]
    for override, message in bad:
        with pytest.raises(ValidationError, match=message):
            JobConfig.model_validate(_config(**override))


def _reward(config: JobConfig | None = None) -> VerifierReward:
    return job_reward(config or JobConfig.model_validate(_config()), Path.cwd())


def test_a_parsed_right_answer_scores_1_and_an_unreadable_one_0() -> None:
    reward = _reward()
    example = next(iter(reward.examples.values()))
    right = f"Let me think. Answer: {example.expected}"
    wrong = f"Answer: {int(example.expected) + 1}"
    completions = [
        [{"role": "assistant", "content": right}],
        [{"role": "assistant", "content": "I do not know."}],
        [{"role": "assistant", "content": wrong}],
        right,
    ]
    assert reward(completions, [example.id] * 4) == [1.0, 0.0, 0.0, 1.0]


async def test_a_restating_prompt_s_reward_restates_an_unreadable_completion() -> None:
    """A prompt whose layout restates (``solve:answer = "restate"``) scores a completion as
    the system would: an unreadable reply is restated by the task LM, then parsed."""
    config = JobConfig.model_validate(_config())
    plain = _reward(config)
    example = next(iter(plain.examples.values()))
    worked = f"First I add, then I subtract: the result is {example.expected}."
    assert await plain.score(example, worked) == 0.0
    restated = VerifierReward(
        plain.system,
        plain.candidate.model_copy(
            update={"components": {**plain.candidate.components, "solve:answer": "restate"}}
        ),
        plain.verifier,
        list(plain.examples.values()),
        lm=FakeLM(lambda messages: f"Answer: {example.expected}"),
    )
    assert restated.restates
    assert await restated.score(example, worked) == 1.0
    assert await restated.score(example, f"Answer: {example.expected}") == 1.0
    restating = plain_fake(restated)
    assert len(restating.calls) == 1  # the readable completion was not restated
    assert "Worked reply:" in restating.calls[0][-1]["content"]
    without_lm = VerifierReward(
        restated.system, restated.candidate, restated.verifier, list(restated.examples.values())
    )
    with pytest.raises(ConfigError, match="restates unreadable replies"):
        await without_lm.score(example, worked)


def plain_fake(reward: VerifierReward) -> FakeLM:
    assert isinstance(reward.lm, FakeLM)
    return reward.lm


def test_rewards_follow_each_completion_s_own_example() -> None:
    reward = _reward()
    first, second = list(reward.examples.values())[:2]
    assert first.expected != second.expected
    answer = f"Answer: {first.expected}"
    assert reward([answer, answer], [first.id, second.id]) == [1.0, 0.0]
    with pytest.raises(ValueError, match="longer"):
        reward([answer], [first.id, second.id])


def test_rows_are_the_stage_s_chat_with_the_example_id() -> None:
    config = JobConfig.model_validate(_config())
    reward = _reward(config)
    rows = reward.rows()
    assert [row["example_id"] for row in rows] == [e.id for e in reward.examples.values()]
    assert len(rows) == 4
    dataset = resolve_dataset(config)
    example = dataset.split("train")[0]
    system = resolve_system(config)
    stage = system.config.stages[0]  # type: ignore[attr-defined]
    assert rows[0]["prompt"] == system.messages(stage, stage.instruction, (), example.input)  # type: ignore[attr-defined]
    assert rows[0]["prompt"][-1] == {"role": "user", "content": example.input["question"]}


def test_completion_text_joins_a_conversational_reply() -> None:
    assert completion_text("Answer: 3") == "Answer: 3"
    assert completion_text([{"role": "assistant", "content": "Answer: 3"}]) == "Answer: 3"
    assert completion_text([{"role": "assistant", "content": None}]) == ""


def test_a_multi_stage_system_is_refused_in_one_line() -> None:
    stage = {"messages": [{"template": "{question}"}]}
    system = {
        "kind": "prompt_program",
        "stages": [{"name": "think", **stage}, {"name": "answer", **stage}],
    }
    config = JobConfig.model_validate(_config(system=system))
    program = resolve_system(config)
    verifier = resolve_verifier(config, resolve_dataset(config))
    with pytest.raises(ConfigError, match="single-stage prompt program") as caught:
        VerifierReward(program, program.seed_candidate(), verifier, [])
    assert "\n" not in str(caught.value)
    store = MemoryStore()
    with pytest.raises(ConfigError, match="a prompt program of 2 stages"):
        create_job(store, config)
    assert store.list_jobs().items == []


def test_an_rl_job_without_training_examples_is_refused_before_it_exists() -> None:
    store = MemoryStore()
    dataset = {"task": "word_problems", "n_train": 0, "n_val": 0, "n_test": 2}
    config = JobConfig.model_validate(_config(dataset=dataset))
    with pytest.raises(ConfigError, match="no examples on train: nothing to train"):
        create_job(store, config)
    assert store.list_jobs().items == []


def test_emery_train_type_rl_refuses_a_multi_stage_system_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bad_input_support import run_cli

    from emery.store import SQLiteStore

    stages = "".join(
        f'\n[[system.stages]]\nname = "{name}"\n[[system.stages.messages]]\ntemplate = "q"\n'
        for name in ("think", "answer")
    )
    (tmp_path / "job.toml").write_text(
        '[dataset]\ntask = "word_problems"\n\n[rl]\nmax_steps = 2\n\n'
        '[lm.task]\nmodel = "local/smollm2-135m"\n\n[system]\nkind = "prompt_program"\n' + stages
    )
    db = tmp_path / "emery.db"
    args = ["train", str(tmp_path / "job.toml"), "--type", "rl", "--store", str(db)]
    assert run_cli(args) != 0  # in process: the one line, not the process, is checked
    out, err = capsys.readouterr()
    assert out == ""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "single-stage prompt program" in lines[0]
    assert SQLiteStore(db).list_jobs().items == []


def _prompt_job(store: MemoryStore, config: JobConfig, instruction: str | None) -> str:
    """A stored prompt job whose best candidate has ``instruction`` (None: no best yet)."""
    from emery.core.models import Lineage
    from emery.store.records import NewJob

    job = store.create_job(
        NewJob(id="j-prompt", name="p", kind="prompt", algorithm="mipro", config={})
    )
    if instruction is not None:
        seed = resolve_system(config).seed_candidate()
        stage = next(iter(seed.components))
        best = seed.derive(components={stage: instruction}, lineage=Lineage(operation="x"))
        store.add_candidates(job.id, [seed, best])
        store.update_job(job.id, best_candidate_id=best.id)
    return job.id


def test_an_rl_job_trains_and_scores_its_source_job_s_best_prompt() -> None:
    from emery.training.scoring import scored_candidate

    store = MemoryStore()
    config = JobConfig.model_validate(_config(rl={"max_steps": 3, "source_job": "j-prompt"}))
    _prompt_job(store, config, "Add carefully. End with 'Answer: <number>'.")
    reward = job_reward(config, Path.cwd(), store)
    rows = reward.rows()
    assert rows[0]["prompt"][0] == {
        "role": "system",
        "content": "Add carefully. End with 'Answer: <number>'.",
    }
    seed = resolve_system(config).seed_candidate()
    assert scored_candidate(store, config, seed) == reward.candidate != seed
    job = create_job(store, config)
    assert job.kind == "rl"
    plain = JobConfig.model_validate(_config())
    assert job_reward(plain, Path.cwd(), store).candidate == seed


def test_an_rl_source_job_without_a_best_prompt_is_refused_in_one_line() -> None:
    store = MemoryStore()
    config = JobConfig.model_validate(_config(rl={"source_job": "j-prompt"}))
    _prompt_job(store, config, None)
    with pytest.raises(ConfigError, match="j-prompt has no best candidate") as caught:
        create_job(store, config)
    assert "\n" not in str(caught.value)
    assert [job.id for job in store.list_jobs().items] == ["j-prompt"]
    with pytest.raises(ConfigError, match="needs the store"):
        job_reward(config, Path.cwd())
