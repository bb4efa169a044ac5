"""Nearest demos: a stage shows the few demos of its pool most like the input it answers."""

from __future__ import annotations

from collections.abc import Sequence

from emery.algorithms.base import SearchContext
from emery.algorithms.context import build_search_context
from emery.algorithms.mipro import Mipro, MiproSettings, MiproState
from emery.algorithms.mipro.demos import assemble
from emery.algorithms.operators import Materials, apply_operator
from emery.algorithms.search_loop import run_search
from emery.core.models import Candidate, ChatMessage, Dataset, Demo, Example
from emery.evaluation.budget import BudgetConfig
from emery.lm import FakeLM
from emery.systems import (
    MessageTemplate,
    ParserConfig,
    PromptProgram,
    PromptProgramConfig,
    StageConfig,
)
from emery.systems.demo_retrieval import NEAREST_SHOWN, nearest_demos
from emery.systems.prompt_layout import StageLayout
from emery.verifiers.config import VerifierConfig, build_verifier


def demo(query: str, label: str, example_id: str | None = None) -> Demo:
    return Demo(
        inputs={"query": query}, output=label, source="labeled", example_id=example_id or query
    )


POOL = (
    demo("what is my bank balance", "balance"),
    demo("how much money is in my checking account", "balance"),
    demo("set an alarm for seven am", "alarm"),
    demo("wake me up at six with an alarm", "alarm"),
    demo("play some jazz music", "play_music"),
    demo("put on my running playlist", "play_music"),
    demo("what is the weather in paris", "weather"),
)


def queries(demos: Sequence[Demo]) -> list[str]:
    return [str(d.inputs["query"]) for d in demos]


def test_the_nearest_demos_are_shown_closest_last() -> None:
    shown = nearest_demos(POOL, {"query": "set an alarm for six am please"}, count=2)
    assert queries(shown) == ["wake me up at six with an alarm", "set an alarm for seven am"]
    assert len(nearest_demos(POOL, {"query": "jazz"})) == NEAREST_SHOWN


def test_a_demo_of_the_input_itself_is_never_shown() -> None:
    shown = nearest_demos(POOL, {"query": "play some jazz music"}, count=3)
    assert len(shown) == 3
    assert "play some jazz music" not in queries(shown)


def test_ties_keep_pool_order_and_a_small_pool_is_shown_whole() -> None:
    unrelated = {"query": "zzz"}
    assert queries(nearest_demos(POOL, unrelated, count=3)) == queries(POOL[:3])[::-1]
    assert len(nearest_demos(POOL[:2], unrelated, count=4)) == 2
    assert nearest_demos((), unrelated) == ()


def classifier() -> PromptProgram:
    stage = StageConfig(
        name="classify",
        instruction="Classify the request. Reply with the intent label only.",
        messages=[MessageTemplate(template="{query}")],
        parser=ParserConfig(kind="last_line"),
    )
    return PromptProgram(PromptProgramConfig(stages=[stage]))


def assistant_turns(messages: list[ChatMessage]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "assistant"]


def test_a_nearest_layout_renders_only_the_nearest_demos() -> None:
    program = classifier()
    stage = program.stages["classify"]
    fields = {"query": "how much is in my savings account"}
    nearest = StageLayout(select="nearest")
    shown = program.messages(stage, stage.instruction, POOL, fields, nearest)
    assert len(assistant_turns(shown)) == NEAREST_SHOWN
    assert assistant_turns(shown)[-1] == "balance"
    assert shown[-1] == {"role": "user", "content": fields["query"]}
    everything = program.messages(stage, stage.instruction, POOL, fields, StageLayout())
    assert len(assistant_turns(everything)) == len(POOL)


def test_a_nearest_layout_shows_as_many_as_it_says_and_stores_the_count() -> None:
    program = classifier()
    stage = program.stages["classify"]
    fields = {"query": "how much is in my savings account"}
    two = StageLayout(select="nearest", shown=2)
    shown = program.messages(stage, stage.instruction, POOL, fields, two)
    assert assistant_turns(shown) == [demo.output for demo in nearest_demos(POOL, fields, 2)]
    assert assistant_turns(shown)[-1] == "balance"
    assert two.components("classify") == {"classify:select": "nearest", "classify:shown": "2"}
    assert StageLayout.of(two.components("classify"), "classify") == two
    # the default count is not stored, so candidates from before keep their ids
    assert "classify:shown" not in StageLayout(select="nearest").components("classify")


