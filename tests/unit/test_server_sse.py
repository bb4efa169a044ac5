"""The SSE stream of a job's events: a running scripted job's events arrive in order."""

from __future__ import annotations

import json
from typing import Any

import jobs_support as js
import pytest
from server_support import Served, job_config, random_search_module, served

__all__ = ["random_search_module", "served"]


def read_stream(
    served: Served, path: str, **headers: str | bytes
) -> list[tuple[str, dict[str, Any]]]:
    """Every (event, data) of one SSE response, until the server ends it."""
    messages: list[tuple[str, dict[str, Any]]] = []
    with served.client.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        kind = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                messages.append((kind, json.loads(line.removeprefix("data: "))))
    return messages


def test_a_running_job_streams_its_events_in_order(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(js.DELAY_ENV, "0.01")
    config = job_config(served.workdir / "sse", iterations=4)
    job_id = served.client.post("/api/jobs", json={"config": config}).json()["id"]
    messages = read_stream(served, f"/api/jobs/{job_id}/events/stream")
    kind, end = messages[-1]
    assert kind == "end"
    assert end["state"] == "succeeded"
    events = messages[:-1]
    assert [data["seq"] for _, data in events] == list(range(1, len(events) + 1))
    assert [name for name, _ in events] == [data["kind"] for _, data in events]
    stored = served.store.list_events(job_id)
    assert [(e.seq, e.kind) for e in stored] == [(d["seq"], d["kind"]) for _, d in events]
    assert end["last_seq"] == stored[-1].seq
    assert {"started", "best_updated", "succeeded"} <= {name for name, _ in events}


def test_a_stream_resumes_after_the_last_event_id(served: Served) -> None:
    path = f"/api/jobs/{served.job_id}/events/stream"
    stored = served.store.list_events(served.job_id)
    after = read_stream(served, path, **{"Last-Event-ID": "5"})
    assert [d["seq"] for _, d in after[:-1]] == [e.seq for e in stored[5:]]
    since = read_stream(served, path + "?since=7")
    assert [d["seq"] for _, d in since[:-1]] == [e.seq for e in stored[7:]]
    assert served.client.get("/api/jobs/j-none/events/stream").status_code == 404


@pytest.mark.parametrize(
    "last_event_id", ["\u00b2".encode("latin-1"), b"18446744073709551616", b"-3"]
)
def test_a_last_event_id_that_is_no_sequence_number_streams_from_the_start(
    served: Served, last_event_id: bytes
) -> None:
    # found by the schema fuzz: "²" passed str.isdigit() and int() raised (500)
    path = f"/api/jobs/{served.job_id}/events/stream"
    messages = read_stream(served, path, **{"Last-Event-ID": last_event_id})
    assert [d["seq"] for _, d in messages[:-1]] == [
        e.seq for e in served.store.list_events(served.job_id)
    ]
