"""APO's search loop on a scripted task model (FakeLM): proposals, beam, best, failures."""

from __future__ import annotations

import pytest
from events_support import assert_best_updates_follow_the_state, payloads
from test_apo_support import (
    CONSERVATIVE,
    GOOD,
    HALF,
    context,
    dataset,
    fenced,
    program,
    reflection_lm,
    run,
    settings,
    task_reply,
)

from emery.algorithms import build_algorithm
from emery.algorithms.apo import Apo, ApoSettings, ApoState
from emery.algorithms.apo.events import (
    ApoBeamUpdated,
    ApoCritique,
    ApoEdit,
    ApoExpansionSkipped,
    ApoFullValScored,
    ApoRoundCut,
    ApoRoundStarted,
)
from emery.core.errors import ConfigError
from emery.core.events import BaselineEvaluated, BestUpdated, CandidateEvaluated, CandidateProposed
from emery.core.models import Lineage
from emery.evaluation.budget import BudgetConfig
from emery.lm import FakeLM


async def test_search_finds_the_better_prompt_and_reports_it() -> None:
    ctx = context(reflection_lm([fenced(HALF), fenced(GOOD)]))
    outcome, records = await run(ctx, Apo(settings(rounds=1)))

    state = outcome.state
    assert isinstance(state, ApoState)
    assert outcome.reason == "completed 1 rounds"
    assert state.baseline_val_score == 0.0
    assert state.best_val_score == 1.0
    best = ctx.candidates[state.best_candidate_id]
    assert best.components["solve"] == GOOD
    assert best.lineage.operation == "apo_edit"
    assert best.lineage.parents == (state.seed_candidate_id,)
    # beam_width 2 x branch_factor 2 = 4 expansions, each with a critique and an edit
    assert len(payloads(records, ApoCritique)) == 4
    edits = payloads(records, ApoEdit)
    assert len(edits) == 4
    assert all(e.critique for e in payloads(records, ApoCritique))
    assert {e.proposal for e in edits} == {HALF, GOOD}
    accepted = [e for e in edits if e.accepted]
    assert len(accepted) == 2  # the repeats of HALF and GOOD are duplicates of this round
    assert {e.reason for e in edits if not e.accepted} == {
        f"same text as candidate {accepted[1].child_id} of this round"
    }
    beam = payloads(records, ApoBeamUpdated)[-1].beam
    # the seed (0 of 6 on the val batch) is not shown worse than HALF (3 of 6): it keeps
    # its place, and the evidence is in the event
    assert [entry.candidate_id for entry in beam] == [best.id, state.seed_candidate_id]
    assert beam[1].evidence is not None
    assert beam[1].evidence.verdict == "undecided"
    full = payloads(records, ApoFullValScored)
    assert full == [
        ApoFullValScored(
            round=0, candidate_id=best.id, score=1.0, n=6, best_score=0.0, new_best=True
        )
    ]
    # The seed is the first best (the baseline), the leader of the round the next.
    assert payloads(records, BestUpdated) == [
        BestUpdated(candidate_id=state.seed_candidate_id, score=0.0),
        BestUpdated(candidate_id=best.id, score=1.0, previous_score=0.0),
    ]
    assert_best_updates_follow_the_state(records)


async def test_critique_sees_the_experiments_and_the_edit_sees_the_critique() -> None:
    reflection = reflection_lm([fenced(GOOD)])
    ctx = context(reflection)
    await run(ctx, Apo(settings(rounds=1, beam_width=1, branch_factor=1)))

    critique_request, edit_request = (call[-1]["content"] for call in reflection.calls)
    assert "Reply." in critique_request
    assert "WRONG" in critique_request or "FAILED" in critique_request
    assert "Compute 1" in critique_request  # a train question, in the conversation
    assert "Expected: 1" in critique_request
    assert "The reply must end with 'Answer: <number>'" in critique_request  # the task
    assert "End with the line Answer: <number>." in edit_request  # the critique
    assert "(there are none)" in edit_request


