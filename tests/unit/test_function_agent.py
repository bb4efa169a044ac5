"""Function agents: parameters injected by name, sync and async, outputs and rewards,
PromptTemplate and module-level-string components, config by ``module:function``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import emery.tracing as tracing
from emery.core.errors import ConfigError
from emery.core.models import Candidate, Example
from emery.evaluation import Evaluator
from emery.lm import FakeLM
from emery.systems.function_agent import FunctionAgent, PromptTemplate, RolloutInfo, agent
from emery.systems.registry import build_system, parse_system_config
from emery.verifiers import ExactMatch

EXAMPLE = Example(id="e1", input={"word": "apple", "n": 2}, expected="APPLE")

# Components of the agents below.
SHOUT = PromptTemplate("Shout the word back in capitals: {word}")
STYLE = PromptTemplate("Answer with the word only, no punctuation.")
GREETING = "Say hello."


def upper_lm() -> FakeLM:
    """Answers in capitals when the system prompt says 'capitals', else repeats the user."""

    def reply(messages: Any) -> str:
        system = " ".join(m["content"] for m in messages if m["role"] == "system")
        user = messages[-1]["content"].split(":")[-1].strip()
        return user.upper() if "capitals" in system else user

    return FakeLM(reply)


def evaluator(system: Any, lm: Any = None, **kw: Any) -> Evaluator:
    return Evaluator(system, ExactMatch(), lm or upper_lm(), **kw)


@agent
def shouter(task: dict[str, Any], lm: Any) -> str:
    """Two components used together: the instruction and the style line."""
    return lm(SHOUT.format(word=task["word"]), system=f"{STYLE} Use capitals.")


@agent(components=["GREETING"])
def greeter(word: str) -> str:
    return f"{GREETING} {word}"


async def test_parameters_are_injected_by_name() -> None:
    seen: dict[str, Any] = {}

    @agent(components={"hint": "Think first."})
    def inspect_me(
        task: dict[str, Any],
        example: Example,
        prompts: dict[str, str],
        candidate: Any,
        rollout: RolloutInfo,
        lm: Any,
        word: str,
        n: int,
        unused: str = "default",
    ) -> str:
        seen.update(
            task=task,
            example=example,
            prompts=dict(prompts),
            candidate_id=candidate.id,
            rollout=rollout,
            lm_model=lm.model,
            word=word,
            n=n,
            unused=unused,
        )
        return word.upper()

    system = FunctionAgent(inspect_me, instrument_openai=False)
    candidate = Candidate(components={"hint": "Think twice."})
    result = await evaluator(system).run_one(candidate, EXAMPLE, "train")
    assert result.score == 1.0
    assert seen["task"] == {"word": "apple", "n": 2}
    assert seen["example"] is EXAMPLE
    assert seen["prompts"] == {"hint": "Think twice."}
    assert seen["candidate_id"] == candidate.id
    assert (seen["word"], seen["n"], seen["unused"]) == ("apple", 2, "default")
    info: RolloutInfo = seen["rollout"]
    assert info.rollout_id == result.rollout_id
    assert info.attempt_id == f"{result.rollout_id}:1"
    assert (info.attempt, info.mode, info.example_id) == (1, "train", "e1")
    assert info.candidate_id == candidate.id
    assert info.base_url is None
    assert seen["lm_model"] == "fake"


async def test_async_agents_use_await_and_get_a_clear_error_for_the_sync_call() -> None:
    @agent
    async def good(task: dict[str, Any], lm: Any) -> str:
        completion = await lm.complete([{"role": "user", "content": task["word"]}])
        return (await lm.acall(completion.text, system="capitals")).strip()

    @agent
    async def bad(task: dict[str, Any], lm: Any) -> str:
        result: str = lm(task["word"])
        return result

    ok = await evaluator(FunctionAgent(good)).run_one(FunctionAgent(good).seed_candidate(), EXAMPLE)
    assert ok.score == 1.0
    assert ok.lm_calls == 2
    failed = await evaluator(FunctionAgent(bad)).run_one(
        FunctionAgent(bad).seed_candidate(), EXAMPLE
    )
    assert failed.score == 0.0
    assert "await lm.acall" in (failed.error or "")


@pytest.mark.parametrize(
    ("returned", "returns", "score", "output"),
    [
        ("APPLE", "auto", 1.0, "APPLE"),  # an output: the verifier scores it
        (0.3, "auto", 0.3, 0.3),  # a float: the reward
        (1, "auto", 0.0, 1),  # an int is an output (a number answer), not a reward
        (1, "reward", 1.0, 1),  # unless the agent says it returns rewards
        (None, "auto", 0.0, None),  # nothing and no reward emitted: the verifier sees None
    ],
)
async def test_return_values(returned: Any, returns: Any, score: float, output: Any) -> None:
    @agent(returns=returns)
    def fixed(task: dict[str, Any]) -> Any:
        return returned

    system = FunctionAgent(fixed)
    result = await evaluator(system).run_one(system.seed_candidate(), EXAMPLE)
    assert result.score == score
    assert result.output == output
    assert result.error is None


async def test_returns_reward_with_a_non_number_is_a_failed_run() -> None:
    @agent(returns="reward")
    def wrong(task: dict[str, Any]) -> Any:
        return "high"

    system = FunctionAgent(wrong)
    result = await evaluator(system).run_one(system.seed_candidate(), EXAMPLE)
    assert result.score == 0.0
    assert result.error == "the agent returned no reward"


async def test_prompt_templates_are_found_and_two_components_optimized_together() -> None:
    system = FunctionAgent(shouter)
    seed = system.seed_candidate()
    assert seed.components == {
        "SHOUT": "Shout the word back in capitals: {word}",
        "STYLE": "Answer with the word only, no punctuation.",
    }
    # The seed asks for capitals: right. A candidate that rewrites both components:
    child = seed.derive(
        components={"SHOUT": "Repeat: {word}", "STYLE": "Reply in one word, lower case."},
        lineage=seed.lineage,
    )
    ev = evaluator(system)
    assert (await ev.run_one(seed, EXAMPLE)).score == 1.0
    result = await ev.run_one(child, EXAMPLE)
    sent = result.calls[0].messages
    assert sent[0]["content"] == "Reply in one word, lower case. Use capitals."
    assert sent[1]["content"] == "Repeat: apple"
    assert sorted(c.component for c in result.calls) == ["SHOUT", "STYLE"]
    # Outside a rollout the templates read their seeds again.
    assert SHOUT.text == "Shout the word back in capitals: {word}"
    assert str(STYLE) == "Answer with the word only, no punctuation."


async def test_module_strings_are_bound_per_candidate_even_when_evaluations_overlap() -> None:
    system = FunctionAgent(greeter)
    seed = system.seed_candidate()
    assert seed.components == {"GREETING": "Say hello."}
    other = seed.derive(components={"GREETING": "Say goodbye."}, lineage=seed.lineage)
    examples = [Example(id=f"e{i}", input={"word": f"w{i}"}) for i in range(6)]
    ev = evaluator(system, concurrency=6)
    first, second = await asyncio.gather(ev.evaluate(seed, examples), ev.evaluate(other, examples))
    assert [r.output for r in first.results] == [f"Say hello. w{i}" for i in range(6)]
    assert [r.output for r in second.results] == [f"Say goodbye. w{i}" for i in range(6)]
    assert GREETING == "Say hello."  # restored once no rollout runs


def test_seeds_from_config_override_the_code() -> None:
    system = FunctionAgent(greeter, seeds={"GREETING": "Wave."})
    assert system.seed_candidate().components == {"GREETING": "Wave."}
    with pytest.raises(ConfigError, match="unknown component 'nope'"):
        FunctionAgent(greeter, seeds={"nope": "x"})


def test_bad_component_declarations_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="neither a PromptTemplate"):
        FunctionAgent(agent(components=["NOT_DEFINED"])(lambda task: task))
    with pytest.raises(ConfigError, match="give the PromptTemplate a name"):
        FunctionAgent(agent(components=[PromptTemplate("x")])(lambda task: task))


def test_check_inputs_names_missing_fields() -> None:
    FunctionAgent(greeter).check_inputs({"word"})
    with pytest.raises(ConfigError, match="parameter 'word' is not an input field"):
        FunctionAgent(greeter).check_inputs({"question"})


PLAN = PromptTemplate("Plan for: {word}")
SOLVE = PromptTemplate("Follow the plan: {plan}")


@agent
def planner(task: dict[str, Any], lm: Any) -> str:
    """SOLVE's {plan} is filled by the agent from an earlier reply, not from the input."""
    return lm(SOLVE.format(plan=lm(PLAN.format(**task))))


