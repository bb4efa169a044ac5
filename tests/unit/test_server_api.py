"""``emery server``'s REST API over a store holding a finished scripted job."""

from __future__ import annotations

from typing import Any

import jobs_support as js
import pytest
from server_support import (
    PLAN_SUMMARY,
    Served,
    job_config,
    plan_event,
    random_search_module,
    served,
)

from emery.store.records import NewJob

__all__ = ["random_search_module", "served"]


def get(served: Served, path: str, status: int = 200, **params: Any) -> Any:
    response = served.client.get(path, params=params)
    assert response.status_code == status, response.text
    return response.json()


def test_jobs_list_filters_and_pages(served: Served) -> None:
    served.store.create_job(
        NewJob(id="j-waiting01", name="waiting", algorithm="baseline", kind="eval", config={})
    )
    everything = get(served, "/api/jobs")
    assert everything["total"] == 2
    assert {job["id"] for job in everything["jobs"]} == {served.job_id, "j-waiting01"}
    done = get(served, "/api/jobs", state="succeeded")
    assert [job["id"] for job in done["jobs"]] == [served.job_id]
    assert done["jobs"][0]["budget"]["used"]["metric_calls"] > 0
    assert "config" not in done["jobs"][0]
    page = get(served, "/api/jobs", limit=1, offset=1, sort="created_at")
    assert page["total"] == 2
    assert [job["id"] for job in page["jobs"]] == ["j-waiting01"]
    assert get(served, "/api/jobs", algorithm="baseline")["total"] == 1
    wrong = get(served, "/api/jobs", 422, state="sleeping")
    assert wrong["detail"][0]["loc"] == ["query", "state", 0]
    assert "'succeeded'" in wrong["detail"][0]["msg"]
    assert get(served, "/api/jobs", sort="-state,name")["total"] == 2
    assert get(served, "/api/jobs", 422, sort="secret")["detail"][0]["loc"] == ["query", "sort"]
    served.store.delete_job("j-waiting01")


def test_a_job_by_id_prefix_or_name_and_unknown_ones(served: Served) -> None:
    job = get(served, f"/api/jobs/{served.job_id[:6]}")
    assert job["id"] == served.job_id
    assert job["state"] == "succeeded"
    assert job["config"]["job"]["algorithm"] == "random_search"
    assert job["usage"]
    missing = get(served, "/api/jobs/j-nothing-here", 404)
    assert "j-nothing-here" in missing["detail"]


def test_events_after_a_sequence_number(served: Served) -> None:
    everything = get(served, f"/api/jobs/{served.job_id}/events")["events"]
    seqs = [event["seq"] for event in everything]
    assert seqs == list(range(1, len(seqs) + 1))
    later = get(served, f"/api/jobs/{served.job_id}/events", since=3)["events"]
    assert [event["seq"] for event in later] == seqs[3:]
    best = get(served, f"/api/jobs/{served.job_id}/events", kind="best_updated")["events"]
    assert best
    assert {event["kind"] for event in best} == {"best_updated"}


def test_candidates_carry_lineage_and_scores_per_split(served: Served) -> None:
    answer = get(served, f"/api/jobs/{served.job_id}/candidates")
    candidates = {c["id"]: c for c in answer["candidates"]}
    seed = candidates[answer["seed_candidate_id"]]
    assert seed["lineage"]["parents"] == []
    assert seed["scores"]["val"]["n"] == 8
    assert seed["scores"]["test"]["n"] == 4  # the seed is scored on test at the end
    children = [c for c in candidates.values() if c["lineage"]["parents"]]
    assert children
    assert all(set(c["lineage"]["parents"]) <= set(candidates) for c in children)
    assert all(c["scores"]["train"]["n"] > 0 for c in children)
    assert answer["best_candidate_id"] in candidates
    one = get(served, f"/api/jobs/{served.job_id}/candidates/{children[0]['id'][:8]}")
    assert one["id"] == children[0]["id"]
    assert one["components"] == children[0]["components"]
    get(served, f"/api/jobs/{served.job_id}/candidates/ffffffff", 404)


def test_a_candidate_diff_against_its_parent_and_the_seed(served: Served) -> None:
    answer = get(served, f"/api/jobs/{served.job_id}/candidates")
    child = next(c for c in answer["candidates"] if c["lineage"]["parents"])
    path = f"/api/jobs/{served.job_id}/candidates/{child['id']}/diff"
    against_parent = get(served, path)
    assert against_parent["against_id"] == child["lineage"]["parents"][0]
    assert against_parent["diff"].startswith("--- parent/")
    changed = against_parent["components"]
    assert changed
    assert all(item["after"] == child["components"][item["name"]] for item in changed)
    against_seed = get(served, path, against="seed")
    assert against_seed["against_id"] == answer["seed_candidate_id"]
    assert "+++ candidate/" in against_seed["diff"]
    seed_path = f"/api/jobs/{served.job_id}/candidates/{answer['seed_candidate_id']}/diff"
    assert get(served, seed_path, against="seed")["against_id"] is None
    get(served, path, 422, against="grandparent")


