"""Demo sets: labeled demos in the parser's format, bootstrapped demos only from passing runs."""

from __future__ import annotations

from collections.abc import Sequence

from events_support import payloads
from test_mipro_support import (
    TASK,
    TWO_STAGES,
    dataset,
    format_and_demos_lm,
    gold_table,
    make_ctx,
    proposer_lm,
    run_recorded,
    system_text,
    two_stage_lm,
)

from emery.algorithms.base import SearchContext
from emery.algorithms.context import build_search_context
from emery.algorithms.labeled import labeled_demos, labeled_stage
from emery.algorithms.mipro import MiproSettings, MiproState
from emery.algorithms.mipro.demos import REASONING_SENTENCE, teacher_candidate
from emery.algorithms.mipro.events import MiproDemosBootstrapped
from emery.core.models import ChatMessage, Dataset, Demo, Example
from emery.lm import FakeLM
from emery.systems.formats import format_sentence
from emery.systems.prompt_program import (
    MessageTemplate,
    PromptProgram,
    PromptProgramConfig,
    StageConfig,
)
from emery.verifiers.config import build_verifier

BOOTSTRAP_ONLY = MiproSettings(num_trials=2, minibatch_size=5)


async def test_labeled_demos_are_gold_in_the_parser_format() -> None:
    program = PromptProgram(TASK.program)
    data = dataset()
    broken = Example(id="broken", input={"question": "How many?"}, expected="many")

    demos = await labeled_demos(
        program,
        program.stages["solve"],
        [broken, *data.train],
        build_verifier(TASK.verifier),
        limit=3,
        threshold=1.0,
    )

    assert len(demos) == 3
    gold = {e.id: e.expected for e in data.train}
    for demo in demos:
        assert demo.source == "labeled"
        assert demo.example_id in gold
        assert demo.output == f"Answer: {gold[demo.example_id]}"
        assert demo.inputs == {"question": demo.inputs["question"]}