async def test_children_that_drop_or_invent_placeholders_are_rejected() -> None:
    seed = "Read {question} and reply."
    proposals = iter(
        [
            "Read {context} and end with Answer: <number>.",  # swaps {question} for {context}
            "Read {question} and {context}; end with Answer: <number>.",  # invents {context}
            "Read {question} and end with the line Answer: <number>.",  # keeps it
            "Read {question}. End with Answer: <number>.",  # keeps it
        ]
    )

    def edit(content: str) -> str:
        return fenced(next(proposals))

    ctx = context(reflection_lm(edit), system=program(seed))
    outcome, records = await run(ctx, Apo(settings(rounds=1)))

    edits = payloads(records, ApoEdit)
    assert [e.reason for e in edits] == [
        "invented placeholder {context}",  # {question} is put back; {context} is not known
        "invented placeholder {context}",
        None,
        None,
    ]
    assert [e.child_id is None for e in edits] == [True, True, False, False]
    proposed = payloads(records, CandidateProposed)
    assert len(proposed) == 2  # rejected edits never become candidates
    for candidate_id in outcome.state.beam:
        assert "{question}" in ctx.candidates[candidate_id].components["solve"]
    assert outcome.state.edits_rejected == 2
    assert outcome.state.edits_accepted == 2


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("```\n1,234,567.00 dollars\n```", "an answer, not an instruction"),
        ("```\nReply.\n```", "too short (6 characters)"),
        ("Example 1: WRONG\n[reply] It is 10.\nChecker: wrong", "copies the material"),
        ("", "the reply holds no prompt"),
    ],
)
async def test_unusable_edits_are_rejected_with_a_reason(reply: str, reason: str) -> None:
    ctx = context(reflection_lm([reply]))
    outcome, records = await run(ctx, Apo(settings(rounds=1, beam_width=1, branch_factor=1)))

    (edit,) = payloads(records, ApoEdit)
    assert not edit.accepted
    assert edit.reason.startswith(reason)
    assert outcome.state.best_candidate_id == outcome.state.seed_candidate_id
    assert payloads(records, ApoBeamUpdated)[0].reason == "no child was accepted this round"


async def test_conservative_edits_append_one_sentence() -> None:
    addition = "End with the line Answer: <number>."
    ctx = context(reflection_lm([fenced(addition)]))
    outcome, records = await run(
        ctx, Apo(settings(rounds=1, beam_width=1, branch_factor=1, edit_prompts=[CONSERVATIVE]))
    )
    (edit,) = payloads(records, ApoEdit)
    assert edit.variant == "edit_conservative"
    assert edit.proposal == "Reply. " + addition
    assert edit.accepted
    assert ctx.candidates[outcome.state.best_candidate_id].components["solve"] == (
        "Reply. " + addition
    )
    assert outcome.state.best_val_score == 1.0


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("```\nAnswer: 10\n```", "too short"),
        ("```\nReply.\n```", "adds nothing the prompt does not already say"),
        ("```\nWhat is the answer?\n```", "a question back"),
        ("```\n" + "Check every step. " * 21 + "\n```", "too long to add (63 words"),
        ("```\nUse {question} well.\n```", "invented placeholder {question}"),
    ],
)
async def test_conservative_edits_that_add_nothing_usable_are_rejected(
    reply: str, reason: str
) -> None:
    ctx = context(reflection_lm([reply]))
    _, records = await run(
        ctx, Apo(settings(rounds=1, beam_width=1, branch_factor=1, edit_prompts=[CONSERVATIVE]))
    )
    (edit,) = payloads(records, ApoEdit)
    assert not edit.accepted
    assert edit.reason.startswith(reason)


