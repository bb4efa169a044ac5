"""GEPA searching harness code with scripted models: only a code change (retrying after an
error observation) solves the flaky lookups, so the searched loop strictly beats the seed
on test; broken proposals are rejected before any minibatch."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pytest
from harness_support import CRASHING, RETRYING, flaky_store, lookup_examples, lookup_reply
from lift_support import assert_test_lift

import emery
from emery.algorithms.code_proposals import CodeProposals, parse_code, render_episodes
from emery.algorithms.lineage import component_diff
from emery.cli.app import main
from emery.core.example_result import ExampleResult
from emery.core.models import ChatMessage
from emery.lm import FakeLM
from emery.store.backends import open_store
from emery.systems.harness.code import CODE_COMPONENT, SEED_CODE, code_problem
from emery.systems.harness.system import CodeHarness, CodeHarnessConfig


def reflection_script() -> FakeLM:
    """First a module that compiles but crashes, then no module at all, then the fix."""
    replies = iter(
        [
            f"```python\n{CRASHING}```",
            "I would add retries.",
            f"Here is the module:\n```python\n{RETRYING}```",
        ]
    )

    def reply(messages: Sequence[ChatMessage]) -> str:
        assert "Current module:" in messages[0]["content"]
        return next(replies, f"```python\n{RETRYING}```")

    return FakeLM(reply, model="fake/reflection")


def test_retrying_module_exists_and_differs() -> None:
    assert RETRYING != SEED_CODE
    assert parse_code(f"```python\n{RETRYING}```", SEED_CODE, code_problem) == (RETRYING, None)
    unchanged = parse_code(f"```python\n{SEED_CODE}```", SEED_CODE, code_problem)
    assert unchanged == (None, "the module is unchanged")
    assert parse_code("no code", SEED_CODE, code_problem)[1] is not None
    # the "Change:" line the prompt asks for, fenced on its own or inside the module's fence
    for reply in (
        f"```\nChange: retry after an error.\n```\n```python\n{RETRYING}```",
        f"```\nChange: retry after an error.\n```python\n{RETRYING}```",
        f"```\nChange: retry after an error.\n{RETRYING}```",
        f"Change: retry after an error.\n{RETRYING}",
        f"```\nChange: retry after an error,\nbecause it's busy.\n```\n```\n{RETRYING}```",
    ):
        assert parse_code(reply, SEED_CODE, code_problem) == (RETRYING, None)


def test_reflection_prompt_shows_module_transcripts_and_failures_first() -> None:
    examples = lookup_examples(2, "k")
    results = [
        ExampleResult(candidate_id="c", example_id="k-0", score=1.0, trace="1. tool lookup → v0"),
        ExampleResult(
            candidate_id="c",
            example_id="k-1",
            score=0.0,
            feedback="expected v7",
            trace="1. tool lookup → busy\n" + "x" * 5000,
        ),
    ]
    shown = render_episodes(examples, results)
    assert shown.index("failed") < shown.index("succeeded")
    assert "expected v7" in shown
    assert len(shown) < 4000
    harness = CodeHarness(CodeHarnessConfig(environment="calculator"))
    code = CodeProposals(harness, "lookups")
    prompt = code.rewrite_messages(SEED_CODE, examples, results)[0]["content"]
    assert "def run(kit):" in prompt
    assert "The task: lookups" in prompt


def test_gepa_finds_the_retrying_loop_and_lifts_test(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.ERROR)
    system, dataset = flaky_store()
    store = open_store(tmp_path / "emery.db")
    reflection = reflection_script()
    result = emery.optimize(
        system,
        dataset,
        algorithm="gepa",
        budget=60,
        verifier="exact",
        lm=FakeLM(lookup_reply, model="fake/lookup"),
        reflection_lm=reflection,
        settings={"components": [CODE_COMPONENT], "max_iterations": 4},
        runtime={"workdir": str(tmp_path / ".emery"), "cache": False},
        store=store,
        progress=False,
    )
    best = assert_test_lift(result, 0.0, 1.0)
    assert best.components[CODE_COMPONENT] == RETRYING
    events = store.list_events(result.job_id)
    rejected = [e for e in events if e.kind == "gepa.minibatch_rejected"]
    assert any("the smoke run failed" in str(e.data.get("reason")) for e in rejected)
    invalid = [e for e in events if e.kind == "gepa.proposal_invalid"]
    assert any("does not compile" in str(e.data.get("reason")) for e in invalid)
    # the ask after the reply with no module says why that reply was refused
    refused = "Your last reply was refused: the module does not compile"
    assert any(refused in call[0]["content"] for call in reflection.calls)
    stored = store.job_candidates(result.job_id)
    assert all(CRASHING not in c.components.get(CODE_COMPONENT, "") for c in stored)
    assert result.seed_candidate is not None
    diff = component_diff(result.seed_candidate, best)
    assert "+            if not observation.ok" in diff
    # emery candidates --show prints the code diff against the parent
    with pytest.raises(SystemExit):
        main(
            [
                "candidates",
                result.job_id,
                "--show",
                best.id,
                "--store",
                str(tmp_path / "emery.db"),
            ]
        )
    shown = capsys.readouterr().out
    assert "diff against the first parent" in shown
    assert "+            if not observation.ok" in shown
