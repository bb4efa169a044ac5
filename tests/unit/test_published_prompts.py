"""Publishing a job's best candidate as a named, versioned prompt: versions, show and
rollback, the CLI, the API routes and ``emery.prompt`` with its local copy."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest
from bad_input_support import one_error_line, run_cli
from fastapi.testclient import TestClient
from server_support import finished_job, random_search_module

import emery
from emery.core.errors import ConfigError, EmeryError, StoreError
from emery.core.models import Demo
from emery.data.tasks import builtin_task
from emery.lm.fake import FakeLM
from emery.reports import published
from emery.reports.published import PublishedPrompt
from emery.server.api import create_server_app
from emery.server.launcher import ThreadLauncher
from emery.store import SQLiteStore
from emery.store.records import NewJob
from emery.store.states import NotFound
from emery.systems.stages import MessageTemplate

__all__ = ["random_search_module"]

KEY = "prompts-key"


@dataclass
class Published:
    store: SQLiteStore
    path: Path
    job_id: str
    first: PublishedPrompt


@pytest.fixture(scope="module")
def done(random_search_module: None, tmp_path_factory: pytest.TempPathFactory) -> Published:
    """A SQLite store holding a succeeded scripted job, published once as ``support-bot``."""
    workdir = tmp_path_factory.mktemp("published")
    path = workdir / "emery.db"
    store = SQLiteStore(path)
    job_id = finished_job(store, workdir)  # type: ignore[arg-type]  # any store will do
    return Published(store, path, job_id, published.publish(store, job_id, "support-bot"))


def other_version(store: SQLiteStore, name: str, like: PublishedPrompt) -> PublishedPrompt:
    """A next version of ``name`` with other texts (as another job's publish would make)."""
    content = like.model_dump(mode="json", exclude={"version", "published_at"})
    content["components"] = dict.fromkeys(like.components, "Another text.")
    record = store.put_resource(f"prompt:{name}", content, kind="prompt", job_id=like.job_id)
    return published.show(store, name, record.version)


def test_a_publish_records_the_best_candidate_its_job_scores_and_diff(done: Published) -> None:
    job = done.store.get_job(done.job_id)
    prompt = done.first
    assert (prompt.name, prompt.version) == ("support-bot", 1)
    assert prompt.job_id == job.id
    assert prompt.job_name == job.name
    assert job.best_candidate_id is not None
    best = done.store.get_candidate(job.id, job.best_candidate_id)
    assert prompt.candidate_id == best.id
    assert prompt.components == best.components
    program = builtin_task("word_problems").program  # the job's system: the task's program
    assert program is not None
    assert prompt.templates == {stage.name: tuple(stage.messages) for stage in program.stages}
    assert prompt.templates  # the demos can be served as the job showed them
    assert prompt.scores.val == job.best_score
    assert prompt.scores.seed_val == job.baseline_score
    assert prompt.scores.test is not None
    assert prompt.scores.seed_test is not None
    checkpoint = done.store.get_checkpoint(job.id)
    assert checkpoint is not None
    seed_id = checkpoint.state["seed_candidate_id"]
    if best.id != seed_id:
        assert prompt.diff.startswith("--- seed/")
        assert "+++ support-bot/" in prompt.diff
    else:
        assert prompt.diff == ""
    assert prompt.published_at is not None


def test_versions_show_and_a_rollback_that_keeps_the_history(done: Published) -> None:
    store, name = done.store, "rollback-bot"
    first = published.publish(store, done.job_id[:8], name)
    second = other_version(store, name, first)
    assert (first.version, second.version) == (1, 2)
    assert published.show(store, name).components == second.components != first.components
    assert published.show(store, name, 1).components == first.components
    again = published.rollback(store, name, to=1)
    assert (again.version, again.rolled_back_to) == (3, 1)
    assert again.components == first.components
    assert again.candidate_id == first.candidate_id
    assert again.job_id == first.job_id
    assert published.show(store, name) == again
    assert [p.version for p in published.versions(store, name)] == [1, 2, 3]
    assert published.versions(store, name)[1] == second
    latest = {p.name: p.version for p in published.latest_versions(store)}
    assert latest["rollback-bot"] == 3
    assert latest["support-bot"] >= 1


def test_bad_requests_are_one_clear_error_and_change_nothing(done: Published) -> None:
    store = done.store
    before = store.list_resources()
    store.create_job(
        NewJob(id="j-unfinished", name="unfinished", algorithm="baseline", kind="eval", config={})
    )
    with pytest.raises(EmeryError, match="job j-unfinished is created: only a succeeded job"):
        published.publish(store, "j-unfinished", "support-bot")
    with pytest.raises(NotFound, match="no job 'j-nothing'"):
        published.publish(store, "j-nothing", "support-bot")
    with pytest.raises(ConfigError, match=r"prompt name '\.\./etc' must be"):
        published.publish(store, done.job_id, "../etc")
    with pytest.raises(NotFound, match="no published prompt 'nobody'"):
        published.show(store, "nobody")
    with pytest.raises(NotFound, match="no published prompt 'nobody'"):
        published.versions(store, "nobody")
    with pytest.raises(NotFound, match="'support-bot' has no version 99 \\(latest: "):
        published.show(store, "support-bot", 99)
    with pytest.raises(NotFound, match="has no version 99"):
        published.rollback(store, "support-bot", to=99)
    with pytest.raises(ConfigError, match="a prompt version is a number from 1 to 2147483647"):
        published.show(store, "support-bot", 0)
    with pytest.raises(ConfigError, match=f"not {2**40}"):  # too big for a database integer
        published.show(store, "support-bot", 2**40)
    store.delete_job("j-unfinished")
    assert store.list_resources() == before


def test_the_cli_publishes_lists_shows_and_rolls_back(
    done: Published, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(done.path)
    assert run_cli(["publish", done.job_id, "--name", "cli-bot", "--store", db]) == 0
    assert "published cli-bot version 1" in capsys.readouterr().err
    assert run_cli(["publish", done.job_id, "--name", "cli-bot", "--json", "--store", db]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == 2
    assert run_cli(["prompts", "rollback", "cli-bot", "--to", "1", "--store", db]) == 0
    assert "cli-bot version 3 repeats version 1" in capsys.readouterr().err
    assert run_cli(["prompts", "list", "--json", "--store", db]) == 0
    names = {p["name"]: p["version"] for p in json.loads(capsys.readouterr().out)["prompts"]}
    assert names["cli-bot"] == 3
    assert run_cli(["prompts", "list", "cli-bot", "--store", db]) == 0
    table = capsys.readouterr().out
    assert "cli-bot" in table
    assert "3 (= v1)" in table
    assert run_cli(["prompts", "show", "cli-bot", "--version", "2", "--json", "--store", db]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["version"] == 2
    assert shown["components"] == done.first.components
    assert run_cli(["prompts", "show", "cli-bot", "--store", db]) == 0
    text = capsys.readouterr().out
    assert text.startswith("cli-bot version 3 (= v1)")
    assert done.job_id in text


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["publish", "j-nothing", "--name", "x"], "error: no job 'j-nothing'"),
        (["publish", "{job}", "--name", "a/b"], "error: prompt name 'a/b' must be"),
        (["prompts", "show", "nobody"], "error: no published prompt 'nobody'"),
        (["prompts", "show", "support-bot", "--version", "99"], "has no version 99"),
        (["prompts", "rollback", "nobody", "--to", "1"], "error: no published prompt 'nobody'"),
        (["prompts", "list", "nobody"], "error: no published prompt 'nobody'"),
    ],
)
def test_cli_errors_are_one_line(
    done: Published, capsys: pytest.CaptureFixture[str], args: list[str], expect: str
) -> None:
    before = done.store.list_resources()
    args = [arg.replace("{job}", done.job_id) for arg in args]
    assert run_cli([*args, "--store", str(done.path)]) == 2
    assert expect in one_error_line(capsys.readouterr().err)
    assert done.store.list_resources() == before


@pytest.fixture(scope="module")
def client(done: Published) -> Iterator[TestClient]:
    app = create_server_app(done.store, api_key=KEY, launcher=ThreadLauncher())
    with TestClient(app, headers={"X-API-Key": KEY}) as client:
        yield client


def test_the_api_serves_prompts_by_name_and_version(done: Published, client: TestClient) -> None:
    listed = client.get("/api/prompts").json()["prompts"]
    assert "support-bot" in {p["name"] for p in listed}
    latest = client.get("/api/prompts/support-bot").json()
    assert latest == published.show(done.store, "support-bot").model_dump(mode="json")
    first = client.get("/api/prompts/support-bot", params={"version": 1}).json()
    assert first["version"] == 1
    assert first["components"] == done.first.components
    every = client.get("/api/prompts/support-bot/versions").json()["versions"]
    assert [p["version"] for p in every] == list(range(1, len(every) + 1))
    missing = client.get("/api/prompts/nobody")
    assert missing.status_code == 404
    assert "no published prompt 'nobody'" in missing.json()["detail"]
    assert client.get("/api/prompts/support-bot", params={"version": 99}).status_code == 404
    assert client.get("/api/prompts/support-bot", params={"version": 0}).status_code == 422
    assert client.get("/api/prompts/bad%20name").status_code == 422


def test_the_api_needs_the_key(client: TestClient) -> None:
    for path in ("/api/prompts", "/api/prompts/support-bot"):
        assert client.get(path, headers={"X-API-Key": "nope"}).status_code == 401


def copy_store(source: Path, target: Path) -> Path:
    """A consistent copy of the SQLite store at ``source`` (its write-ahead log included)."""
    with closing(sqlite3.connect(source)) as reading, closing(sqlite3.connect(target)) as writing:
        reading.backup(writing)
    return target


def test_emery_prompt_keeps_working_from_its_copy_when_the_store_is_gone(
    done: Published, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("EMERY_PROMPT_CACHE", str(cache))
    app_store = copy_store(done.path, tmp_path / "app.db")
    latest = published.show(done.store, "support-bot")
    assert emery.prompt("support-bot", store=app_store) == latest.components
    assert emery.prompt("support-bot", version=1, store=str(app_store)) == done.first.components
    assert emery.prompt("support-bot", store=done.store) == latest.components
    assert (cache / "support-bot" / "latest.json").is_file()
    assert (cache / "support-bot" / "v1.json").is_file()
    with pytest.raises(NotFound, match="no published prompt 'nobody'"):
        emery.prompt("nobody", store=app_store)  # a store that answers is believed
    app_store.unlink()
    assert emery.prompt("support-bot", store=app_store) == latest.components
    assert emery.prompt("support-bot", version=1, store=app_store) == done.first.components
    assert not app_store.exists()  # no empty store was made in its place
    with pytest.raises(StoreError, match=re.escape(f"no store at {app_store}; and no local copy")):
        emery.prompt("support-bot", version=99, store=app_store)
    with pytest.raises(ConfigError, match="must be"):
        emery.prompt("../../etc/passwd", store=app_store)


def test_the_proxy_fills_the_system_prompt_from_a_published_prompt(done: Published) -> None:
    lm = FakeLM(lambda messages: f"{messages[0]['role']}: {messages[0]['content']}")
    app = create_server_app(done.store, default_lm=lm, launcher=ThreadLauncher())
    prompt = published.show(done.store, "support-bot", 1)
    component, text = next(iter(prompt.components.items()))
    chat = {"model": "m", "messages": [{"role": "user", "content": "How many?"}]}
    with TestClient(app) as client:
        path = "/prompts/support-bot/v1/chat/completions"
        answer = client.post(path, params={"version": 1, "component": component}, json=chat)
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == f"system: {text}"
        assert lm.calls[-1] == [
            {"role": "system", "content": text},
            {"role": "user", "content": "How many?"},
        ]
        replaced = {**chat, "messages": [{"role": "system", "content": "Old."}, *chat["messages"]]}
        answer = client.post(path, params={"version": 1, "component": component}, json=replaced)
        assert answer.status_code == 200, answer.text
        assert lm.calls[-1][0] == {"role": "system", "content": text}
        assert len(lm.calls[-1]) == 2
        missing = client.post("/prompts/nobody/v1/chat/completions", json=chat)
        assert missing.status_code == 404
        assert "no published prompt 'nobody'" in missing.json()["error"]["message"]
        wrong = client.post(path, params={"component": "nothing"}, json=chat)
        assert wrong.status_code == 404
        assert "has no component 'nothing'" in wrong.json()["error"]["message"]
    assert len(lm.calls) == 2


def test_a_prompt_text_is_its_only_component_or_a_named_one(done: Published) -> None:
    one = done.first.model_copy(update={"components": {"instruction": "Be brief."}})
    assert one.text() == "Be brief."
    two = done.first.model_copy(update={"components": {"a": "A.", "b": "B."}})
    assert two.text("b") == "B."
    with pytest.raises(ConfigError, match="has the components a, b: name one"):
        two.text()
    with pytest.raises(NotFound, match=r"has no component 'c' \(it has a, b\)"):
        two.text("c")


ROUTER_TEMPLATES = (MessageTemplate(template="Request: {query}\nIntents: {labels}"),)
DEMO = Demo(inputs={"query": "book a table", "labels": "book, cancel"}, output="book")


def router_version(store: SQLiteStore, like: PublishedPrompt, **update: object) -> PublishedPrompt:
    """A version of ``router`` with one stage, its templates and a demo (as a MIPRO job's
    publish records them), changed by ``update``."""
    content = like.model_copy(
        update={
            "name": "router",
            "components": {"route": "Pick one of: {labels}."},
            "demos": {"route": (DEMO,)},
            "templates": {"route": ROUTER_TEMPLATES},
            **update,
        }
    ).model_dump(mode="json", exclude={"version", "published_at"})
    record = store.put_resource("prompt:router", content, kind="prompt", job_id=like.job_id)
    return published.show(store, "router", record.version)


def test_the_proxy_sends_a_version_as_it_was_scored_with_demos_layout_and_fields(
    done: Published,
) -> None:
    lm = FakeLM(lambda messages: "cancel")
    app = create_server_app(done.store, default_lm=lm, launcher=ThreadLauncher())
    chats = router_version(done.store, done.first)
    inline = router_version(
        done.store, done.first, components={"route": "Pick one.", "route:demos": "inline"}
    )
    asked = "Request: drop my booking\nIntents: book, cancel"
    chat = {"model": "m", "messages": [{"role": "system", "content": "Old."}, user(asked)]}
    path = "/prompts/router/v1/chat/completions"
    with TestClient(app) as client:
        answer = client.post(path, params={"version": chats.version}, json=chat)
        assert answer.status_code == 200, answer.text
        assert lm.calls[-1] == [
            {"role": "system", "content": "Pick one of: book, cancel."},
            user("Request: book a table\nIntents: book, cancel"),
            {"role": "assistant", "content": "book"},
            user(asked),
        ]
        answer = client.post(path, params={"version": inline.version}, json=chat)
        assert answer.status_code == 200, answer.text
        assert lm.calls[-1] == [
            {"role": "system", "content": "Pick one."},
            user(
                "Example 1:\nRequest: book a table\nIntents: book, cancel\nReply:\nbook"
                f"\n\nNow the real one:\n\n{asked}"
            ),
        ]
        # the instruction reads {labels}: a request the stage's template cannot read back
        # is refused with the reason, and nothing is sent to the model
        unreadable = {**chat, "messages": [user("drop my booking")]}
        refused = client.post(path, params={"version": chats.version}, json=unreadable)
        assert refused.status_code == 400
        message = refused.json()["error"]["message"]
        assert "do not fit the templates stage 'route' of prompt 'router'" in message
        assert "unmatched" in message
    assert len(lm.calls) == 2


def test_a_version_without_templates_serves_its_text_but_refuses_its_demos(
    done: Published,
) -> None:
    older = router_version(done.store, done.first, templates={}, components={"route": "Pick."})
    asked = [user("drop my booking")]
    with pytest.raises(ConfigError, match="published without its stage's message templates"):
        older.chat(asked)
    text_only = older.model_copy(update={"demos": {}})
    assert text_only.chat(asked) == [{"role": "system", "content": "Pick."}, *asked]
    assert text_only.text() == "Pick."


def test_layout_choices_are_not_text_components(done: Published) -> None:
    version = done.first.model_copy(
        update={"components": {"route": "Pick.", "route:reminder": "Label only."}}
    )
    assert version.text() == "Pick."
    assert version.component() == "route"
    with pytest.raises(NotFound, match="has no component 'route:reminder'"):
        version.text("route:reminder")
    assert version.chat([user("x")]) == [
        {"role": "system", "content": "Pick."},
        user("x\n\nLabel only."),
    ]
    restating = version.model_copy(
        update={"components": {"route": "Pick.", "route:answer": "restate"}}
    )
    with pytest.raises(ConfigError, match="which one chat cannot do"):
        restating.chat([user("x")])


def user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def test_stage_templates_come_from_a_prompt_program_and_an_agent_is_not_built(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(tmp_path / "emery.db")
    data = {"dataset": {"task": "word_problems"}, "verifier": {"kind": "numeric"}}
    two_stages = {
        "kind": "prompt_program",
        "stages": [
            {"name": "solve", "messages": [{"template": "Q: {question}"}]},
            {"name": "answer", "messages": [{"template": "{question}\n{solve}"}]},
        ],
    }
    # an agent whose module cannot be imported: building it would fail, so it is not built
    agent = {"kind": "function_agent", "agent": "no_such_module_anywhere:agent"}
    for job_id, system in (("j-program", two_stages), ("j-agent", agent)):
        store.create_job(
            NewJob(
                id=job_id,
                name=job_id,
                algorithm="baseline",
                kind="optimize",
                config={**data, "system": system},
            )
        )
    assert published.stage_templates(store.get_job("j-program")) == {
        "solve": (MessageTemplate(template="Q: {question}"),),
        "answer": (MessageTemplate(template="{question}\n{solve}"),),
    }
    assert published.stage_templates(store.get_job("j-agent")) == {}
    assert "no stage templates" not in caplog.text  # not tried: no import was attempted
