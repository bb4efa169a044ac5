"""The payload registry: owners register their event kinds (a plug-in algorithm too), an
unregistered kind or a kind claimed twice is an error, and stored events read back typed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import ClassVar

import jobs_support as js
import pytest

from emery.algorithms import SearchContext
from emery.algorithms.gepa.events import GepaProposal
from emery.algorithms.registry import AlgorithmSpec
from emery.config import parse_config
from emery.core.events import (
    PAYLOADS,
    Event,
    EventKindError,
    Payload,
    event,
    payload_model,
    register_payload,
)
from emery.jobs import create_job, run_job
from emery.store import SQLiteStore
from emery.training.events import TrainLoss, TrainReward


@register_payload
class CoinTossed(Payload):
    """The plug-in's own event: after each step, a toss of its RNG and the best so far."""

    kind: ClassVar[str] = "coin_search.tossed"
    iteration: int
    heads: bool
    best_score: float | None


class Unclaimed(Payload):
    """A payload no module registered."""

    kind: ClassVar[str] = "coin_search.unclaimed"
    iteration: int


class CoinSearch(js.RandomSearch):
    """``random_search`` that also emits an event of its own kind after every step
    (``unclaimed``: one no model is registered for)."""

    name: ClassVar[str] = "coin_search"
    unclaimed: ClassVar[bool] = False

    async def step(self, ctx: SearchContext, state: js.RandomSearchState) -> js.RandomSearchState:
        state = await super().step(ctx, state)
        if self.unclaimed:
            ctx.emit(Unclaimed(iteration=state.iteration))
        heads = len(state.rng_state) % 2 == 0
        ctx.emit(
            CoinTossed(iteration=state.iteration, heads=heads, best_score=state.best_val_score)
        )
        return state


class UnclaimedSearch(CoinSearch):
    unclaimed: ClassVar[bool] = True


SPEC = AlgorithmSpec(name="coin_search", settings=js.RandomSearchSettings, factory=CoinSearch)
UNCLAIMED = AlgorithmSpec(
    name="unclaimed_search", settings=js.RandomSearchSettings, factory=UnclaimedSearch
)


def run_plugin(tmp_path: Path, attr: str) -> tuple[SQLiteStore, str]:
    """A job of this module's ``attr`` spec, named ``module:attr`` as a plug-in is, run to
    its end on the scripted models in a SQLite store."""
    store = SQLiteStore(tmp_path / "emery.db")
    config = js.search_config(
        tmp_path / ".emery", algorithm=f"{__name__}:{attr}", settings={"iterations": 3}
    )
    job_id = create_job(store, parse_config(config), given=config, base_dir=tmp_path).id
    run_job(store, job_id)
    return store, job_id


def test_a_plugin_algorithm_emits_its_own_typed_event_and_reads_it_back_from_the_store(
    tmp_path: Path,
) -> None:
    store, job_id = run_plugin(tmp_path, "SPEC")
    job = store.get_job(job_id)
    assert job.state == "succeeded", job.error
    stored = SQLiteStore(tmp_path / "emery.db").list_events(job_id, kinds=[CoinTossed.kind])
    tossed = [item.payload() for item in stored]
    assert [type(p) for p in tossed] == [CoinTossed] * 3
    assert [item.payload_as(CoinTossed).iteration for item in stored] == [1, 2, 3]
    assert tossed[-1] == CoinTossed(iteration=3, heads=tossed[-1].heads, best_score=job.best_score)
    assert [Event.of(p) for p in tossed] == [Event(kind=e.kind, data=e.data) for e in stored]


def test_emitting_an_unregistered_kind_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(EventKindError, match=r"unknown event kind 'coin_search\.unclaimed'"):
        Event.of(Unclaimed(iteration=1))
    with pytest.raises(EventKindError, match="unknown event kind 'tick'"):
        event("tick", n=1)
    with pytest.raises(EventKindError, match="unknown event kind 'tick'"):
        Event(kind="tick", data={"n": 1}).payload()
    store, job_id = run_plugin(tmp_path, "UNCLAIMED")
    job = store.get_job(job_id)
    assert job.state == "failed"
    assert "unknown event kind 'coin_search.unclaimed'" in (job.error or "")
    assert not store.list_events(job_id, kinds=[CoinTossed.kind])  # the step was not kept


def test_a_kind_has_one_model_and_a_redefined_class_replaces_itself() -> None:
    class Impostor(Payload):
        kind: ClassVar[str] = "coin_search.tossed"
        iteration: int

    with pytest.raises(EventKindError, match=r"already .*CoinTossed's, not .*Impostor's"):
        register_payload(Impostor)
    with pytest.raises(EventKindError, match="already"):
        register_payload(Impostor, "best_updated")
    assert payload_model("coin_search.tossed") is CoinTossed
    reloaded = type(
        "CoinTossed",
        (Payload,),
        {"__module__": __name__, "__qualname__": "CoinTossed", "kind": CoinTossed.kind},
    )
    try:
        assert register_payload(reloaded) is reloaded  # a module imported again
        assert PAYLOADS["coin_search.tossed"] is reloaded
    finally:
        register_payload(CoinTossed)


def test_training_events_keep_their_stored_kinds_and_fields() -> None:
    loss = Event(kind="val_loss", data={"step": 3, "loss": 1.25})  # as stored before
    assert loss.payload() == TrainLoss(step=3, loss=1.25)
    assert Event.of(TrainLoss(step=3, loss=1.25), kind="val_loss") == loss
    reward = Event(kind="train_reward", data={"step": 1, "reward": 0.5, "kl": None})
    assert reward.payload() == TrainReward(step=1, reward=0.5)
    assert Event.of(TrainReward(step=1, reward=0.5, kl=0.01)).data["kl"] == 0.01


READER = textwrap.dedent(
    """
    import sys
    from emery.core.events import EventKindError
    from emery.store import SQLiteStore

    events = SQLiteStore(sys.argv[1]).list_events(sys.argv[2], kinds=["gepa.proposal"])
    try:
        events[0].payload()
    except EventKindError:
        print("unknown with only the store imported")
    import emery.reports.event_text
    print(type(events[0].payload()).__name__)
    """
)


def test_a_fresh_process_that_reads_events_parses_a_builtin_algorithms_kinds(
    tmp_path: Path,
) -> None:
    store, job_id = run_plugin(tmp_path, "SPEC")
    proposal = GepaProposal(iteration=1, component="solve", attempt=0, text="Add the units.")
    store.append_events(job_id, [Event.of(proposal)])
    done = subprocess.run(
        [sys.executable, "-c", READER, str(tmp_path / "emery.db"), job_id],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.split("\n")[:2] == ["unknown with only the store imported", "GepaProposal"]
