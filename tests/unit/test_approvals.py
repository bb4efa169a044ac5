"""``[job] approve = "best"``: a job waits for a person before a candidate becomes its best.

The jobs run in this process on the in-memory store with the scripted models; the person
is the engine's note hook, which decides the request in the store as soon as the job says
it waits (the job then reads the decision at its next poll), so no test sleeps.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest

from emery.algorithms import StepRecord, build_algorithm, run_search
from emery.algorithms.apo.critique import Sampling, critique_prompt
from emery.algorithms.apo.prompts import load_prompts
from emery.algorithms.approval import EDIT, with_reviewer_notes
from emery.config import parse_config
from emery.core.approvals import ACTIONS, Approval
from emery.core.errors import ConfigError, IllegalTransition
from emery.core.example_result import ExampleResult
from emery.core.models import ChatMessage
from emery.evaluation.budget import BudgetConfig
from emery.jobs import create_job
from emery.jobs.engine import JobEngine
from emery.lm import FakeLM
from emery.store import MemoryStore, SQLiteStore
from emery.store.sql import SqlStore
from emery.store.states import NotFound

pytestmark = pytest.mark.usefixtures("random_search_algorithm")

REASON = "too long: keep the instruction to one sentence"


def approval_job(store: SqlStore, folder: Path) -> str:
    config = js.search_config(folder / ".emery", iterations=4)
    config["job"]["approve"] = "best"
    return create_job(store, parse_config(config), given=config, base_dir=folder).id


Person = Callable[[Approval], None]


def run(store: SqlStore, job_id: str, person: Person) -> Any:
    """Run the job; ``person`` decides each request when the job says it waits for it."""

    def on_note(text: str) -> None:
        if text.startswith("waiting for approval"):
            (pending,) = store.list_approvals(job_id, status="pending")
            person(pending)

    return asyncio.run(JobEngine(store, job_id, on_note=on_note, poll_s=0.001).run())


def approve(store: SqlStore) -> Person:
    return lambda a: store.decide_approval(a.id, "approve")


def test_an_approved_candidate_becomes_the_best_only_after_the_approval(tmp_path: Path) -> None:
    store = MemoryStore()
    job_id = approval_job(store, tmp_path)
    job = run(store, job_id, approve(store))
    assert job.state == "succeeded"
    approvals = store.list_approvals(job_id)
    assert approvals
    assert all(a.status == "approved" and a.applied for a in approvals)
    assert job.best_candidate_id == approvals[-1].candidate_id
    kinds = [
        (e.kind, e.data.get("candidate_id"))
        for e in store.list_events(job_id)
        if e.kind in ("best_updated", "approval_requested", "approval_applied")
    ]
    for a in approvals:  # requested, then applied, then (only then) the best
        at = kinds.index(("approval_requested", a.candidate_id))
        assert kinds[at + 1 : at + 3] == [
            ("best_updated", a.candidate_id),
            ("approval_applied", a.candidate_id),
        ]
    assert job.best_score == max(a.score for a in approvals)


def test_a_rejection_keeps_the_best_and_the_candidate_is_not_asked_about_again(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    job_id = approval_job(store, tmp_path)
    job = run(store, job_id, lambda a: store.decide_approval(a.id, "reject", reason=REASON))
    assert job.state == "succeeded"
    rejected = store.list_approvals(job_id)
    assert rejected
    assert {(a.status, a.reason, a.applied) for a in rejected} == {("rejected", REASON, True)}
    assert len({a.candidate_id for a in rejected}) == len(rejected)
    seed = rejected[0].current_id
    assert (job.best_candidate_id, job.best_score) == (seed, rejected[0].current_score)
    assert all(a.current_id == seed for a in rejected)
    assert [e.kind for e in store.list_events(job_id)].count("best_updated") == 1  # the seed


def test_gepa_reflects_with_the_reason_of_a_rejection() -> None:
    from test_gepa_support import reflect_reply, word_problem_context, word_problems

    prompts: list[str] = []

    def reply(messages: Sequence[ChatMessage]) -> str:
        prompts.append(messages[-1]["content"])
        return reflect_reply(messages)

    dataset = word_problems()
    ctx = word_problem_context(
        dataset,
        budget=BudgetConfig(metric_calls=300),
        reflection=FakeLM(reply, model="fake/reflection"),
    )
    gate = ScriptedGate(["reject"])
    gate.asked = lambda: len(prompts)
    algorithm = build_algorithm("gepa", {})
    asyncio.run(run_search(algorithm, ctx, gate=gate))
    before = gate.prompts_before[0]
    assert 0 < before < len(prompts)
    assert not any(REASON in p for p in prompts[:before])
    assert all(REASON in p for p in prompts[before:])


def test_apo_critiques_with_the_reasons_of_rejections() -> None:
    lm = FakeLM([], default="The prompt is vague.", model="fake/gradient")
    (template,) = [t for t in load_prompts("critique") if t.name == "critique_bullets"]
    sampling = Sampling(temperature=0.0, max_tokens=50)
    fields = {"prompt": "Solve.", "component": "solve", "task": "", "experiments": "x"}
    asyncio.run(critique_prompt(lm, template, **fields, sampling=sampling, notes=[REASON]))
    asyncio.run(critique_prompt(lm, template, **fields, sampling=sampling))
    noted, plain = (call[-1]["content"] for call in lm.calls)
    assert REASON in noted
    assert REASON not in plain


def test_an_edit_becomes_a_child_scored_on_val(tmp_path: Path) -> None:
    store = MemoryStore()
    job_id = approval_job(store, tmp_path)
    edited_text = "Solve it carefully (variant person). Answer: <number>"
    decided: list[str] = []

    def edit(a: Approval) -> None:
        if decided:  # the first is edited, the rest approved
            store.decide_approval(a.id, "approve")
            return
        (name,) = store.get_candidate(job_id, a.candidate_id).components
        decided.append(name)
        store.decide_approval(a.id, "edit", edited={name: edited_text})

    job = run(store, job_id, edit)
    assert job.state == "succeeded"
    first = store.list_approvals(job_id)[0]
    assert (first.status, first.applied) == ("edited", True)
    child = store.get_candidate(job_id, first.result or "")
    assert child.components == {decided[0]: edited_text}
    assert (child.lineage.operation, child.lineage.parents) == (EDIT, (first.candidate_id,))
    scored = [e for e in store.list_events(job_id) if e.kind == "candidate_evaluated"]
    assert any(e.data["candidate_id"] == child.id and e.data["split"] == "val" for e in scored)


def test_a_job_stopped_while_it_waits_waits_again_when_resumed(tmp_path: Path) -> None:
    store = MemoryStore()
    job_id = approval_job(store, tmp_path)
    engine = JobEngine(store, job_id, poll_s=0.001)
    engine.on_note = lambda text: text.startswith("waiting") and engine.request("pause")
    paused = asyncio.run(engine.run())
    assert paused.state == "paused"
    (waiting,) = store.list_approvals(job_id)
    assert (waiting.status, waiting.applied) == ("pending", False)
    assert paused.best_candidate_id == waiting.current_id
    job = run(store, job_id, approve(store))  # waits for the same request first
    assert job.state == "succeeded"
    assert store.get_approval(waiting.id).applied
    assert store.list_approvals(job_id)[0].id == waiting.id


@pytest.mark.slow
def test_a_job_killed_while_it_waits_waits_again_when_resumed(tmp_path: Path) -> None:
    path = tmp_path / "emery.db"
    store = SQLiteStore(path)
    job_id = approval_job(store, tmp_path)
    worker = subprocess.Popen(
        js.worker_command(job_id, str(path)),
        env=js.worker_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        (waiting,) = js.wait_until(lambda: store.list_approvals(job_id), timeout=60)
        os.kill(worker.pid, signal.SIGKILL)
        assert worker.wait(timeout=30) == -signal.SIGKILL
    finally:
        worker.kill()
    killed = store.get_job(job_id)
    assert (killed.state, killed.best_candidate_id) == ("running", waiting.current_id)
    asked: list[str] = []

    def person(a: Approval) -> None:
        asked.append(a.id)
        store.decide_approval(a.id, "approve")

    job = run(store, job_id, person)
    assert job.state == "succeeded"
    assert asked[0] == waiting.id  # the same request, asked again after the kill
    assert store.get_approval(waiting.id).applied


def test_a_decision_made_while_the_job_is_paused_is_applied_when_it_resumes(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    job_id = approval_job(store, tmp_path)
    engine = JobEngine(store, job_id, poll_s=0.001)
    engine.on_note = lambda text: text.startswith("waiting") and engine.request("pause")
    assert asyncio.run(engine.run()).state == "paused"
    (waiting,) = store.list_approvals(job_id)
    store.decide_approval(waiting.id, "reject", reason=REASON)
    asked: list[str] = []
    job = run(store, job_id, lambda a: asked.append(a.id) or store.decide_approval(a.id, "approve"))
    assert job.state == "succeeded"
    assert waiting.id not in asked  # applied at once, not asked again
    assert store.get_approval(waiting.id).applied
    assert job.best_candidate_id != waiting.candidate_id


def test_an_older_store_gains_the_approvals_table_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE approvals")
    store = SQLiteStore(path)
    assert store.list_approvals() == []
    store.add_approval(Approval(id="a1", job_id="j", kind="best", candidate_id="c"))
    assert [a.id for a in store.list_approvals("j", status="pending")] == ["a1"]


def test_a_decided_request_cannot_be_decided_again_and_bad_ids_are_one_line() -> None:
    store = MemoryStore()
    first = store.add_approval(Approval(id="abc123", job_id="j", kind="best", candidate_id="c"))
    assert first.created_at > 0
    assert store.get_approval("abc").id == "abc123"  # a unique prefix will do
    store.decide_approval("abc123", "approve")
    with pytest.raises(IllegalTransition, match="approval request abc123 is already approved"):
        store.decide_approval("abc123", "reject", reason="late")
    with pytest.raises(NotFound, match="no approval request 'nope'"):
        store.get_approval("nope")
    with pytest.raises(ConfigError, match="unknown action 'maybe'"):
        store.decide_approval("abc123", "maybe")


def test_the_reflection_is_shown_the_latest_reasons_only_when_there_are_some() -> None:
    chat: list[ChatMessage] = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert with_reviewer_notes(chat, []) == chat
    noted = with_reviewer_notes(chat, ["a", " ", "b", "c", "d"])
    assert noted[0] == chat[0]
    assert noted[1]["content"].startswith("u\n\nA person reviewing this search rejected")
    assert "- a" not in noted[1]["content"]
    assert all(f"- {r}" in noted[1]["content"] for r in "bcd")


def test_gepa_adopts_an_edit_into_its_pool() -> None:
    from test_gepa_support import reflection_lm, word_problem_context, word_problems

    dataset = word_problems()
    ctx = word_problem_context(
        dataset, budget=BudgetConfig(metric_calls=300), reflection=reflection_lm()
    )
    gate = ScriptedGate(["edit", "approve"])
    algorithm = build_algorithm("gepa", {})
    applied: list[Approval] = []

    async def on_step(record: StepRecord) -> None:
        applied.extend(a for a in record.approvals if a.applied)

    outcome = asyncio.run(run_search(algorithm, ctx, on_step=on_step, gate=gate))
    assert gate.made, "GEPA found no better candidate to ask about"
    assert applied[0].status == "edited"
    child_id = applied[0].result
    assert child_id is not None
    assert outcome.state.has(child_id)  # in the pool, scored on every val example
    assert len(outcome.state.entry(child_id).val_scores) == len(dataset.val)


def test_gepa_shows_the_reasons_when_it_asks_for_a_new_module() -> None:
    from harness_support import RETRYING, flaky_store, lookup_examples, lookup_reply

    from emery.algorithms.code_proposals import CodeProposals
    from emery.algorithms.context import build_search_context
    from emery.algorithms.gepa.reflection_proposer import ReflectionProposer
    from emery.algorithms.gepa.settings import GepaSettings
    from emery.systems.harness.code import SEED_CODE

    system, dataset = flaky_store()
    reflection = FakeLM([], default=f"```python\n{RETRYING}```", model="fake/reflection")
    lms = {"task": FakeLM(lookup_reply, model="fake/lookup"), "reflection": reflection}
    ctx = build_search_context(system=system, dataset=dataset, verifier=None, lms=lms)
    ctx.reviewer_notes.append(REASON)
    examples = lookup_examples(1, "k")
    failed = [ExampleResult(candidate_id="c", example_id="k-0", score=0.0, feedback="busy")]
    asyncio.run(
        ReflectionProposer(GepaSettings()).propose_module(
            ctx,
            CodeProposals(system, "lookups"),
            iteration=1,
            component="code",
            current=SEED_CODE,
            examples=examples,
            results=failed,
        )
    )
    assert REASON in reflection.calls[0][-1]["content"]


def test_an_edit_the_budget_cannot_score_is_applied_unscored() -> None:
    from test_gepa_support import reflection_lm, word_problem_context, word_problems

    dataset = word_problems()
    ctx = word_problem_context(
        dataset, budget=BudgetConfig(metric_calls=300), reflection=reflection_lm()
    )
    gate = ScriptedGate(["edit"])
    gate.asked = lambda: setattr(ctx.budget.usage, "metric_calls", 300) or 0  # spent meanwhile
    applied: list[Approval] = []

    async def on_step(record: StepRecord) -> None:
        applied.extend(a for a in record.approvals if a.applied)

    outcome = asyncio.run(run_search(build_algorithm("gepa", {}), ctx, on_step=on_step, gate=gate))
    (unscored,) = applied
    assert (unscored.status, unscored.result) == ("edited", "not scored: the budget ran out")
    assert outcome.state.best_candidate_id == unscored.current_id
    assert not any(c.lineage.operation == EDIT for c in ctx.candidates.values())


class ScriptedGate:
    """An in-memory gate whose person takes ``actions`` in turn (the last one repeats)."""

    EDIT_TEXT = "Add, subtract, multiply or divide as asked. End with 'Answer: <number>'."

    def __init__(self, actions: list[str]) -> None:
        self.actions = actions
        self.made: list[Approval] = []
        self.declines: list[Approval] = []
        self.prompts_before: list[int] = []
        self.asked: Callable[[], int] = lambda: 0

    def open(self) -> Approval | None:
        return None

    def request(self, **fields: Any) -> Approval:
        approval = Approval(id=f"a{len(self.made)}", job_id="j", kind="best", **fields)
        self.made.append(approval)
        return approval

    async def decision(self, approval: Approval) -> Approval:
        action = self.actions[min(len(self.made), len(self.actions)) - 1]
        decided = approval.model_copy(update={"status": ACTIONS[action]})
        if action == "reject":
            decided = decided.model_copy(update={"reason": REASON})
            self.declines.append(decided)
            self.prompts_before.append(self.asked())
        if action == "edit":
            decided = decided.model_copy(update={"edited": {"solve": self.EDIT_TEXT}})
            self.asked()
        return decided

    def declined(self) -> list[Approval]:
        return list(self.declines)