def test_evaluations_per_example_filtered_by_candidate_and_split(served: Served) -> None:
    seed = get(served, f"/api/jobs/{served.job_id}/candidates")["seed_candidate_id"]
    path = f"/api/jobs/{served.job_id}/evaluations"
    val = get(served, path, candidate_id=seed, split="val", limit=100)
    assert val["total"] == 8
    assert {e["candidate_id"] for e in val["evaluations"]} == {seed}
    assert {e["split"] for e in val["evaluations"]} == {"val"}
    assert all(0.0 <= e["score"] <= 1.0 and e["output"] is not None for e in val["evaluations"])
    paged = get(served, path, candidate_id=seed, split="val", limit=3, offset=6)
    assert len(paged["evaluations"]) == 2
    get(served, path, 422, split="holdout")


def test_rollouts_attempts_and_a_span_tree(served: Served) -> None:
    rollouts = get(served, f"/api/jobs/{served.job_id}/rollouts", split="val", limit=5)
    assert rollouts["total"] >= 8
    first = rollouts["rollouts"][0]
    assert first["status"] == "succeeded"
    rollout = get(served, f"/api/rollouts/{first['id']}")
    assert rollout["attempts"][0]["rollout_id"] == first["id"]
    attempts = get(served, f"/api/rollouts/{first['id']}/attempts")["attempts"]
    assert [a["number"] for a in attempts] == [1]
    spans = get(served, f"/api/rollouts/{first['id']}/spans")
    assert spans["count"] >= 2
    (root,) = spans["spans"]
    assert root["name"] == "emery.rollout"
    chat = root["children"][0]
    assert chat["name"].startswith("chat ")
    assert chat["parent_id"] == root["span_id"]
    assert "gen_ai.input.messages" in chat["attributes"]
    get(served, "/api/rollouts/ro-unknown", 404)
    get(served, "/api/rollouts/ro-unknown/spans", 404)


def test_a_job_created_from_a_config_body_runs_in_the_background(served: Served) -> None:
    config = job_config(served.workdir / "new", iterations=2)
    response = served.client.post("/api/jobs", json={"config": config, "name": "from-api"})
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["name"] == "from-api"
    assert created["state"] in ("queued", "running", "succeeded")
    job = js.wait_until(
        lambda: (j := served.store.get_job(created["id"])).terminal and j, timeout=60
    )
    assert job.state == "succeeded", job.error
    assert job.best_candidate_id is not None


def test_a_bad_config_body_is_a_one_line_400(served: Served) -> None:
    config = job_config(served.workdir / "bad")
    config["job"]["algoritm"] = config["job"].pop("algorithm")
    response = served.client.post("/api/jobs", json={"config": config})
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert "algoritm" in detail
    assert "\n" not in detail
    assert served.client.post("/api/jobs", json={"name": "x"}).status_code == 422


def test_pause_resume_and_cancel_a_running_job(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(js.DELAY_ENV, "0.02")
    config = job_config(served.workdir / "steer", iterations=40)
    job_id = served.client.post("/api/jobs", json={"config": config}).json()["id"]
    js.wait_until(lambda: served.store.get_job(job_id).state == "running")
    paused = served.client.post(f"/api/jobs/{job_id}/pause", params={"wait": 20}).json()
    assert paused["state"] == "paused"
    resumed = served.client.post(f"/api/jobs/{job_id}/resume")
    assert resumed.status_code == 200, resumed.text
    js.wait_until(lambda: served.store.get_job(job_id).state == "running")
    again = served.client.post(f"/api/jobs/{job_id}/resume")
    assert again.status_code == 409
    assert "already running" in again.json()["detail"]
    cancelled = served.client.post(f"/api/jobs/{job_id}/cancel", params={"wait": 20}).json()
    assert cancelled["state"] == "cancelled"
    kinds = [e.kind for e in served.store.list_events(job_id)]
    assert "paused" in kinds
    assert "resumed" in kinds
    assert kinds[-1] == "cancelled"
    assert served.client.post(f"/api/jobs/{job_id}/resume").status_code == 409


@pytest.mark.parametrize(
    ("path", "param"),
    [
        ("/api/jobs", "offset"),
        ("/api/jobs/{job}/events", "since"),
        ("/api/jobs/{job}/events/stream", "since"),
        ("/api/jobs/{job}/evaluations", "offset"),
        ("/api/jobs/{job}/rollouts", "offset"),
    ],
)
def test_numbers_past_64_bits_are_a_422_not_a_500(served: Served, path: str, param: str) -> None:
    # found by the schema fuzz: SQLite raised OverflowError on 2**63
    url = path.format(job=served.job_id)
    answer = get(served, url, 422, **{param: 2**63})
    assert answer["detail"][0]["loc"] == ["query", param]
    assert get(served, url.removesuffix("/stream"), **{param: 2**63 - 1})


def test_a_job_carries_the_plan_its_algorithm_recorded(served: Served) -> None:
    assert get(served, f"/api/jobs/{served.job_id}")["plan"] is None  # random search has none
    served.store.create_job(NewJob(id="j-planned01", name="planned", algorithm="mipro", config={}))
    served.store.append_events("j-planned01", [plan_event()])
    plan = get(served, "/api/jobs/j-planned01")["plan"]
    served.store.delete_job("j-planned01")
    assert plan["kind"] == "mipro.plan"
    assert plan["summary"] == PLAN_SUMMARY
    assert plan["figures"]["num_trials"] == 12
    assert plan["figures"]["metric_calls.total"] == 130
    assert plan["figures"]["lm_calls.proposer"] == 7
    assert "summary" not in plan["figures"]
    assert plan["notes"] == ["trials raised to spend the budget"]
