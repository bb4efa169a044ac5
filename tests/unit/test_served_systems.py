"""A published version served whole: ``POST /systems/NAME/run`` and ``emery.load`` run the
job's system under the published candidate, the answer stage included, with the
system's own parsing, and the server records each run as an application trace."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import jobs_support as js
import pytest
from bad_input_support import one_error_line, run_cli
from fastapi.testclient import TestClient
from server_support import finished_job, random_search_module
from test_graph_results import ONE_NODE, digest_lm, outputs, two_nodes
from test_graph_results import finished_job as finished_graph_job

import emery
from emery.algorithms.operators import apply_operator
from emery.config.loading import job_config
from emery.config.resolve import resolve_system
from emery.core.errors import EmeryError
from emery.core.models import Candidate, Demo, Example
from emery.data.tasks import builtin_task
from emery.lm import FakeLM
from emery.reports import published
from emery.reports.published import PublishedPrompt
from emery.server.api import create_server_app
from emery.store import SQLiteStore
from emery.store.records import SpanFilter
from emery.systems.base import RunContext
from emery.systems.capabilities import StagedPrompts
from emery.systems.graph.spec import GraphConfig
from emery.systems.graph.system import SPEC_COMPONENT, GraphSystem, spec_text

__all__ = ["random_search_module"]

QUESTION = "Tom has 3 boxes with 4 apples in each box. How many apples does Tom have?"


@dataclass
class Done:
    store: SQLiteStore
    path: Path
    job_id: str
    first: PublishedPrompt


@pytest.fixture(scope="module")
def done(random_search_module: None, tmp_path_factory: pytest.TempPathFactory) -> Done:
    workdir = tmp_path_factory.mktemp("served")
    path = workdir / "emery.db"
    store = SQLiteStore(path)
    job_id = finished_job(store, workdir)  # type: ignore[arg-type]  # any store will do
    return Done(store, path, job_id, published.publish(store, job_id, "solver"))


def direct_output(store: SQLiteStore, job_id: str, candidate: Candidate) -> object:
    """What the job's own system gives for ``QUESTION`` under ``candidate``."""
    system = resolve_system(job_config(store.get_job(job_id)))
    example = Example(id="q", input={"question": QUESTION})
    return asyncio.run(system.run(candidate, RunContext(lm=js.task_lm(), example=example))).output


