"""The ``[rl]`` keys of an agent RL job: the credit policy (``credit``, ``discount``) and the
agent trained (``agent``), read from a job file and given to the rows the trainer trains on.
Scripted model, no torch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from emery.config.loading import load_config
from emery.config.schema import RLSection
from emery.core.errors import ConfigError, EmeryError
from emery.core.trajectories import CreditedCall
from emery.lm import FakeLM
from emery.store import MemoryStore
from emery.systems.function_agent import agent
from emery.tracing import emit_reward
from emery.tracing.agents import as_agent
from emery.training import agent_rl, rl_job
from emery.training.trainer import TrainingHooks


@agent
async def planner_and_solver(task: dict[str, Any], lm: Any) -> str:
    """A planner call, then two solver calls; the agent rewards each solver call."""
    with as_agent("planner"):
        plan = await lm.acall(f"plan {task['question']}")
    emit_reward(0.25)
    with as_agent("solver"):
        draft = await lm.acall(f"solve {plan}")
        emit_reward(0.5)
        answer = str(await lm.acall(f"check {draft}"))
        emit_reward(0.125)
    return answer


def _job_file(tmp_path: Path, rl: str) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(
        '[job]\ntype = "rl"\nseed = 1\n\n'
        '[system]\nkind = "function_agent"\n'
        'agent = "test_agent_rl_config:planner_and_solver"\ninstrument_openai = false\n\n'
        '[dataset]\ntask = "word_problems"\nn_train = 4\nn_val = 0\nn_test = 2\n\n'
        '[lm.task]\nmodel = "local/smollm2-135m"\n\n'
        f"[rl]\nmax_steps = 1\nprompts_per_step = 2\nnum_generations = 2\n{rl}\n"
    )
    return path


def _trained_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rl: str) -> list[CreditedCall]:
    """The rows the job's trainer is given at step 1 (the trainer replaced by one that reads
    them from the job's rollout source, sampled from a scripted model)."""
    config = load_config(_job_file(tmp_path, rl))
    trained: list[CreditedCall] = []

    def trainer(base: Any, settings: RLSection, source: Any, run_dir: Path, **kw: Any) -> Any:
        source.model = lambda policy, step: FakeLM(lambda m: "ok")
        trained.extend(source.rows(1, None))
        return None, None

    monkeypatch.setattr(agent_rl, "train_agent_rl", trainer)
    hooks = TrainingHooks(lambda *a: None, lambda step: None, lambda: None)
    rl_job.train_rl_job(MemoryStore(), config, tmp_path, "j-cfg", hooks)
    return trained


def test_a_job_file_choosing_per_step_and_an_agent_trains_only_its_calls_with_those_credits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _trained_rows(tmp_path, monkeypatch, 'credit = "per_step"\nagent = "solver"')
    assert len(rows) == 2 * 2 * 2  # examples x episodes x the solver's two calls
    assert {row.agent for row in rows} == {"solver"}
    assert sorted({(row.position, row.reward) for row in rows}) == [(0, 0.5), (1, 0.125)]


def test_the_default_credits_every_call_with_the_episode_reward(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _trained_rows(tmp_path, monkeypatch, "")
    assert len(rows) == 2 * 2 * 3
    assert {row.agent for row in rows} == {"planner", "solver"}
    assert {row.reward for row in rows} == {0.0}  # "ok" is no answer: the verifier's 0


def test_discounted_credit_shares_the_reward_back_from_the_last_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_config(_job_file(tmp_path, 'credit = "discounted"\ndiscount = 0.5'))
    episodes = rl_job.agent_episodes(MemoryStore(), config, tmp_path, "j-d")
    assert episodes is not None
    assert episodes.credit.assign([None, None, None], 1.0) == [0.25, 0.5, 1.0]


def test_an_agent_that_makes_no_call_stops_the_step_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(EmeryError, match="agent 'critic'") as caught:
        _trained_rows(tmp_path, monkeypatch, 'agent = "critic"')
    assert "agents seen: planner, solver" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_agent_keys_on_a_prompt_program_are_refused(tmp_path: Path) -> None:
    path = _job_file(tmp_path, 'agent = "solver"')
    text = path.read_text().replace(
        'kind = "function_agent"\nagent = "test_agent_rl_config:planner_and_solver"\n'
        "instrument_openai = false",
        'kind = "prompt_program"\n[[system.stages]]\nname = "answer"\n'
        'messages = [{ role = "user", template = "{question}" }]',
    )
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"rl\.agent applies to an agent's LM calls"):
        rl_job.agent_episodes(MemoryStore(), load_config(path), tmp_path, "j-p")


def test_a_stored_config_with_the_defaults_reads_back() -> None:
    settings = RLSection(credit="discounted", discount=0.9, agent="solver")
    assert RLSection.model_validate(settings.model_dump(mode="json")) == settings
    assert RLSection.model_validate(RLSection().model_dump(mode="json")) == RLSection()
