"""APO searching harness code with scripted models: the gradient LM critiques the module,
the edit LM writes a whole new one; only the retrying loop solves the flaky lookups, so
APO lifts test strictly. A module that does not compile is an invalid proposal and one
that crashes is rejected by its smoke run, both before the beam pays to score them; the
system prompt stays an ordinary APO text."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pytest
from harness_support import CRASHING, RETRYING, flaky_store, lookup_reply
from lift_support import assert_test_lift

import emery
from emery.algorithms.code_proposals import CodeProposals
from emery.core.models import ChatMessage
from emery.lm import FakeLM
from emery.store.backends import open_store
from emery.systems.harness.code import CODE_COMPONENT, PROMPT_COMPONENT, SEED_CODE
from emery.systems.harness.system import CodeHarness, CodeHarnessConfig

CRITIQUE = "Retry a lookup once when its observation is an error."


class Reflection:
    """Critiques the module; writes a crashing module, then prose, then the fix. Text
    requests (the system prompt) get the shipped APO prompts and ordinary answers."""

    def __init__(self) -> None:
        self.modules = iter([f"```python\n{CRASHING}```", "I would add retries.", RETRYING])
        self.code_edits: list[str] = []
        self.text_requests: list[str] = []

    def __call__(self, messages: Sequence[ChatMessage]) -> str:
        content = messages[-1]["content"]
        if "Current module:" not in content:
            self.text_requests.append(content)
            return "```\nCheck each observation before you submit an answer.\n```"
        if "do not write the module" in content:
            return CRITIQUE
        self.code_edits.append(content)
        module = next(self.modules, RETRYING)
        return module if module.startswith(("```", "I ")) else f"```python\n{module}```"


def test_critique_prompt_shows_the_module_and_asks_for_no_code() -> None:
    code = CodeProposals(CodeHarness(CodeHarnessConfig(environment="calculator")), "lookups")
    content = code.critique_messages(SEED_CODE, [], [])[0]["content"]
    assert "def run(kit):" in content
    assert "The task: lookups" in content
    assert "do not write the module" in content
    assert "```python fence" not in content


def test_apo_finds_the_retrying_loop_and_lifts_test(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    system, dataset = flaky_store()
    reflection = Reflection()
    store = open_store(tmp_path / "emery.db")
    result = emery.optimize(
        system,
        dataset,
        algorithm="apo",
        budget=60,
        verifier="exact",
        lm=FakeLM(lookup_reply, model="fake/lookup"),
        reflection_lm=FakeLM(reflection, model="fake/reflection"),
        settings={
            "beam_width": 1,
            "branch_factor": 6,
            "rounds": 1,
            "gradient_batch_size": 2,
            "val_batch_size": 4,
        },
        runtime={"workdir": str(tmp_path / ".emery"), "cache": False},
        store=store,
        progress=False,
    )
    best = assert_test_lift(result, 0.0, 1.0)
    assert best.components[CODE_COMPONENT] == RETRYING
    # the edit LM saw the module, the episodes and the critique
    assert len(reflection.code_edits) == 3
    assert all(CRITIQUE in edit and "Episode 1" in edit for edit in reflection.code_edits)
    events = store.list_events(result.job_id)
    edits = [e.data for e in events if e.kind == "apo.edit"]
    code_edits = [e for e in edits if e["component"] == CODE_COMPONENT]
    reasons = [str(e["reason"]) for e in code_edits if not e["accepted"]]
    assert len(reasons) == 2
    assert any("does not compile" in reason for reason in reasons)
    assert any(reason.startswith("the smoke run failed") for reason in reasons)
    assert all(e["variant"] == "code" for e in code_edits)
    checkpoint = store.get_checkpoint(result.job_id)
    assert checkpoint is not None
    assert checkpoint.state["code_invalid"] == 1
    assert checkpoint.state["smoke_rejected"] == 1
    # a rejected module is never a candidate, so it was never scored
    stored = store.job_candidates(result.job_id)
    assert all(CRASHING not in c.components.get(CODE_COMPONENT, "") for c in stored)
    # the system prompt went through the ordinary text critique and edit
    text_edits = [e for e in edits if e["component"] == PROMPT_COMPONENT]
    assert len(text_edits) == 3
    assert all(e["variant"] != "code" for e in text_edits)
    assert len(reflection.text_requests) == 6
