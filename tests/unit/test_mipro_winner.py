"""MIPRO's winner (``mipro.winner``): a combination replaces the best only when its mean
tops the best's and it is shown better than the seed on val, or, where val cannot tell, on
val and further train examples (the confirmation, paid for by trials that stop early)."""

from __future__ import annotations

from collections.abc import Sequence

from test_mipro_support import dataset, events_of, gold_table, make_ctx, proposer_lm, run_recorded

from emery.algorithms.mipro import MiproSettings, MiproState
from emery.algorithms.mipro.events import MiproTrial, MiproWinnerChecked
from emery.algorithms.mipro.winner import shown_better
from emery.core.example_result import ExampleResult
from emery.core.models import ChatMessage, Dataset, Lineage
from emery.evaluation.budget import BudgetConfig
from emery.evaluation.service import eval_key
from emery.lm import FakeLM

PROPOSAL = "Read each question twice, then reply with care."
PROPOSALS = dict.fromkeys(
    ("none", "concise", "creative", "persona", "high_stakes", "describe"), PROPOSAL
)

# one trial: the proposal against the seed (no demo sets, no layouts, no format hint)
ONE_TRIAL = MiproSettings(
    num_instructions=2,
    num_demo_sets=1,
    num_trials=1,
    search_layouts=False,
    format_hint_instruction=False,
)
VAL_ALONE = ONE_TRIAL.model_copy(update={"winner_examples": 0})


def scripted_lm(data: Dataset, helped: set[str]) -> FakeLM:
    """Right on every question whose index (train then val) is even; the proposal is also
    right on the questions in ``helped``."""
    gold = gold_table(data)
    even = {example.input["question"] for example in [*data.train, *data.val][::2]}

    def reply(messages: Sequence[ChatMessage]) -> str:
        question = messages[-1]["content"]
        proposal = PROPOSAL in messages[0]["content"]
        right = question in even or (proposal and question in helped)
        return f"Answer: {gold[question] if right else gold[question] + 1}"

    return FakeLM(reply, model="fake/scripted")


def odd(examples: Sequence[object], data: Dataset) -> list[str]:
    """The questions of ``examples`` the seed gets wrong (odd indexes of train then val)."""
    wrong = {e.input["question"] for e in [*data.train, *data.val][1::2]}
    return [e.input["question"] for e in examples if e.input["question"] in wrong]  # type: ignore[attr-defined]


async def test_a_proposal_one_val_answer_ahead_by_luck_is_never_the_winner() -> None:
    data = dataset(n_train=40, n_val=30)
    lucky = set(odd(data.val, data)[:1])  # one val answer; nothing on train
    for settings in (VAL_ALONE, ONE_TRIAL):
        ctx = make_ctx(data, scripted_lm(data, lucky), proposer_lm(PROPOSALS), seed=1)
        outcome, records = await run_recorded(settings, ctx)

        st = outcome.state
        assert isinstance(st, MiproState)
        (trial,) = [t for t in st.trials if t.kind == "full"]
        assert trial.score > st.trials[0].score, "its mean val tops the seed's"
        assert st.best_candidate_id == ctx.seed_candidate.id, "one answer of 30 shows nothing"
        checks = events_of(records, MiproWinnerChecked.kind)
        if settings.winner_examples == 0:
            assert checks == []
        else:
            (check,) = checks
            assert check["train_examples"] == 30, "tied on every train pair: all 30 looked at"
            assert check["shown_better"] is False
            assert ctx.budget.usage.metric_calls == 30 + 30 + 2 * 30


async def test_a_small_real_gain_val_cannot_show_is_confirmed_on_train() -> None:
    data = dataset(n_train=40, n_val=30)
    # one val answer ahead, as the lucky one, and 1 in 4 of the seed's misses on train
    helped = set(odd(data.val, data)[:1]) | set(odd(data.train, data)[::4])
    val_alone = make_ctx(data, scripted_lm(data, helped), proposer_lm(PROPOSALS))
    outcome, _ = await run_recorded(VAL_ALONE, val_alone)
    assert outcome.state.best_candidate_id == val_alone.seed_candidate.id

    ctx = make_ctx(data, scripted_lm(data, helped), proposer_lm(PROPOSALS))
    outcome, records = await run_recorded(ONE_TRIAL, ctx)

    st = outcome.state
    assert isinstance(st, MiproState)
    (check,) = events_of(records, MiproWinnerChecked.kind)
    assert check["shown_better"] is True
    assert st.best_candidate_id == check["candidate_id"] != ctx.seed_candidate.id
    # the seed and the trial on val (60), then both on train until shown better
    assert ctx.budget.usage.metric_calls == 60 + 2 * check["train_examples"]
    assert check["train_examples"] <= 20


async def test_a_clear_gain_on_val_wins_without_a_train_example() -> None:
    data = dataset(n_train=40, n_val=30)
    helped = set(odd(data.val, data)[:6])
    ctx = make_ctx(data, scripted_lm(data, helped), proposer_lm(PROPOSALS))
    outcome, records = await run_recorded(ONE_TRIAL, ctx)

    assert outcome.state.best_candidate_id != ctx.seed_candidate.id
    assert events_of(records, MiproWinnerChecked.kind) == []
    assert ctx.budget.usage.metric_calls == 60