def test_the_server_runs_the_published_system_and_records_the_run(done: Done) -> None:
    client = TestClient(create_server_app(done.store))
    answer = client.post(
        "/systems/solver/run",
        json={"input": {"question": QUESTION}},
        headers={"X-Emery-Service": "checkout"},
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    best = Candidate(components=done.first.components, demos=done.first.demos)
    assert body["output"] == direct_output(done.store, done.job_id, best)
    assert body["version"] == done.first.version
    assert body["error"] is None
    spans = done.store.list_spans(SpanFilter(trace_id=body["trace_id"]), limit=None).items
    root = next(s for s in spans if s.name == "run solver")
    calls = [s for s in spans if s.parent_id == root.span_id]
    assert calls, "the run's LM calls are spans of its trace"
    assert root.attributes["service.name"] == "checkout"
    assert root.attributes["emery.prompt.version"] == done.first.version
    assert QUESTION in root.attributes["emery.input"]
    assert all(s.job_id is None for s in spans), "application traffic, not a job's"


def test_a_missing_field_and_an_unknown_name_are_one_line_errors(done: Done) -> None:
    client = TestClient(create_server_app(done.store))
    missing = client.post("/systems/solver/run", json={"input": {"text": QUESTION}})
    assert missing.status_code == 400
    assert "question" in missing.json()["detail"]
    unknown = client.post("/systems/nobody/run", json={"input": {"question": QUESTION}})
    assert unknown.status_code == 404


def test_emery_load_runs_the_same_system_in_process(done: Done) -> None:
    client = TestClient(create_server_app(done.store))
    served = client.post("/systems/solver/run", json={"input": {"question": QUESTION}}).json()
    solve = emery.load("solver", store=done.path)
    assert solve(question=QUESTION) == served["output"]
    assert solve({"question": QUESTION}) == served["output"]
    assert solve.prompt.version == done.first.version


def test_the_answer_stage_is_served_with_the_stage_it_restates(done: Done) -> None:
    """A version whose candidate adds the answer stage: two LM calls a run, and the output
    parsed from the restated answer, as the job scored it."""
    config = job_config(done.store.get_job(done.job_id))
    program = resolve_system(config)
    assert isinstance(program, StagedPrompts)
    best = Candidate(components=done.first.components, demos=done.first.demos)
    stage = program.config.stages[0].name
    restated = apply_operator("answer_stage", best, program, stage, iteration=1)
    assert restated is not None
    content = done.first.model_dump(mode="json", exclude={"version", "published_at"})
    content |= {"components": restated.components, "candidate_id": restated.id}
    done.store.put_resource("prompt:restated", content, kind="prompt", job_id=done.job_id)

    solve = emery.load("restated", store=done.store)

    def reply(messages: list[dict[str, str]]) -> str:  # no answer line, unless restating
        return "Answer: 12" if messages[-1]["content"].startswith("Worked reply") else "It is 12."

    solve.served.lm = FakeLM(reply)  # type: ignore[arg-type]
    run = asyncio.run(solve.served.run({"question": QUESTION}))
    assert run.output == "12"
    assert len([s for s in run.spans if s.name.startswith("chat")]) == 2
    plain = emery.load("solver", store=done.store)
    plain.served.lm = FakeLM(reply)  # type: ignore[arg-type]
    assert asyncio.run(plain.served.run({"question": QUESTION})).error is not None


def test_a_version_serves_without_its_job(done: Done, tmp_path: Path) -> None:
    """The config recorded with the version is enough: another store, no job in it."""
    empty = SQLiteStore(tmp_path / "other.db")
    content = done.first.model_dump(mode="json", exclude={"version", "published_at"})
    empty.put_resource("prompt:copied", content, kind="prompt", job_id=None)
    solve = emery.load("copied", store=empty)
    best = Candidate(components=done.first.components, demos=done.first.demos)
    assert solve(question=QUESTION) == direct_output(done.store, done.job_id, best)


def test_a_failed_run_raises_in_process_and_is_an_error_over_http(done: Done) -> None:
    solve = emery.load("solver", store=done.path)
    solve.served.lm = FakeLM(lambda _messages: "no answer line here")
    with pytest.raises(EmeryError, match="solver v"):
        solve(question=QUESTION)


def test_a_workflow_graph_grown_by_the_search_is_served_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version holding a grown graph (two nodes where the job's config had one) runs
    the grown graph, with the node texts and demos the search gave it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EMERY_STORE", raising=False)
    store = SQLiteStore(tmp_path / "emery.db")
    job_id = finished_graph_job(str(tmp_path / "emery.db"), ONE_NODE)
    first = published.publish(store, job_id, "grapher")
    grown = Candidate(
        components={
            SPEC_COMPONENT: spec_text(two_nodes()),
            "solve": "Think step by step.",
            "check": "Check the draft; fix it if wrong.",
        },
        demos={"solve": (Demo(inputs={"question": "1 + 1?"}, output="Answer: 2"),)},
    )
    content = first.model_dump(mode="json", exclude={"version", "published_at"})
    content |= {"components": grown.components}
    content["demos"] = {"solve": [demo.model_dump(mode="json") for demo in grown.demos["solve"]]}
    store.put_resource("prompt:grapher", content, kind="prompt", job_id=job_id)

    solve = emery.load("grapher", store=store)
    assert solve.prompt.version == 2
    solve.served.lm = digest_lm()
    expected = outputs(GraphSystem(GraphConfig.model_validate(ONE_NODE)), grown, ["2 + 3?"])
    assert solve(question="2 + 3?") == expected[0]


def two_versions(done: Done) -> None:
    """``splitter`` versions 1 and 2 (the job published twice), once."""
    if not done.store.list_resources("prompt:splitter"):
        for _ in range(2):
            published.publish(done.store, done.job_id, "splitter")


def test_an_alias_names_a_version_and_a_split_keeps_a_user_on_one(
    done: Done, capsys: pytest.CaptureFixture[str]
) -> None:
    two_versions(done)
    where = ["--store", str(done.path)]
    assert run_cli(["prompts", "alias", "splitter", "production", "1", *where]) == 0
    assert "production → version 1" in capsys.readouterr().out
    client = TestClient(create_server_app(done.store))
    ask = {"input": {"question": QUESTION}}
    run = client.post("/systems/splitter/run", params={"alias": "production"}, json=ask).json()
    assert run["version"] == 1
    assert emery.load("splitter", store=done.store, alias="production").prompt.version == 1

    assert run_cli(["prompts", "alias", "splitter", "canary", "1=50", "2=50", *where]) == 0
    capsys.readouterr()
    picked = {}
    for user in range(40):
        headers = {"X-Emery-Split-Key": f"user-{user}"}
        answers = [
            client.post(
                "/systems/splitter/run", params={"alias": "canary"}, json=ask, headers=headers
            ).json()["version"]
            for _ in range(2)
        ]
        assert answers[0] == answers[1], "one key, one version"
        picked[user] = answers[0]
    assert set(picked.values()) == {1, 2}
    assert run_cli(["prompts", "alias", "splitter", "canary", *where]) == 0
    assert "1=50% 2=50%" in capsys.readouterr().out


def test_each_versions_live_traffic_is_scored_from_its_feedback(
    done: Done, capsys: pytest.CaptureFixture[str]
) -> None:
    two_versions(done)
    client = TestClient(create_server_app(done.store))
    ask = {"input": {"question": QUESTION}}
    for version, thumbs in ((1, ["up", "up", "down"]), (2, ["down", "down"])):
        for thumb in thumbs:
            run = client.post("/systems/splitter/run", params={"version": version}, json=ask)
            trace = run.json()["trace_id"]
            sent = client.post("/api/feedback", json={"trace_id": trace, "thumb": thumb})
            assert sent.status_code < 300, sent.text
        client.post("/systems/splitter/run", params={"version": version}, json=ask)  # unrated
    rows = client.get("/api/prompts/splitter/scores").json()["versions"]
    mine = {row["version"]: row for row in rows}
    assert mine[1]["rated"] >= 3
    assert mine[1]["runs"] > mine[1]["rated"]
    assert mine[1]["mean"] > mine[2]["mean"]
    assert run_cli(["prompts", "scores", "splitter", "--store", str(done.path)]) == 0
    assert "rated" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["production", "99"], "no version 99"),
        (["production", "1=90"], "a split names two versions"),
        (["Production", "1"], "lowercase"),
        (["production", "1=0", "2=10"], "positive"),
        (["staging"], "no alias 'staging'"),
    ],
)
def test_a_bad_alias_is_one_line_and_changes_nothing(
    done: Done, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    before = [r.version for r in done.store.list_resources("prompt-alias:solver:production")]
    assert run_cli(["prompts", "alias", "solver", *args, "--store", str(done.path)]) != 0
    assert message in one_error_line(capsys.readouterr().err)
    after = [r.version for r in done.store.list_resources("prompt-alias:solver:production")]
    assert after == before


def test_a_shadow_runs_beside_the_alias_and_both_are_scored(
    done: Done, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--shadow`` runs a candidate on a copy of each request the alias answers, never
    answering with it, and ``--scorer`` (a published verifier graph) scores both, so
    ``emery prompts scores`` compares them on the same live requests."""
    from test_published_verifier import publish_judge

    publish_judge(tmp_path, done.path)  # answer-judge, in the server's store
    served = published.publish(done.store, done.job_id, "shadowed")
    other = served.model_dump(mode="json", exclude={"version", "published_at"})
    other["components"] = {name: text + " Check." for name, text in served.components.items()}
    done.store.put_resource("prompt:shadowed", other, kind="prompt", job_id=done.job_id)
    where = ["--store", str(done.path)]
    alias = ["prompts", "alias", "shadowed", "production", "1", "--shadow", "2"]
    assert run_cli([*alias, "--scorer", "answer-judge:1", *where]) == 0
    assert "version 1, shadow 2, scored by answer-judge:1" in capsys.readouterr().out

    problems = builtin_task("word_problems").dataset(seed=0, n_train=12, n_val=1, n_test=1)
    questions = [str(e.input["question"]) for e in problems.split("train")]
    client = TestClient(create_server_app(done.store))
    answered = []
    for question in questions:
        ask = {"input": {"question": question}}
        run = client.post("/systems/shadowed/run", params={"alias": "production"}, json=ask)
        assert run.status_code == 200, run.text
        assert run.json()["version"] == 1  # the shadow never answers
        answered.append(run.json())
    rows = {
        (row["version"], row["shadow"]): row
        for row in client.get("/api/prompts/shadowed/scores").json()["versions"]
    }
    served_row, shadow_row = rows[(1, False)], rows[(2, True)]
    assert served_row["runs"] == shadow_row["runs"] == len(questions)
    assert served_row["scored"] == shadow_row["scored"] == len(questions)
    right = [js.gold(q) for q in questions]
    got = [int(str(a["output"]).split()[-1]) for a in answered]
    assert served_row["score"] == pytest.approx(
        sum(g == r for g, r in zip(got, right, strict=True)) / 12
    )
    against = shadow_row["against_served"]
    assert against["n"] == len(questions)
    assert against["difference"] == pytest.approx(shadow_row["score"] - served_row["score"])
    assert 0.0 <= shadow_row["same_output"] < 1.0  # another instruction, other answers
    shadow_runs = done.store.list_spans(SpanFilter(name="run shadowed"), limit=None).items
    shadowed = {s.attributes.get("emery.shadow_of") for s in shadow_runs} - {None}
    assert shadowed == {a["trace_id"] for a in answered}
    assert run_cli(["prompts", "scores", "shadowed", *where]) == 0
    assert "2 (shadow)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["1", "--shadow", "1"], "cannot shadow it"),
        (["1", "--shadow", "9"], "no version 9"),
        (["1", "--scorer", "answer-judge"], "NAME:VERSION"),
        (["1", "--scorer", "nobody:1"], "no published prompt 'nobody'"),
        (["--shadow", "1"], "go with the versions"),
    ],
)
def test_a_bad_shadow_or_scorer_is_one_line_and_changes_nothing(
    done: Done, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    before = [r.version for r in done.store.list_resources("prompt-alias:solver:production")]
    command = ["prompts", "alias", "solver", "production", *args, "--store", str(done.path)]
    assert run_cli(command) != 0
    assert message in one_error_line(capsys.readouterr().err)
    after = [r.version for r in done.store.list_resources("prompt-alias:solver:production")]
    assert after == before