def even_only_lm(gold: dict[str, int]) -> FakeLM:
    """With the format in its instruction it answers right only when the answer is even."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        answer = gold[messages[-1]["content"]]
        if "Answer:" in system_text(messages):
            return f"Thinking.\nAnswer: {answer if answer % 2 == 0 else answer + 1}"
        return "no idea"

    return FakeLM(reply, model="fake/even-only")


async def test_bootstrapped_demos_come_only_from_runs_that_pass_the_verifier() -> None:
    data = dataset(n_train=24)
    gold = gold_table(data)
    ctx = _ctx(data, even_only_lm(gold))

    outcome, records = await run_recorded(BOOTSTRAP_ONLY, ctx, stop_after=2)

    state = outcome.state
    assert isinstance(state, MiproState)
    teacher_runs = [r for rec in records for r in rec.results if r.split == "train"]
    assert state.bootstrap_runs == len(teacher_runs) > 0
    passed = {r.example_id for r in teacher_runs if r.score == 1.0}
    failed = {r.example_id for r in teacher_runs if r.score < 1.0}
    assert passed
    assert failed
    assert state.bootstrap_passed == len(passed)
    by_id = {e.id: e for e in data.train}
    bootstrapped = [
        demo
        for demo_set in state.demo_sets["solve"]
        if demo_set.kind == "bootstrapped"
        for demo in demo_set.demos
    ]
    assert bootstrapped
    for demo in bootstrapped:
        assert demo.example_id in passed
        assert int(by_id[demo.example_id].expected) % 2 == 0
        assert demo.output.startswith("Thinking.")
    assert {d.example_id for d in bootstrapped} <= passed
    assert not {d.example_id for d in bootstrapped} & failed
    # every set shown whole holds at most max_*_demos; a nearest set is a pool to draw from
    assert all(len(s.demos) <= 4 for s in state.demo_sets["solve"] if s.kind != "nearest")
    event = payloads(records, MiproDemosBootstrapped)[0]
    assert event.passed == len(passed)
    assert event.runs == len(teacher_runs)
    # bootstrapping rollouts are charged like every other rollout
    assert ctx.budget.usage.metric_calls == len(data.val) + len(teacher_runs)


async def test_bootstrapping_works_when_the_seed_scores_zero() -> None:
    data = dataset()
    ctx = _ctx(data, format_and_demos_lm(data))
    settings = BOOTSTRAP_ONLY.model_copy(update={"teacher_labeled_demos": "always"})

    outcome, _ = await run_recorded(settings, ctx, stop_after=2)

    state = outcome.state
    assert isinstance(state, MiproState)
    assert state.baseline_val_score == 0.0
    kinds = [s.kind for s in state.demo_sets["solve"]]
    assert kinds[:2] == ["empty", "labeled"]
    assert "bootstrapped" in kinds
    teacher = ctx.candidates[state.teacher_candidate_id or ""]
    assert teacher.components["solve"] == (
        f"Answer the question. {REASONING_SENTENCE} {format_sentence(TASK.program.stages[0])}"
    )
    assert [d.source for d in teacher.demos["solve"]] == ["labeled"] * 4
    labeled_ids = {d.example_id for d in teacher.demos["solve"]}
    for demo_set in state.demo_sets["solve"]:
        if demo_set.kind != "bootstrapped":
            continue
        assert all(d.output.startswith("Work it out.") for d in demo_set.demos)
        assert not {d.example_id for d in demo_set.demos} & labeled_ids


def test_teacher_shows_labeled_demos_only_where_no_format_sentence_exists() -> None:
    answer = PromptProgram(TASK.program)
    label = PromptProgram(
        PromptProgramConfig(
            stages=[
                StageConfig(
                    name="classify",
                    instruction="Classify.",
                    messages=[MessageTemplate(template="{message}")],
                )
            ]
        )
    )
    demo = Demo(inputs={"q": "x"}, output="y", source="labeled")

    numeric = teacher_candidate(
        answer.seed_candidate(),
        answer,
        {"solve": [demo]},
        format_hint=True,
        use_labeled="auto",
        reasoning=True,
    )
    raw = teacher_candidate(
        label.seed_candidate(),
        label,
        {"classify": [demo]},
        format_hint=True,
        use_labeled="auto",
        reasoning=True,
    )

    assert "solve" not in numeric.demos
    assert REASONING_SENTENCE in numeric.components["solve"]
    assert raw.demos["classify"] == (demo,)
    assert raw.components["classify"] == "Classify."  # a raw reply must stay bare


async def test_without_teacher_help_a_zero_seed_bootstraps_nothing() -> None:
    data = dataset()
    settings = BOOTSTRAP_ONLY.model_copy(
        update={
            "teacher_format_hint": False,
            "teacher_labeled_demos": "never",
            "teacher_reasoning": False,
            "bootstrap_normalise": False,
        }
    )

    outcome, _ = await run_recorded(settings, _ctx(data, format_and_demos_lm(data)), stop_after=2)

    state = outcome.state
    assert isinstance(state, MiproState)
    assert state.bootstrap_runs > 0
    assert state.bootstrap_passed == 0
    assert [s.kind for s in state.demo_sets["solve"]] == ["empty", "labeled", "nearest"]


async def test_right_answers_in_the_wrong_format_become_worked_demos() -> None:
    """The unhelped teacher says "The answer is N." (right, unparseable): normalised, those
    runs become demos whose reply ends with the parser's line."""
    data = dataset()
    settings = BOOTSTRAP_ONLY.model_copy(
        update={
            "teacher_format_hint": False,
            "teacher_labeled_demos": "never",
            "teacher_reasoning": False,
        }
    )

    outcome, _ = await run_recorded(settings, _ctx(data, format_and_demos_lm(data)), stop_after=2)

    state = outcome.state
    assert isinstance(state, MiproState)
    assert state.bootstrap_passed == state.bootstrap_normalised > 0
    gold = gold_table(data)
    boot = [s for s in state.demo_sets["solve"] if s.kind == "bootstrapped"]
    assert boot
    for demo in (d for s in boot for d in s.demos):
        answer = gold[demo.inputs["question"]]
        assert demo.output == f"The answer is {answer}.\nAnswer: {answer}"


async def test_multi_stage_demos_come_from_whole_program_runs() -> None:
    data = dataset()
    program = PromptProgram(TWO_STAGES)
    ctx = build_search_context(
        system=program,
        dataset=data,
        verifier=build_verifier(TASK.verifier),
        lms={"task": two_stage_lm(gold_table(data)), "proposer": proposer_lm()},
    )

    assert labeled_stage(program, {"question"})[0] is None
    outcome, _ = await run_recorded(BOOTSTRAP_ONLY, ctx, stop_after=2)

    state = outcome.state
    assert isinstance(state, MiproState)
    assert "no gold" in state.labeled_note["solve"]
    for stage in ("plan", "solve"):
        kinds = [s.kind for s in state.demo_sets[stage]]
        assert kinds[0] == "empty"
        assert "labeled" not in kinds
        assert "bootstrapped" in kinds
    plan_demo = state.demo_sets["plan"][1].demos[0]
    solve_demo = state.demo_sets["solve"][1].demos[0]
    assert plan_demo.example_id == solve_demo.example_id
    assert plan_demo.output == "Add or multiply the numbers."
    assert set(solve_demo.inputs) == {"plan", "question"}
    assert solve_demo.inputs["plan"] == "Add or multiply the numbers."


def _ctx(data: Dataset, task_lm: FakeLM) -> SearchContext:
    return make_ctx(data, task_lm, proposer_lm())