async def test_the_confirmation_spends_only_what_the_trials_left() -> None:
    data = dataset(n_train=40, n_val=30)
    helped = set(odd(data.val, data)[:1]) | set(odd(data.train, data)[::4])
    budget = BudgetConfig(metric_calls=75)  # the seed and one trial on val, 15 calls left
    ctx = make_ctx(data, scripted_lm(data, helped), proposer_lm(PROPOSALS), budget=budget)
    outcome, records = await run_recorded(ONE_TRIAL, ctx)

    assert outcome.state.best_candidate_id == ctx.seed_candidate.id
    assert events_of(records, MiproWinnerChecked.kind) == []
    assert ctx.budget.usage.metric_calls == 60, "a chunk of 10 pairs costs 20: not paid"


async def test_a_trial_shown_worse_than_the_best_stops_early() -> None:
    data = dataset(n_train=40, n_val=30)
    gold = gold_table(data)

    def reply(messages: Sequence[ChatMessage]) -> str:  # the proposal is always wrong
        question = messages[-1]["content"]
        right = PROPOSAL not in messages[0]["content"] and len(question) % 2 == 0
        return f"Answer: {gold[question] if right else gold[question] + 1}"

    ctx = make_ctx(data, FakeLM(reply, model="fake/loser"), proposer_lm(PROPOSALS))
    outcome, records = await run_recorded(ONE_TRIAL, ctx)

    st = outcome.state
    assert isinstance(st, MiproState)
    (trial,) = [t for t in st.trials if t.kind != "baseline"]
    # the seed is right on 8 of 30: 2 of the first 10 (undecided), 5 of the first 20 (worse)
    assert (trial.kind, trial.n, trial.score) == ("minibatch", 20, 0.0)
    (event,) = events_of(records, MiproTrial.kind)
    assert event["stopped"] is True
    assert st.combos[trial.candidate_id].dropped
    assert st.best_candidate_id == ctx.seed_candidate.id
    assert ctx.budget.usage.metric_calls == 30 + 20, "10 of the trial's 30 calls saved"


def test_val_alone_shows_a_winner_better_than_the_seed_only_at_095() -> None:
    data = dataset(n_train=40, n_val=30)
    ctx = make_ctx(data, scripted_lm(data, set()), proposer_lm(PROPOSALS))
    seed = ctx.seed_candidate
    lineage = Lineage(parents=(seed.id,), generation=1, operation="mipro")
    first, later = (
        ctx.add_candidate(seed.derive(components={"solve": text}, lineage=lineage))
        for text in ("First.", "Later.")
    )
    right = {seed.id: range(12), first.id: range(14), later.id: range(20)}
    for candidate_id, rows in right.items():
        for index, example in enumerate(data.val):
            ctx.evaluations.known[eval_key(candidate_id, example.id, "val")] = ExampleResult(
                candidate_id=candidate_id,
                example_id=example.id,
                split="val",
                score=1.0 if index in rows else 0.0,
            )
    state = MiproState(best_candidate_id=seed.id, best_val_score=12 / 30)

    # two answers of 30 ahead of the seed, none behind: better at 0.6, not on val alone
    assert not shown_better(ctx, state, first.id, 14 / 30)
    # eight ahead, none behind: val alone shows it; the reference is the seed, so a best
    # two answers ahead (had its confirmation made it the best) holds nothing off
    assert shown_better(ctx, state, later.id, 20 / 30)
    state.best_candidate_id, state.best_val_score = first.id, 14 / 30
    assert shown_better(ctx, state, later.id, 20 / 30)
    assert not shown_better(ctx, state, first.id, 14 / 30), "it does not top the best"


async def test_a_contender_waits_for_the_designed_trials_before_its_confirmation() -> None:
    data = dataset(n_train=40, n_val=30)
    helped = set(odd(data.val, data)[:1]) | set(odd(data.train, data)[::4])
    # two designed trials: the proposal (a contender val cannot show), then a demo set
    settings = ONE_TRIAL.model_copy(update={"num_demo_sets": 2, "num_trials": 2})
    ctx = make_ctx(data, scripted_lm(data, helped), proposer_lm(PROPOSALS))
    outcome, records = await run_recorded(settings, ctx)

    events = [event for record in records for event in record.events]

    def position(kind: str, **match: object) -> int:
        return next(
            index
            for index, event in enumerate(events)
            if event.kind == kind and all(event.data.get(k) == v for k, v in match.items())
        )

    trials = events_of(records, MiproTrial.kind)
    assert [t["number"] for t in trials][:2] == [1, 2]
    (check,) = events_of(records, MiproWinnerChecked.kind)
    assert check["candidate_id"] == trials[0]["candidate_id"]
    assert check["shown_better"] is True
    assert position(MiproWinnerChecked.kind) > position(MiproTrial.kind, number=2)
    assert outcome.state.best_candidate_id == check["candidate_id"]