@agent
def forgetful(task: dict[str, Any], lm: Any) -> str:
    return lm(SOLVE.format(**task))


async def test_template_placeholders_may_be_filled_by_the_agent() -> None:
    FunctionAgent(planner).check_inputs({"word"})
    ev = evaluator(FunctionAgent(planner))
    result = await ev.run_one(FunctionAgent(planner).seed_candidate(), EXAMPLE)
    assert result.error is None
    assert [c.component for c in result.calls] == ["PLAN", "SOLVE"]


async def test_a_placeholder_nobody_fills_fails_the_run_and_names_it() -> None:
    system = FunctionAgent(forgetful)
    result = await evaluator(system).run_one(system.seed_candidate(), EXAMPLE)
    assert result.score == 0.0
    assert "plan" in (result.error or "")


def test_config_builds_an_agent_from_module_and_name() -> None:
    config = parse_system_config(
        {"kind": "function_agent", "agent": "test_function_agent:shouter", "name": "caps"}
    )
    system = build_system(config)
    assert isinstance(system, FunctionAgent)
    assert system.name == "caps"
    assert set(system.seed_candidate().components) == {"SHOUT", "STYLE"}
    with pytest.raises(ConfigError, match="has no attribute"):
        build_system(
            parse_system_config({"kind": "function_agent", "agent": "test_function_agent:nope"})
        )
    with pytest.raises(ConfigError, match="agent"):
        parse_system_config({"kind": "function_agent"})