async def test_default_prompts_draw_every_variant() -> None:
    def edit(content: str) -> str:
        return fenced("Think, then end with the line Answer: <number>.")

    ctx = context(reflection_lm(edit))
    _, records = await run(
        ctx,
        Apo(
            ApoSettings(
                beam_width=4,
                branch_factor=4,
                rounds=1,
                gradient_batch_size=2,
                skip_perfect_batches=False,
            )
        ),
    )
    assert {e.variant for e in payloads(records, ApoCritique)} == {
        "critique_bullets",
        "critique_spans",
        "critique_audit",
    }
    assert {e.variant for e in payloads(records, ApoEdit)} == {
        "edit_rewrite",
        "edit_conservative",
    }


async def test_beam_keeps_the_top_k_on_the_val_batch() -> None:
    # Four children per round: two perfect texts, one half right, one always wrong.
    texts = [
        fenced(HALF),
        fenced(GOOD),
        fenced("Say what you think of it."),
        fenced(GOOD + " Be brief."),
    ]
    ctx = context(reflection_lm(texts))
    outcome, records = await run(ctx, Apo(settings(rounds=1, beam_width=3, branch_factor=2)))

    update = payloads(records, ApoBeamUpdated)[-1]
    scores = {e.candidate_id: e.val_batch_score for e in update.beam}
    # the seed (0.0) is not shown worse than HALF (0.5) on 6 examples: it keeps its place
    assert list(scores.values()) == [1.0, 1.0, 0.0]
    seed = outcome.state.seed_candidate_id
    by_text = {ctx.candidates[c].components["solve"]: c for c in outcome.state.beam}
    assert set(by_text) == {GOOD, GOOD + " Be brief.", ctx.candidates[seed].components["solve"]}
    assert outcome.state.beam[:2] == [by_text[GOOD], by_text[GOOD + " Be brief."]]  # tie: earlier
    assert outcome.state.beam[2] == seed
    dropped = {e.candidate_id for e in update.dropped}
    edits = {e.proposal: e.child_id for e in payloads(records, ApoEdit)}
    assert dropped == {edits[HALF], edits["Say what you think of it."]}


async def test_round_parents_repeat_the_beam_and_cover_it() -> None:
    ctx = context(reflection_lm([fenced(HALF), fenced(GOOD), fenced(GOOD + " Be brief.")]))
    outcome, records = await run(ctx, Apo(settings(rounds=2, beam_width=3, branch_factor=1)))

    first, second = payloads(records, ApoRoundStarted)
    seed = outcome.state.seed_candidate_id
    assert first.parents == [seed, seed, seed]
    assert len(set(second.parents)) == 3


async def _select_with(full_val_task: FakeLM, best_score: float) -> tuple[ApoState, list[str]]:
    """Run the select step on a hand-made state whose only child leads the val batch."""
    ctx = context(reflection_lm([fenced(GOOD)]), task=full_val_task)
    apo = Apo(settings())
    state = await apo.start(ctx)
    seed = ctx.candidates[state.seed_candidate_id]
    child = ctx.add_candidate(
        seed.derive(
            components={"solve": HALF},
            lineage=Lineage(parents=(seed.id,), generation=1, operation="apo_edit"),
        )
    )
    state.best_val_score = best_score
    state.phase = "select"
    state.children = [child.id]
    state.pool[child.id] = child
    state.val_batch = [e.id for e in ctx.val]
    state.val_batch_scores = {seed.id: 0.0, child.id: 1.0}
    ctx.log.drain()
    stepped = await apo.step(ctx, state)
    return stepped, [e.kind for e in ctx.log.events]


async def test_best_is_replaced_only_on_strict_improvement_on_full_val() -> None:
    # HALF scores 0.5 on full val (the even answers): a tie with a best of 0.5 keeps the best.
    tied, kinds = await _select_with(FakeLM(task_reply), best_score=0.5)
    assert tied.best_candidate_id == tied.seed_candidate_id
    assert tied.best_val_score == 0.5
    assert tied.full_val_scores[tied.beam[0]] == 0.5
    assert "best_updated" not in kinds
    assert "apo.full_val_scored" in kinds

    better, kinds = await _select_with(FakeLM(task_reply), best_score=0.49)
    assert better.best_candidate_id == better.beam[0] != better.seed_candidate_id
    assert better.best_val_score == 0.5
    assert "best_updated" in kinds


