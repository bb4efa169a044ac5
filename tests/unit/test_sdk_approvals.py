"""``emery.Approvals`` over a store and over the server (the in-process test client): the
same listing, review, decisions and errors either way."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

import jobs_support as js
import pytest
from fastapi.testclient import TestClient
from server_support import random_search_module

import emery
from emery.config import parse_config
from emery.core.approvals import Approval, new_approval_id
from emery.core.errors import ConfigError, IllegalTransition
from emery.jobs import create_job
from emery.jobs.engine import JobEngine
from emery.sdk.approvals import Approvals
from emery.server.api import create_server_app
from emery.server.launcher import ThreadLauncher
from emery.store import MemoryStore
from emery.store.states import NotFound

__all__ = ["random_search_module"]

KEY = "sdk-test-key"


@dataclass
class Waiting:
    store: MemoryStore
    job_id: str
    held: Approval
    """The request the paused job waits on."""

    def another(self) -> str:
        """A new pending request for the held candidate; its id."""
        fresh = self.held.model_copy(update={"id": new_approval_id(), "created_at": 0.0})
        return self.store.add_approval(fresh).id


@pytest.fixture(scope="module")
def waiting(random_search_module: None, tmp_path_factory: pytest.TempPathFactory) -> Waiting:
    folder = tmp_path_factory.mktemp("sdk-approvals")
    store = MemoryStore()
    config = js.search_config(folder / ".emery", iterations=4)
    config["job"]["approve"] = "best"
    job_id = create_job(store, parse_config(config), given=config, base_dir=folder).id
    engine = JobEngine(store, job_id, poll_s=0.001)
    engine.on_note = lambda text: text.startswith("waiting") and engine.request("pause")
    assert asyncio.run(engine.run()).state == "paused"
    (held,) = store.list_approvals(job_id)
    return Waiting(store, job_id, held)


@pytest.fixture(params=["store", "server"])
def sdk(request: pytest.FixtureRequest, waiting: Waiting) -> Iterator[Approvals]:
    """The SDK over the store itself, or over the server's API (with an API key)."""
    if request.param == "store":
        with Approvals(waiting.store) as approvals:
            yield approvals
        return
    app = create_server_app(waiting.store, api_key=KEY, launcher=ThreadLauncher())
    with TestClient(app) as client, Approvals(server=client, api_key=KEY) as approvals:
        yield approvals


def test_pending_requests_are_listed_and_reviewed(sdk: Approvals, waiting: Waiting) -> None:
    extra = waiting.another()
    pending = sdk.pending(waiting.job_id[:8])
    assert [a.id for a in pending][-1] == extra
    assert all(a.status == "pending" for a in pending)
    sdk.approve(extra)
    assert extra not in [a.id for a in sdk.pending(waiting.job_id)]
    assert extra in [a.id for a in sdk.requests(waiting.job_id)]
    review = sdk.review(waiting.held.id)
    assert review.candidate.candidate_id == waiting.held.candidate_id
    assert review.current.label == "current best"
    assert review.candidate.val is not None
    assert review.candidate.val.n > 0


def test_approve_reject_with_a_reason_and_edit_with_text(sdk: Approvals, waiting: Waiting) -> None:
    approved = sdk.approve(waiting.another())
    assert approved.status == "approved"
    rejected = sdk.reject(waiting.another(), "  too wordy ")
    assert (rejected.status, rejected.reason) == ("rejected", "too wordy")
    assert waiting.store.get_approval(rejected.id).reason == "too wordy"
    (component,) = sdk.review(waiting.held.id).candidate.components
    edited = sdk.edit(waiting.another(), "Answer with the number only.", reason="shorter")
    assert (edited.status, edited.edited, edited.reason) == (
        "edited",
        {component: "Answer with the number only."},
        "shorter",
    )
    by_map = sdk.edit(waiting.another(), edited={component: "Give the number."})
    assert by_map.edited == {component: "Give the number."}


def test_bad_decisions_fail_with_the_same_errors_and_change_nothing(
    sdk: Approvals, waiting: Waiting
) -> None:
    with pytest.raises(NotFound, match="no approval request 'nope'"):
        sdk.approve("nope")
    with pytest.raises(NotFound, match="no job 'no-such-job'"):
        sdk.pending("no-such-job")
    request = waiting.another()
    with pytest.raises(ConfigError, match="no component 'z'"):
        sdk.edit(request, "x", component="z")
    with pytest.raises(ConfigError, match="is empty"):
        sdk.edit(request, " ")
    assert waiting.store.get_approval(request).status == "pending"
    sdk.reject(request, "no")
    with pytest.raises(IllegalTransition, match=f"approval request {request} is already rejected"):
        sdk.approve(request)


def test_the_server_needs_its_key_and_one_source_is_given(waiting: Waiting) -> None:
    app = create_server_app(waiting.store, api_key=KEY, launcher=ThreadLauncher())
    with TestClient(app) as client:
        with pytest.raises(ConfigError, match="the server refused the API key"):
            Approvals(server=client, api_key="wrong").pending(waiting.job_id)
        assert Approvals(server=client, api_key=KEY).pending(waiting.job_id)
    with pytest.raises(ConfigError, match="give a store or a server, not both"):
        Approvals(waiting.store, server="http://localhost:1")
    with pytest.raises(ConfigError, match="is not an http:// or https:// URL"):
        Approvals(server="localhost:8000")
    with pytest.raises(ConfigError, match="an API key is for a server"):
        Approvals(waiting.store, api_key=KEY)
    assert emery.Approvals is Approvals
