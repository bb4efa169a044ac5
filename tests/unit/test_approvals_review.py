"""Approval requests through the API and the CLI (in process): a paused job's pending
request reviewed and decided, a publish request approved or rejected, bad input refused
with one error line."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import jobs_support as js
import pytest
from bad_input_support import one_error_line, run_cli
from fastapi.testclient import TestClient
from server_support import finished_job, random_search_module

from emery.config import parse_config
from emery.core.approvals import Approval, new_approval_id
from emery.jobs import create_job
from emery.jobs.engine import JobEngine
from emery.reports import published
from emery.server.api import create_server_app
from emery.server.launcher import ThreadLauncher
from emery.store import SQLiteStore

__all__ = ["random_search_module"]


@dataclass
class Waiting:
    store: SQLiteStore
    db: str
    job_id: str
    approval_id: str
    done_id: str
    """A succeeded job (without approvals) to publish."""


@pytest.fixture(scope="module")
def waiting(random_search_module: None, tmp_path_factory: pytest.TempPathFactory) -> Waiting:
    """A job paused while it waits for its first request, and a finished job."""
    folder = tmp_path_factory.mktemp("approvals")
    path = folder / "emery.db"
    store = SQLiteStore(path)
    config = js.search_config(folder / ".emery", iterations=4)
    config["job"]["approve"] = "best"
    job_id = create_job(store, parse_config(config), given=config, base_dir=folder).id
    engine = JobEngine(store, job_id, poll_s=0.001)
    engine.on_note = lambda text: text.startswith("waiting") and engine.request("pause")
    assert asyncio.run(engine.run()).state == "paused"
    (pending,) = store.list_approvals(job_id)
    done_id = finished_job(store, folder / "done")  # type: ignore[arg-type]
    return Waiting(store, str(path), job_id, pending.id, done_id)


def client(store: SQLiteStore) -> TestClient:
    return TestClient(create_server_app(store, launcher=ThreadLauncher()))


def test_the_api_shows_a_request_beside_the_best_and_takes_one_decision(
    waiting: Waiting,
) -> None:
    api = client(waiting.store)
    assert api.get(f"/api/jobs/{waiting.job_id}").json()["pending_approvals"] == 1
    listed = api.get(f"/api/jobs/{waiting.job_id[:8]}/approvals").json()["approvals"]
    assert [a["id"] for a in listed] == [waiting.approval_id]
    review = api.get(f"/api/approvals/{waiting.approval_id}").json()
    assert review["current"]["label"] == "current best"
    assert review["candidate"]["candidate_id"] == listed[0]["candidate_id"]
    for side in ("candidate", "current"):
        val = review[side]["val"]
        assert val["low"] <= val["mean"] <= val["high"]
        assert val["n"] > 0
    assert review["difference"]["n"] == review["candidate"]["val"]["n"]
    assert review["diff"].startswith("--- ")
    assert review["samples"]
    assert all(s["candidate"] and s["current"] and s["input"] for s in review["samples"])
    # Bad decisions change nothing.
    url = f"/api/approvals/{waiting.approval_id}"
    assert api.post(url, json={"action": "maybe"}).status_code == 422
    bad_edit = api.post(url, json={"action": "edit", "edited": {"nope": "x"}})
    assert (bad_edit.status_code, "no component 'nope'" in bad_edit.json()["detail"]) == (400, True)
    assert api.post("/api/approvals/nope", json={"action": "approve"}).status_code == 404
    (name, text), *_ = review["candidate"]["components"].items()
    for body, message in [
        ({"action": "edit", "text": " "}, f"the edited text of {name!r} is empty"),
        (
            {"action": "edit", "text": text},
            "the edit changes nothing: approve the candidate instead",
        ),
        ({"action": "approve", "text": "x"}, "only an edit takes new text, not approve"),
    ]:
        refused = api.post(url, json=body)
        assert (refused.status_code, refused.json()["detail"]) == (400, message)
    assert waiting.store.get_approval(waiting.approval_id).status == "pending"
    # One decision; a second one is refused.
    decided = api.post(url, json={"action": "reject", "reason": "  too wordy "}).json()
    assert (decided["status"], decided["reason"], decided["applied"]) == (
        "rejected",
        "too wordy",
        False,  # the job applies it when it runs again
    )
    assert api.get(f"/api/jobs/{waiting.job_id}").json()["pending_approvals"] == 0
    again = api.post(url, json={"action": "approve"})
    assert again.status_code == 409
    assert "already rejected" in again.json()["detail"]


def test_a_publish_request_publishes_only_once_approved(
    waiting: Waiting, capsys: pytest.CaptureFixture[str]
) -> None:
    db = waiting.db
    args = ["publish", waiting.done_id, "--name", "ask-bot", "--request", "--json", "--store", db]
    assert run_cli(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert (first["kind"], first["status"], first["target"]) == ("publish", "pending", "ask-bot")
    assert published.latest_versions(waiting.store) == []
    assert run_cli(["approvals", "list", waiting.done_id, "--store", db]) == 0
    assert first["id"] in capsys.readouterr().out
    assert run_cli(["approvals", "show", first["id"], "--store", db]) == 0
    assert "nothing published yet" in capsys.readouterr().out
    assert run_cli(["approvals", "approve", first["id"], "--store", db]) == 0
    assert "approved: ask-bot version 1" in capsys.readouterr().err
    assert published.show(waiting.store, "ask-bot").candidate_id == first["candidate_id"]
    # A second request is shown against version 1; a rejection publishes nothing.
    args = ["publish", waiting.done_id, "--name", "ask-bot", "--request", "--json", "--store", db]
    assert run_cli(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["current_id"] == first["candidate_id"]
    assert run_cli(["approvals", "reject", second["id"], "--reason", "not now", "--store", db]) == 0
    assert [p.version for p in published.versions(waiting.store, "ask-bot")] == [1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["approvals", "approve", "nope"], "no approval request 'nope'"),
        (["approvals", "list", "no-such-job"], "no job 'no-such-job'"),
        (["approvals", "edit", "{pending}"], "give the new text with --text or --file"),
        (["approvals", "edit", "{pending}", "--text", "x", "--component", "z"], "no component 'z'"),
        (["approvals", "edit", "{publish}", "--text", "x"], "is a publish request"),
        (["approvals", "reject", "{decided}"], "is already approved"),
        (["approvals", "edit", "{pending}", "--file", "/no/such/file"], "cannot read"),
        (["publish", "{pending_job}", "--name", "x", "--request"], "only a succeeded job's"),
        (["approvals", "approve", "{ended}"], "is succeeded: its approval request"),
    ],
)
def test_bad_decisions_are_one_error_line(
    waiting: Waiting, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    store = waiting.store
    paused = store.job_candidates(waiting.job_id)[-1].id
    done = store.get_job(waiting.done_id)

    def request(kind: str, job_id: str = waiting.job_id, candidate: str = paused) -> str:
        made = Approval(
            id=new_approval_id(), job_id=job_id, kind=kind, candidate_id=candidate, target="bad-bot"
        )
        return store.add_approval(made).id

    decided = request("best")
    store.decide_approval(decided, "approve")
    values = {
        "pending": request("best"),
        "publish": request("publish", done.id, done.best_candidate_id or ""),
        "ended": request("best", done.id, done.best_candidate_id or ""),
        "decided": decided,
        "pending_job": waiting.job_id,
    }
    filled = [a.format(**values) if a.startswith("{") else a for a in args]
    before = [(a.id, a.status) for a in store.list_approvals()]
    capsys.readouterr()
    assert run_cli([*filled, "--store", waiting.db]) == 2
    assert message in one_error_line(capsys.readouterr().err)
    assert [(a.id, a.status) for a in store.list_approvals()] == before