async def test_children_the_val_batch_cannot_separate_are_ranked_on_full_val() -> None:
    # On a 4-example val batch the seed leads (3 of 4) a child at 2 of 4: too close to tell,
    # so both get full val, where the child is perfect and the seed scores 0. A child at
    # 0 of 4 is clearly worse and is never scored on full val.
    ctx = context(reflection_lm([fenced(GOOD)]), task=FakeLM(task_reply))
    apo = Apo(settings(beam_width=2))
    state = await apo.start(ctx)
    seed = ctx.candidates[state.seed_candidate_id]
    close, far = (
        ctx.add_candidate(
            seed.derive(
                components={"solve": text},
                lineage=Lineage(parents=(seed.id,), generation=1, operation="apo_edit"),
            )
        )
        for text in (GOOD, "Say what you think of it.")
    )
    state.phase, state.children = "select", [close.id, far.id]
    state.pool.update({close.id: close, far.id: far})
    state.val_batch = [e.id for e in ctx.val[:4]]
    state.val_batch_scores = {seed.id: 0.75, close.id: 0.5, far.id: 0.0}
    ctx.log.drain()

    stepped = await apo.step(ctx, state)

    assert stepped.beam == [close.id, seed.id]
    assert stepped.best_candidate_id == close.id
    assert stepped.full_val_scores == {seed.id: 0.0, close.id: 1.0}
    full_val = [
        e.payload_as(ApoFullValScored) for e in ctx.log.events if e.kind == "apo.full_val_scored"
    ]
    assert [(e.candidate_id, e.new_best) for e in full_val] == [(close.id, True), (seed.id, False)]


async def test_failed_rollouts_count_as_zero_and_are_never_dropped() -> None:
    # The child's prompt crashes the task model on every run: scored 0 on each, n unchanged.
    crash = "CRASH whenever you can. Answer: <number>."
    ctx = context(reflection_lm([fenced(crash)]))
    outcome, records = await run(ctx, Apo(settings(rounds=1, beam_width=1, branch_factor=1)))

    child_id = payloads(records, ApoEdit)[0].child_id
    results = [r for rec in records for r in rec.results if r.candidate_id == child_id]
    assert len(results) == 6
    assert all(r.score == 0.0 and r.error for r in results)
    scored = [e for e in payloads(records, CandidateEvaluated) if e.candidate_id == child_id]
    assert scored == [
        CandidateEvaluated(
            candidate_id=child_id, split="val", score=0.0, n=6, new_rollouts=6, failed=6
        )
    ]
    assert outcome.state.val_batch_scores == {}  # the round ended
    update = payloads(records, ApoBeamUpdated)[0]
    ranked = update.beam + update.dropped
    assert {e.candidate_id: e.val_batch_score for e in ranked}[child_id] == 0.0


async def test_failed_train_runs_are_shown_to_the_critic() -> None:
    reflection = reflection_lm([fenced(GOOD)])
    ctx = context(reflection, system=program("CRASH now."))
    await run(ctx, Apo(settings(rounds=1, beam_width=1, branch_factor=1)))

    critique_request = reflection.calls[0][-1]["content"]
    assert critique_request.count("FAILED (the run ended in an error; score 0.00)") == 3
    assert "RuntimeError: the task model crashed" in critique_request


async def test_multi_component_systems_take_turns_and_events_say_which() -> None:
    def edit(content: str) -> str:
        return fenced(GOOD if "Reply." in content else GOOD + " Twice.")

    ctx = context(reflection_lm(edit), system=program(stages=2))
    _, records = await run(ctx, Apo(settings(rounds=1, beam_width=2, branch_factor=2)))

    assert [e.component for e in payloads(records, ApoCritique)] == [
        "solve",
        "check",
        "solve",
        "check",
    ]
    first_child = payloads(records, ApoEdit)[0].child_id
    child = ctx.candidates[first_child]
    assert child.components == {"solve": GOOD, "check": "Reply."}
    proposed = payloads(records, CandidateProposed)
    assert proposed[0].components == ["solve"]


