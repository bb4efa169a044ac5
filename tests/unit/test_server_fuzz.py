"""A schemathesis fuzz of ``emery server``'s OpenAPI, in process, over a store that holds
a finished scripted job (published as a prompt), a job waiting to run, and their
candidates and rollouts.

Every operation gets a bounded, derandomized run of schema-valid and schema-invalid
requests (path parameters are often swapped for ids that exist, so the routes reach the
store). Each answer must be no 5xx, an error must be JSON with a message, and status,
content type and body must be ones the schema documents.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)
from server_support import finished_job, random_search_module

from emery.lm.fake import FakeLM
from emery.reports import approvals, published
from emery.server import jobs_api
from emery.server.api import create_server_app
from emery.server.sse import event_stream
from emery.store import MemoryStore
from emery.store.records import NewJob

pytestmark = pytest.mark.slow  # a few hundred generated requests

__all__ = ["random_search_module"]

EXAMPLES = 12  # per operation and generation mode
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
    positive_data_acceptance,
]
# Bodies whose meaning the schema cannot hold (a job config, a chat the proxy parses
# itself, a dataset build's template, regexes and time range, a decision that depends on
# the request's kind and on whether it is still pending, an OTLP export whose resource
# spans the schema leaves as any object: `{"resourceSpans": [{"schemaUrl": [false]}]}`
# is schema-valid and rightly a 400; a runner's span batch with a number over 64 bits, sent
# alone or carried by a claim, heartbeat, finish or requeue; a published system run at a
# version and an alias at once): schema-valid ones may still be refused.
SEMANTIC_BODIES = (
    "POST /api/jobs",
    "/chat/completions",
    "POST /api/datasets/from-traces",
    "POST /api/approvals",
    "POST /v1/traces",
    "POST /api/queue/traces",
    "POST /api/queue/claim",
    "POST /api/queue/finish",
    "POST /api/queue/requeue",
    "POST /api/queue/attempts/heartbeat",
    "POST /api/queue/workers/heartbeat",
    "POST /systems/{name}/run",
)
# No 2xx expected: random configs are never valid, no job here can be paused, and none
# runs on runners (no candidate resource to name).
UNREACHED = ("POST /api/jobs", "POST /api/jobs/{job}/pause", "GET /api/queue/resource")


class NoLaunch:
    """A launcher that records the jobs it was asked to start and runs none."""

    def __init__(self) -> None:
        self.launched: list[str] = []

    def launch(self, store: object, job_id: str) -> None:
        self.launched.append(job_id)


@dataclass
class Target:
    app: Any
    ids: dict[str, list[str]]
    failures: list[str] = field(default_factory=list)
    answered: set[str] = field(default_factory=set)  # operations that answered 2xx


@pytest.fixture(scope="module")
def target(
    random_search_module: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    workdir: Path = tmp_path_factory.mktemp("fuzz")
    store = MemoryStore()
    job_id = finished_job(store, workdir)
    store.create_job(NewJob(id="j-waiting01", name="waiting", algorithm="baseline", config={}))
    published.publish(store, job_id, "support-bot")
    requests = [approvals.request_publish(store, job_id, "support-bot") for _ in range(4)]
    rollouts = store.list_rollouts(limit=20).items
    ids = {
        "job": [job_id, job_id[:6], "waiting"],
        "candidate": [c.id for c in store.list_candidates(job_id, limit=5).items],
        "rollout_id": [r.id for r in rollouts],
        "attempt_id": [a.id for r in rollouts[:5] for a in store.list_attempts(r.id)],
        "prompt": ["support-bot"],
        "approval_id": [request.id for request in requests],
    }
    app = create_server_app(
        store, launcher=NoLaunch(), base_dir=workdir, default_lm=FakeLM(lambda _: "ok")
    )
    with pytest.MonkeyPatch.context() as patch:  # a live job's stream ends after 0.2 s here
        patch.setattr(jobs_api, "event_stream", functools.partial(event_stream, timeout_s=0.2))
        yield Target(app, ids)


def error_message(response: Any) -> str | None:
    """The message of a JSON error body (API or OpenAI shape), or None."""
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    detail = body.get("detail")
    if isinstance(detail, str) and detail:
        return detail
    if isinstance(detail, list) and detail and all("msg" in item for item in detail):
        return str(detail[0]["msg"])
    error = body.get("error")
    return str(error["message"]) if isinstance(error, dict) and error.get("message") else None


def fuzz_operation(target: Target, operation: Any, mode: GenerationMode) -> None:
    """Draw ``EXAMPLES`` cases of ``operation`` in ``mode``; record what goes wrong."""
    strategy = operation.as_strategy(generation_mode=mode)
    semantic = any(part in operation.label for part in SEMANTIC_BODIES)
    checks = [c for c in CHECKS if not (semantic and c is positive_data_acceptance)]
    drawn: list[Any] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def run(data: st.DataObject) -> None:
        case = data.draw(strategy)
        drawn.append(case)
        if mode is GenerationMode.POSITIVE and len(drawn) % 3:  # 2 in 3: ids that exist
            for name in case.path_parameters or {}:
                known = target.ids.get(name)
                if known:
                    case.path_parameters[name] = known[len(drawn) % len(known)]
        try:
            response = case.call()
        except Exception as exc:  # the app raised: it answered 500
            target.failures.append(f"{case.method} {case.formatted_path}: {exc!r}")
            return
        label = f"{case.method} {case.formatted_path} -> {response.status_code}"
        if response.status_code < 300:
            target.answered.add(operation.label)
        if response.status_code >= 400 and error_message(response) is None:
            target.failures.append(f"{label}: an error without a JSON message")
        try:
            case.validate_response(response, checks=checks)
        except BaseException as exc:  # schemathesis's FailureGroup is an ExceptionGroup
            target.failures.append(f"{label}: {exc!s}")

    with contextlib.suppress(Unsatisfiable):  # no parameters to make invalid
        run()


def test_every_operation_answers_as_its_schema_says_and_never_5xx(target: Target) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", target.app)
    labels = []
    for result in schema.get_all_operations():
        operation = result.ok()
        labels.append(operation.label)
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz_operation(target, operation, mode)
    assert "GET /api/jobs/{job}/candidates/{candidate}/diff" in labels
    assert "POST /v1/traces" in labels
    assert len(labels) >= 20
    assert target.failures == []
    # the fuzz reached the store: every route over stored data answered 2xx some time
    reached = [label for label in labels if "/api/" in label and label not in UNREACHED]
    assert sorted(set(reached) - target.answered) == []
