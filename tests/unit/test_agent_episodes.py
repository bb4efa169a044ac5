"""An RL job's episodes of an agent (``training.agent_episodes``) on a scripted model: groups
of episodes per example run through the evaluator with token capture, stored, and read back
as credited calls; which systems an rl job trains as agents. No torch."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from training_support import ScriptedTrainer, scripted_kinds

from emery.config.schema import JobConfig, RLSection
from emery.core.errors import ConfigError, EmeryError
from emery.core.models import Example
from emery.jobs.manage import create_job
from emery.lm import FakeLM, LMConfig
from emery.store import MemoryStore
from emery.systems.function_agent import FunctionAgent, agent
from emery.systems.registry import build_system, parse_system_config
from emery.training.agent_episodes import AgentEpisodes
from emery.training.rl_job import agent_episodes, trains_an_agent
from emery.verifiers import ExactMatch

EXAMPLES = [Example(id=f"e{i}", input={"question": f"q{i}"}, expected="right") for i in range(6)]


@agent
def plan_then_answer(task: dict[str, Any], lm: Any) -> str:
    """Two LM calls; the verifier scores the answer ("right" is)."""
    plan: str = lm(f"plan for {task['question']}")
    answer: str = lm(f"answer after {plan}")
    return answer


def _model() -> FakeLM:
    answers = itertools.cycle(["right", "wrong"])

    def reply(messages: Any) -> str:
        text = str(messages[-1]["content"])
        return "think it over" if text.startswith("plan") else next(answers)

    return FakeLM(reply)


def _episodes(tmp_path: Path, models: list[tuple[Path | None, int]], **kw: Any) -> AgentEpisodes:
    def model(policy: Path | None, step: int) -> Any:
        models.append((policy, step))
        return _model()

    system = kw.pop("system", FunctionAgent(plan_then_answer))
    return AgentEpisodes(
        system=system,
        candidate=system.seed_candidate(),
        verifier=ExactMatch(),
        examples=kw.pop("examples", EXAMPLES),
        lm=LMConfig(model="local/smollm2-135m"),
        settings=RLSection(prompts_per_step=2, num_generations=4),
        store=MemoryStore(),
        job_id="j-rl",
        run_dir=tmp_path,
        seed=3,
        concurrency=2,
        model=model,
        **kw,
    )


def test_a_step_runs_groups_of_episodes_and_reads_back_every_call(tmp_path: Path) -> None:
    models: list[tuple[Path | None, int]] = []
    episodes = _episodes(tmp_path, models)
    drawn = episodes.draw(1)
    policy = tmp_path / "policy"
    rows = episodes.rows(1, policy)
    assert models == [(policy, 1)]  # the step's model is built with the policy it is given
    assert len(rows) == 2 * 4 * 2  # examples x episodes x calls
    assert {r.group_id for r in rows} == {e.id for e in drawn}
    by_episode: dict[str, list[Any]] = {}
    for row in rows:
        by_episode.setdefault(row.episode_id, []).append(row)
    assert len(by_episode) == 8
    for calls in by_episode.values():
        assert [c.position for c in calls] == [0, 1]
        assert calls[0].reward == calls[1].reward  # the episode's reward, on every call
        assert all(c.prompt_token_ids and c.completion_token_ids for c in calls)
        assert all(c.completion_logprobs is not None for c in calls)
    assert sorted(r.reward for r in rows) == [0.0] * 8 + [1.0] * 8


def test_the_examples_of_a_step_are_the_same_in_every_run(tmp_path: Path) -> None:
    one, other = _episodes(tmp_path, []), _episodes(tmp_path, [])
    assert [one.draw(s) for s in range(1, 6)] == [other.draw(s) for s in range(1, 6)]
    assert len({tuple(e.id for e in one.draw(s)) for s in range(1, 6)}) > 1


class TokenlessLM(FakeLM):
    """A model that never says its tokens (as an endpoint without logprobs)."""

    async def complete(self, messages: Any, **params: Any) -> Any:
        completion = await super().complete(messages, **params)
        return completion.model_copy(update={"tokens": None})


def test_a_step_whose_calls_recorded_no_tokens_stops_in_one_line(tmp_path: Path) -> None:
    episodes = _episodes(tmp_path, [])
    episodes.model = lambda policy, step: TokenlessLM(["think", "right"] * 8)
    with pytest.raises(EmeryError, match="none of the 16 LM calls of step 1 recorded") as caught:
        episodes.rows(1, None)
    assert "\n" not in str(caught.value)


def test_an_rl_job_trains_every_system_but_a_prompt_program_as_an_agent() -> None:
    stage = {"name": "solve", "messages": [{"template": "{question}"}]}
    program = build_system(parse_system_config({"kind": "prompt_program", "stages": [stage]}))
    assert not trains_an_agent(program)
    assert trains_an_agent(FunctionAgent(plan_then_answer))
    with pytest.raises(EmeryError, match="needs examples"):
        _episodes(Path("."), [], examples=[])


def _agent_config(**dataset: Any) -> JobConfig:
    return JobConfig.model_validate(
        {
            "job": {"type": "rl"},
            "rl": {"max_steps": 2},
            "system": {"kind": "function_agent", "agent": "test_agent_episodes:plan_then_answer"},
            "dataset": {"task": "word_problems", "n_train": 4, "n_val": 0, "n_test": 2} | dataset,
            "lm": {"task": {"model": "local/smollm2-135m"}},
        }
    )


def test_an_rl_job_on_a_function_agent_is_stored_and_one_without_examples_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    scripted_kinds(monkeypatch, tmp_path, ScriptedTrainer())
    store = MemoryStore()
    job = create_job(store, _agent_config())
    assert (job.kind, job.state) == ("rl", "created")
    episodes = agent_episodes(store, _agent_config(), tmp_path, job.id)
    assert episodes is not None
    assert len(episodes.examples) == 4
    with pytest.raises(ConfigError, match="no examples on train: nothing to train"):
        create_job(store, _agent_config(n_train=0))
    assert [j.id for j in store.list_jobs().items] == [job.id]


class RecordingLM(FakeLM):
    """Records the sampling parameters of each call."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.params: list[dict[str, Any]] = []

    async def complete(self, messages: Any, **params: Any) -> Any:
        self.params.append(dict(params))
        return await super().complete(messages, **params)


@agent
def greedy_and_long(task: dict[str, Any], lm: Any) -> str:
    """Asks for greedy decoding and a long reply."""
    reply: str = lm(f"talk about {task['question']}", temperature=0.0, max_tokens=100)
    return reply


def test_every_call_is_sampled_at_the_rl_temperature_and_cut_at_its_length(
    tmp_path: Path,
) -> None:
    model = RecordingLM(lambda messages: "one two three four five six")
    episodes = _episodes(tmp_path, [], system=FunctionAgent(greedy_and_long))
    episodes.settings = RLSection(prompts_per_step=1, num_generations=2, max_completion_length=3)
    episodes.model = lambda policy, step: model
    rows = episodes.rows(1, None)
    assert [len(r.completion_token_ids) for r in rows] == [3, 3]
    assert {(p["temperature"], p["max_tokens"]) for p in model.params} == {(1.0, 3)}