async def test_components_setting_limits_what_is_edited() -> None:
    ctx = context(reflection_lm([fenced(GOOD)]), system=program(stages=2))
    _, records = await run(
        ctx, Apo(settings(rounds=1, components=["check"], component_selection="random"))
    )
    assert {e.component for e in payloads(records, ApoCritique)} == {"check"}

    bad = context(reflection_lm([fenced(GOOD)]), system=program(stages=2))
    with pytest.raises(ConfigError, match="unknown component 'answer'"):
        await run(bad, Apo(settings(components=["answer"])))


async def test_perfect_train_batches_propose_nothing() -> None:
    reflection = reflection_lm([fenced(HALF)])
    ctx = context(reflection, system=program(GOOD))
    outcome, records = await run(ctx, Apo(settings(rounds=2)))

    assert reflection.calls == []
    assert len(payloads(records, ApoExpansionSkipped)) == 8
    assert outcome.state.best_val_score == 1.0
    assert outcome.reason == "completed 2 rounds"


async def test_initial_validation_can_be_skipped() -> None:
    ctx = context(reflection_lm([fenced(GOOD)]))
    outcome, records = await run(
        ctx, Apo(settings(rounds=1, beam_width=1, branch_factor=1, run_initial_validation=False))
    )
    assert payloads(records, BaselineEvaluated) == []
    assert outcome.state.baseline_val_score is None
    assert outcome.state.best_val_score == 1.0
    assert_best_updates_follow_the_state(records)
    assert [u.previous_score for u in payloads(records, BestUpdated)] == [None]


async def test_a_small_budget_cuts_the_round_and_still_scores_its_children() -> None:
    # baseline 6 + expansion 3 + scoring a child on val 6 = 15; a second expansion would
    # need up to 3 + 6 more, which 20 metric calls cannot pay.
    ctx = context(reflection_lm([fenced(GOOD)]), budget=BudgetConfig(metric_calls=20))
    outcome, records = await run(ctx, Apo(settings(rounds=3)))

    cut, last = payloads(records, ApoRoundCut)
    assert (cut.round, cut.expansions_done, cut.children) == (0, 1, 1)
    assert (last.round, last.children) == (1, 0)
    assert outcome.state.best_val_score == 1.0
    assert ctx.budget.usage.metric_calls <= 20
    assert (outcome.state.done_reason or "").startswith("metric_calls")


async def test_sampling_uses_the_diversity_temperature_and_a_seed() -> None:
    from fake_models import RecordingLM

    recording = RecordingLM(reply=fenced(GOOD))
    ctx = context(reflection_lm([fenced(GOOD)]))
    ctx.lms = {**ctx.lms, "proposer": recording}  # type: ignore[misc]
    apo = build_algorithm(
        "apo",
        {
            "rounds": 1,
            "beam_width": 1,
            "branch_factor": 1,
            "gradient_role": "proposer",
            "edit_role": "proposer",
            "diversity_temperature": 0.7,
        },
    )
    await run(ctx, apo)
    assert len(recording.params) == 2
    assert {p["temperature"] for p in recording.params} == {0.7}
    assert all(isinstance(p["seed"], int) for p in recording.params)


async def test_missing_roles_and_empty_splits_are_config_errors() -> None:
    ctx = context(reflection_lm([fenced(GOOD)]))
    with pytest.raises(ConfigError, match="no LM is configured for role 'judge'"):
        await run(ctx, Apo(settings(edit_role="judge")))
    empty = context(reflection_lm([fenced(GOOD)]), data=dataset(n_train=0))
    with pytest.raises(ConfigError, match="train split is empty"):
        await run(empty, Apo(settings()))
