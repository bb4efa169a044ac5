"""The production loop in one process: a published prompt served to an application through
``emery server``'s LM proxy, the application's calls recorded as traces, feedback sent by
trace id, a dataset built from the traces, a search on it, a publish, and the
application's next call served the new version."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import jobs_support as js
from fastapi.testclient import TestClient

import emery
from emery.config import parse_config
from emery.data.tasks import builtin_task
from emery.jobs import create_job, run_job
from emery.reports import published
from emery.server.api import create_server_app
from emery.server.launcher import ThreadLauncher
from emery.store import MemoryStore
from emery.tracing import conventions as sc

SEED = "Answer the question."
ROUTE = "/prompts/support-bot/v1/chat/completions"
SERVICE = {"X-Emery-Service": "support-bot"}


def search(store: MemoryStore, workdir: Path, config: dict[str, Any]) -> str:
    job = create_job(store, parse_config(config), given=config, base_dir=workdir)
    record = run_job(store, job.id)
    assert record.state == "succeeded", record.error
    return job.id


def first_version(store: MemoryStore, workdir: Path) -> str:
    """v1: a job whose reflection model writes nothing better, so its seed is published."""
    config = js.search_config(workdir / "first", iterations=1)
    config["lm"] = {
        "task": {"model": "python/jobs_support:careful_task_lm"},
        "reflection": {"model": "python/jobs_support:task_lm"},
    }
    return search(store, workdir, config)


def traces_job(dataset: Path, seed_text: str, workdir: Path) -> dict[str, Any]:
    """A search from the served prompt's text on the traces, scored by the feedback."""
    return {
        "job": {"algorithm": "random_search", "seed": 1},
        "dataset": {"path": str(dataset)},
        "system": {
            "kind": "prompt_program",
            "stages": [
                {
                    "name": "solve",
                    "instruction": seed_text,
                    "messages": [{"role": "user", "template": "{question}"}],
                }
            ],
        },
        "lm": {
            "task": {"model": "python/jobs_support:careful_task_lm"},
            "reflection": {"model": "python/jobs_support:reflection_lm"},
        },
        "verifier": {"kind": "feedback"},
        "runtime": {"workdir": str(workdir / "second"), "concurrency": 4},
        "algorithm": {"random_search": {"iterations": 2}},
    }


def ask(client: TestClient, question: str) -> tuple[str, str]:
    """One application call in a trace of its own: (trace id, reply)."""
    trace_id = secrets.token_hex(16)
    headers = {**SERVICE, "traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"}
    chat = {"model": "support", "messages": [{"role": "user", "content": question}]}
    answer = client.post(ROUTE, json=chat, headers=headers)
    assert answer.status_code == 200, answer.text
    return trace_id, answer.json()["choices"][0]["message"]["content"]


def test_traces_feedback_search_and_publish_serve_a_better_prompt(
    random_search_algorithm: None, tmp_path: Path
) -> None:
    store = MemoryStore()
    v1 = published.publish(store, first_version(store, tmp_path), "support-bot")
    assert v1.text("solve") == SEED
    app_lm = js.careful_task_lm()  # the application's model, behind the proxy
    app = create_server_app(store, default_lm=app_lm, launcher=ThreadLauncher())
    traffic = builtin_task("word_problems").dataset(seed=0, n_train=40, n_val=40, n_test=40)
    questions = [str(example.input["question"]) for example in traffic][:10]  # js.gold knows
    with TestClient(app) as client:
        for question in questions:  # the application's traffic, and its user's thumbs
            trace_id, reply = ask(client, question)
            assert app_lm.calls[-1][0] == {"role": "system", "content": SEED}
            right = reply == f"Answer: {js.gold(question)}"
            feedback = {"trace_id": trace_id, "thumb": "up" if right else "down"}
            assert client.post("/api/feedback", json=feedback).status_code == 201

        built = emery.dataset_from_traces(
            "{question}",
            store=store,
            service="support-bot",
            attributes={sc.PROMPT_NAME: "support-bot", sc.PROMPT_VERSION: "1"},
        )
        assert built.summary.matched == built.summary.with_feedback == len(questions)
        assert {e.input["question"] for _, e in built} == set(questions)
        assert all(e.meta["feedback"]["score"] == 0.0 for _, e in built)  # v1 is wrong
        dataset = built.write(tmp_path / "traces.jsonl")

        job_id = search(store, tmp_path, traces_job(dataset, v1.text("solve"), tmp_path))
        v2 = published.publish(store, job_id, "support-bot")
        assert v2.version == 2
        assert v2.text("solve") != SEED

        question = questions[0]
        _, reply = ask(client, question)
        assert app_lm.calls[-1][0] == {"role": "system", "content": v2.text("solve")}
        assert reply == f"Answer: {js.gold(question)}"  # v2 answers what v1 got wrong