def test_version_depends_on_the_code_not_the_component_texts() -> None:
    a = FunctionAgent(greeter)
    assert a.version() == FunctionAgent(greeter).version()
    assert a.version() == FunctionAgent(greeter, seeds={"GREETING": "Hi."}).version()
    assert a.version() != FunctionAgent(shouter).version()


async def test_a_plain_callable_works_without_the_decorator() -> None:
    def plain(task: dict[str, Any]) -> None:
        tracing.emit_reward(1.0 if task["word"] == "apple" else 0.0)

    system = FunctionAgent(plain)
    result = await evaluator(system).run_one(system.seed_candidate(), EXAMPLE)
    assert result.score == 1.0
    assert system.name == "plain"
    assert system.seed_candidate().components == {}


def test_a_decorated_agent_is_a_system_the_sdk_optimizes(tmp_path: Path) -> None:
    import emery
    from emery.systems.base import System

    assert isinstance(shouter, System)
    examples = [
        Example(id=f"e{i}", input={"word": w}, expected=w.upper())
        for i, w in enumerate(["apple", "pear", "fig", "kiwi", "plum", "lime"])
    ]
    dataset = emery.Dataset(name="words", train=examples[:2], val=examples[2:4], test=examples[4:])
    result = emery.optimize(
        shouter,
        dataset,
        algorithm="baseline",
        lm=upper_lm(),
        store=str(tmp_path / "emery.db"),
        runtime={"workdir": str(tmp_path / "work")},
        verifier={"kind": "exact"},
    )
    assert result.best_score == 1.0
    assert result.best_candidate is not None
    assert set(result.best_candidate.components) == {"SHOUT", "STYLE"}


def _upper_word(task: dict[str, Any]) -> str:
    return str(task["word"]).upper()


def test_the_sdk_wraps_a_plain_function_as_an_agent(tmp_path: Path) -> None:
    import emery

    examples = [
        Example(id=f"e{i}", input={"word": w}, expected=w.upper() if i % 2 else w)
        for i, w in enumerate(["apple", "pear", "fig", "kiwi", "plum"])
    ]
    result = emery.optimize(
        _upper_word,
        emery.Dataset(name="words", train=examples[:1], val=examples[1:3], test=examples[3:]),
        algorithm="baseline",
        lm=upper_lm(),
        store=str(tmp_path / "emery.db"),
        runtime={"workdir": str(tmp_path / "work")},
        verifier={"kind": "exact"},
    )
    assert result.best_score == 0.5


def test_the_sdk_refuses_a_system_it_cannot_run(tmp_path: Path) -> None:
    import emery

    with pytest.raises(ConfigError, match="system"):
        emery.optimize(
            42,  # type: ignore[arg-type]
            "word_problems",
            store=str(tmp_path / "emery.db"),
            runtime={"workdir": str(tmp_path / "work")},
        )