def test_nearest_demos_operator_hands_the_pool_to_a_stage_without_demos() -> None:
    program = classifier()
    seed = Candidate(components={"classify": program.stages["classify"].instruction})
    materials = Materials(labeled={"classify": POOL}, exclude=frozenset({POOL[0].example_id}))

    child = apply_operator("nearest_demos", seed, program, "classify", materials=materials)

    assert child is not None
    assert child.demos["classify"] == POOL[1:]
    assert StageLayout.of(child.components, "classify").select == "nearest"
    assert apply_operator("reverse_demos", child, program, "classify") is None  # no order
    fewer = apply_operator("fewer_demos", child, program, "classify")  # one fewer per input
    assert fewer is not None
    assert fewer.demos == child.demos
    assert StageLayout.of(fewer.components, "classify").shown == NEAREST_SHOWN - 1
    one = Candidate(components={**child.components, "classify:shown": "1"}, demos=child.demos)
    assert apply_operator("fewer_demos", one, program, "classify") is None
    small = Materials(labeled={"classify": POOL[:NEAREST_SHOWN]})
    assert apply_operator("nearest_demos", seed, program, "classify", materials=small) is None


def test_mipro_offers_the_pool_as_a_nearest_set_beyond_its_limit() -> None:
    labeled = list(POOL[:4])
    boot = [[demo("boot", "balance")]]
    sets = assemble((), labeled, boot, limit=3, nearest=list(POOL))
    assert [s.kind for s in sets] == ["empty", "labeled", "bootstrapped", "nearest"]
    assert sets[-1].demos == list(POOL)
    assert "nearest" not in [s.kind for s in assemble((), labeled, [], limit=3, nearest=labeled)]


INTENTS = {
    "balance": ("balance", "account", "money", "savings"),
    "alarm": ("alarm", "wake", "clock", "morning"),
    "music": ("play", "song", "jazz", "playlist"),
    "weather": ("weather", "rain", "sunny", "forecast"),
}
FILLERS = ("please", "right now", "for me", "today", "if you can", "quickly")


def intent_data() -> Dataset:
    """Requests whose intent shows only in their words: 24 train, 12 val, 12 test."""
    splits: dict[int, list[Example]] = {0: [], 1: [], 2: [], 3: []}
    for n in range(12):
        for label, words in INTENTS.items():
            query = f"{words[n % 4]} {words[(n + 1) % 4]} {FILLERS[n % 6]} {n}"
            splits[n % 4].append(Example(id=f"{label}-{n}", input={"query": query}, expected=label))
    return Dataset(name="intents", train=splits[0] + splits[2], val=splits[1], test=splits[3])


def copies_the_last_demo() -> FakeLM:
    """A model that answers with the label of the demo shown last (the one next to the
    request), and with nothing useful when it sees no demo."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        shown = assistant_turns(list(messages))
        return shown[-1] if shown else "unsure"

    return FakeLM(reply, model="fake/copies-last-demo")


def intent_context(data: Dataset, budget: BudgetConfig | None) -> SearchContext:
    return build_search_context(
        system=classifier(),
        dataset=data,
        verifier=build_verifier(VerifierConfig(kind="normalized")),
        lms={"task": copies_the_last_demo(), "proposer": FakeLM(lambda m: "42")},
        budget=budget,
        seed=0,
    )


async def test_mipro_lifts_a_task_only_nearest_demos_solve() -> None:
    data = intent_data()
    ctx = intent_context(data, BudgetConfig(metric_calls=200))
    settings = MiproSettings(num_trials=8, minibatch_size=6, full_eval_every=2)

    outcome = await run_search(Mipro(settings), ctx)

    state = outcome.state
    assert isinstance(state, MiproState)
    best = ctx.candidates[state.best_candidate_id]
    assert StageLayout.of(best.components, "classify").select == "nearest"
    scoring = intent_context(data, None)  # test is scored outside the search's budget
    seed_test = await scoring.evaluate(ctx.seed_candidate, data.test, "test")
    best_test = await scoring.evaluate(best, data.test, "test")
    assert seed_test.mean == 0.0
    assert best_test.mean == 1.0
