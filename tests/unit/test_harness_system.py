"""The code-harness system: compile check, caps, crash kinds, kit-recorded transcripts,
tool policy and skills, with scripted models and episode processes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from harness_support import calculator_examples, calculator_lm, call

from emery.core.errors import ConfigError
from emery.core.models import Candidate
from emery.evaluation import Evaluator
from emery.lm import FakeLM
from emery.systems.harness.code import CODE_COMPONENT, code_problem
from emery.systems.harness.system import CodeHarness, CodeHarnessConfig
from emery.systems.registry import build_system, parse_system_config
from emery.tracing.recorder import MemoryRecorder
from emery.verifiers import ExactMatch


def harness(**config: Any) -> CodeHarness:
    return CodeHarness(CodeHarnessConfig(environment="calculator", **config))


def evaluate(system: CodeHarness, code: str | None = None, lm: Any = None, n: int = 1) -> Any:
    recorder = MemoryRecorder()
    evaluator = Evaluator(system, ExactMatch(), lm or calculator_lm(), recorder=recorder)
    seed = system.seed_candidate()
    candidate = seed if code is None else with_code(seed, code)
    result = asyncio.run(evaluator.evaluate(candidate, calculator_examples(n), "val"))
    return result, recorder


def with_code(seed: Candidate, code: str, **more: str) -> Candidate:
    return Candidate(components={**seed.components, CODE_COMPONENT: code, **more})


def test_compile_check_names_the_problem() -> None:
    assert code_problem("def run(kit):\n    return 'x'\n") is None
    assert "does not compile" in str(code_problem("def run(kit)\n  return"))
    assert "no function run" in str(code_problem("def walk(kit):\n    return 1\n"))
    assert "take the kit" in str(code_problem("def run():\n    return 1\n"))
    with pytest.raises(ConfigError, match=r"system\.code: the module does not compile"):
        harness(code="def run(kit) return 1")


def test_config_kind_builds_the_system() -> None:
    config = parse_system_config({"kind": "code_harness", "environment": "kv_store"})
    system = build_system(config)
    assert isinstance(system, CodeHarness)
    assert set(system.seed_candidate().components) == {"code:runtime", "prompt:system"}
    with pytest.raises(ConfigError, match="unknown environment 'nope'"):
        build_system(parse_system_config({"kind": "code_harness", "environment": "nope"}))


def test_seed_loop_solves_the_calculator_and_the_kit_records_the_transcript() -> None:
    result, recorder = evaluate(harness(), n=3)
    assert result.scores == [1.0, 1.0, 1.0]
    spans = recorder.spans(result.results[0].rollout_id)
    tools = [
        s.attributes.get("gen_ai.tool.name") for s in spans if s.name.startswith("execute_tool")
    ]
    assert tools == ["convert", "calculate"]
    assert sum(1 for s in spans if s.name.startswith("chat")) == 3
    assert "harness.stop_reason" in result.results[0].trace
    assert "tool convert" in result.results[0].trace


def test_invalid_code_is_rejected_without_a_model_call() -> None:
    lm = calculator_lm()
    result, _ = evaluate(harness(), code="def walk(kit):\n    return 1\n", lm=lm)
    assert result.results[0].error is not None
    assert "invalid" in result.results[0].error
    assert lm.calls == []


CRASHES = {
    "exception": "def run(kit):\n    raise ValueError('boom')\n",
    "exit": "import sys\n\ndef run(kit):\n    sys.exit(3)\n",
    "crash": "import os\n\ndef run(kit):\n    os._exit(7)\n",
    "timeout": "def run(kit):\n    while True:\n        pass\n",
    "invalid": "run = 3\n",
}


@pytest.mark.parametrize("reason", sorted(CRASHES))
def test_crash_kinds_fail_the_episode_only(reason: str) -> None:
    system = harness(timeout_s=1.5)
    result, _ = evaluate(system, code=CRASHES[reason])
    only = result.results[0]
    assert only.score == 0.0
    assert only.error is not None
    assert f"episode stopped ({reason})" in only.error
    assert f'"harness.stop_reason": "{reason}"' in only.trace
    # the pool still serves the next episode
    again, _ = evaluate(system)
    assert again.scores == [1.0]


def test_exception_keeps_the_partial_transcript() -> None:
    code = (
        "def run(kit):\n"
        "    kit.execute('calculate', {'expression': '2*3'})\n"
        "    raise KeyError('lost')\n"
    )
    result, _ = evaluate(harness(), code=code)
    only = result.results[0]
    assert "tool calculate" in only.trace
    assert "KeyError" in only.trace
    assert "episode stopped (exception)" in only.trace


ACTIONS = {
    "max_llm_calls": "kit.complete('s', [{'role': 'user', 'content': 'hi'}])",
    "max_env_actions": "kit.execute('calculate', {'expression': '1'})",
}


@pytest.mark.parametrize("limit", sorted(ACTIONS))
def test_caps_end_the_episode_with_budget(limit: str) -> None:
    code = (
        "def run(kit):\n"
        "    try:\n"
        "        while True:\n"
        f"            {ACTIONS[limit]}\n"
        "    except Exception:\n"
        "        pass\n"
        "    return 'sneaky'\n"
    )
    system = harness(**{limit: 3})
    lm = FakeLM(lambda messages: "hello")
    result, recorder = evaluate(system, code=code, lm=lm)
    only = result.results[0]
    assert only.error is not None
    assert "episode stopped (budget)" in only.error
    assert f"{limit}=3 exceeded" in only.error
    if limit == "max_llm_calls":
        assert len(lm.calls) == 3
    else:
        spans = recorder.spans(only.rollout_id)
        assert sum(1 for s in spans if s.name.startswith("execute_tool")) == 3


def test_a_caught_budget_exceeded_still_stops_with_budget() -> None:
    code = (
        "def run(kit):\n"
        "    for _ in range(5):\n"
        "        try:\n"
        "            kit.execute('calculate', {'expression': '1'})\n"
        "        except BaseException:\n"
        "            pass\n"
        "    return '1'\n"
    )
    result, _ = evaluate(harness(max_env_actions=2), code=code)
    assert "episode stopped (budget)" in str(result.results[0].error)


def test_unknown_tool_is_an_error_observation_that_costs_nothing() -> None:
    code = (
        "def run(kit):\n"
        "    bad = kit.execute('rm_rf', {'path': '/'})\n"
        "    assert not bad.ok and 'unknown tool' in bad.text, bad\n"
        "    good = kit.execute('calculate', {'expression': '2+2'})\n"
        "    return good.text\n"
    )
    system = harness(max_env_actions=1)
    result, _ = evaluate(system, code=code)
    only = result.results[0]
    assert only.error is None
    assert only.output == "4"
    assert "tool rm_rf" in only.trace
    assert "unknown tool" in only.trace


def test_skills_are_components_indexed_in_the_prompt_and_readable() -> None:
    system = harness(skills={"units": "# Convert first\nAlways convert before adding."})
    assert system.seed_candidate().components["skill:units"].startswith("# Convert")
    code = (
        "def run(kit):\n"
        "    assert 'units: Convert first' in kit.system_prompt, kit.system_prompt\n"
        "    assert any(t['name'] == 'read_skill' for t in kit.tools)\n"
        "    assert 'no skill named' in kit.read_skill('nope')\n"
        "    return kit.read_skill('units').splitlines()[1]\n"
    )
    seed = system.seed_candidate()
    child = with_code(seed, code, **{"skill:units": "# Convert first\nedited body"})
    evaluator = Evaluator(system, ExactMatch(), calculator_lm())
    example = calculator_examples(1)[0]
    result = asyncio.run(evaluator.run_one(child, example, "val"))
    assert result.output == "edited body"


def test_parse_tool_call_reads_json_in_chatter() -> None:
    from emery.systems.harness.toolcalls import parse_tool_call

    assert parse_tool_call("ok " + call("get", key="a") + " done") == {
        "tool": "get",
        "arguments": {"key": "a"},
    }
    assert parse_tool_call('```json\n{"name": "x", "args": {}}\n```') == {
        "tool": "x",
        "arguments": {},
    }
    assert parse_tool_call("no call here {not json}") is None
