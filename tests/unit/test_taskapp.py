"""Task apps over loopback: the client system and ``emery.taskapp`` server round trip with
auth on, a wrong key refused, health checked before a job, custom reward paths, and a
task app that dies in the middle of an evaluation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fastapi import FastAPI

from emery.cli.app import main
from emery.core.errors import ConfigError
from emery.core.models import Example
from emery.core.rollouts import Attempt
from emery.evaluation import Evaluator
from emery.lm import FakeLM
from emery.proxy import BackgroundServer, create_app, free_port
from emery.proxy.embedded import RegistryProxy
from emery.systems.function_agent import agent
from emery.systems.registry import build_system, parse_system_config
from emery.systems.task_app import TaskApp, TaskAppConfig
from emery.taskapp import create_task_app
from emery.tracing import (
    LiveRollouts,
    MemoryRecorder,
    RolloutConfig,
    emit_message,
    emit_reward,
    heartbeat,
)
from emery.tracing import conventions as sc
from emery.verifiers import ExactMatch

KEY = "s3cret-key"
SYSTEM_PROMPT = "Reply with the word."


def plain_openai_agent(task: dict[str, Any]) -> str:
    """Knows nothing of emery: a module-level prompt and an OpenAI client from the environment."""
    emit_message(f"asking about {task['word']}")
    client = openai.OpenAI()  # OPENAI_BASE_URL / OPENAI_API_KEY from the environment
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task["word"]},
        ],
    )
    return reply.choices[0].message.content or ""


@agent(components={"SYSTEM_PROMPT": SYSTEM_PROMPT})
def lm_agent(task: dict[str, Any], lm: Any, example: Example, prompts: dict[str, str]) -> None:
    """Uses the injected lm (through the proxy) and scores itself with an emitted reward."""
    answer = lm(task["word"], system=prompts["SYSTEM_PROMPT"])
    emit_reward(1.0 if answer == example.expected else 0.25)


def capitals_lm() -> FakeLM:
    def reply(messages: Any) -> str:
        system = " ".join(m["content"] for m in messages if m["role"] == "system")
        word = messages[-1]["content"]
        return word.upper() if "capitals" in system.lower() else word

    return FakeLM(reply, model="fake/capitals")


@pytest.fixture
def proxy() -> Iterator[RegistryProxy]:
    registry = LiveRollouts()
    with BackgroundServer(create_app(registry=registry)) as server:
        yield RegistryProxy(registry, server.url)


@pytest.fixture
def agent_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Where a plain client would go without emery: nothing listens there.
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "not-used")


def app_config(url: str, **extra: Any) -> TaskAppConfig:
    return TaskAppConfig(base_url=url, api_key=KEY, **extra)


WORDS = [Example(id=f"e{i}", input={"word": f"w{i}"}, expected=f"W{i}") for i in range(4)]


@pytest.mark.usefixtures("agent_env")
async def test_round_trip_with_auth_through_the_proxy(proxy: RegistryProxy) -> None:
    served = agent(components=["SYSTEM_PROMPT"])(plain_openai_agent)
    with BackgroundServer(create_task_app(served, api_key=KEY, name="words")) as server:
        system = TaskApp(app_config(server.url))
        system.check_inputs({"word"})
        seed = system.seed_candidate()
        assert seed.components == {"SYSTEM_PROMPT": SYSTEM_PROMPT}  # from /task_info
        better = seed.derive(
            components={"SYSTEM_PROMPT": "Reply with the word in capitals."}, lineage=seed.lineage
        )
        recorder = MemoryRecorder()
        ev = Evaluator(
            system, ExactMatch(), capitals_lm(), recorder=recorder, proxy=proxy, concurrency=4
        )
        before = await ev.evaluate(seed, WORDS, "val")
        after = await ev.evaluate(better, WORDS, "val")
    assert before.scores == [0.0] * 4  # "w0" is not "W0"
    assert after.scores == [1.0] * 4
    for result in after.results:
        assert result.lm_calls == 1  # the app's call went through the job's proxy
        root, *rest = recorder.spans(result.rollout_id)
        assert [s.sequence for s in [root, *rest]] == [0, 1, 2]
        chat = next(s for s in rest if s.name.startswith("chat"))
        message = next(s for s in rest if s.name == sc.MESSAGE_SPAN)
        assert chat.attributes[sc.LM_SOURCE] == "proxy"
        assert "Reply with the word in capitals." in chat.attributes[sc.GEN_AI_INPUT_MESSAGES]
        assert message.attributes[sc.MESSAGE_TEXT] == f"asking about w{result.example_id[1:]}"
        assert {s.trace_id for s in rest} == {root.trace_id}
        assert {s.parent_id for s in rest} == {root.span_id}
        assert [c.component for c in result.calls] == ["SYSTEM_PROMPT"]


async def test_a_self_scoring_agent_reports_its_reward(proxy: RegistryProxy) -> None:
    with BackgroundServer(create_task_app(lm_agent, api_key=KEY)) as server:
        system = TaskApp(app_config(server.url, components={"SYSTEM_PROMPT": "x"}))
        ev = Evaluator(system, ExactMatch(), capitals_lm(), proxy=proxy)
        seed = system.seed_candidate()
        caps = seed.derive(components={"SYSTEM_PROMPT": "Use capitals."}, lineage=seed.lineage)
        low = await ev.run_one(seed, WORDS[0])
        high = await ev.run_one(caps, WORDS[0])
    assert (low.score, high.score) == (0.25, 1.0)  # rewards, not the verifier's 0/1
    assert low.error is None


async def test_a_wrong_or_missing_key_is_refused() -> None:
    with BackgroundServer(create_task_app(lm_agent, api_key=KEY)) as server:
        with pytest.raises(ConfigError, match="refused the API key"):
            TaskApp(TaskAppConfig(base_url=server.url, api_key="wrong")).check_inputs({"word"})
        with pytest.raises(ConfigError, match="refused the API key"):
            TaskApp(
                TaskAppConfig(base_url=server.url, api_key_env="EMERY_UNSET_KEY")
            ).check_health()
        body = TaskApp(app_config(server.url)).request(
            TaskApp(app_config(server.url)).seed_candidate(), WORDS[0], "val", None
        )
        payload = body.model_dump(mode="json")
        for headers in ({}, {"X-API-Key": "wrong"}, {"Authorization": "Bearer wrong"}):
            refused = httpx.post(server.url + "/rollout", json=payload, headers=headers)
            assert refused.status_code == 401
        accepted = httpx.get(server.url + "/task_info", headers={"Authorization": f"Bearer {KEY}"})
        assert accepted.status_code == 200
        assert accepted.json()["components"] == {"SYSTEM_PROMPT": SYSTEM_PROMPT}
        system = TaskApp(TaskAppConfig(base_url=server.url, api_key="wrong", components={}))
        result = await Evaluator(system, ExactMatch(), capitals_lm()).run_one(
            system.seed_candidate(), WORDS[0]
        )
        assert result.error == "the task app refused the API key (HTTP 401)"


def test_an_unreachable_app_fails_the_health_check_clearly() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConfigError, match=rf"task app {url}/health: ConnectError"):
        TaskApp(TaskAppConfig(base_url=url)).check_inputs({"word"})


def test_a_dead_task_app_stops_the_job_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    port = free_port()
    config = tmp_path / "job.toml"
    config.write_text(
        f"""
[dataset]
task = "word_problems"
n_train = 2
n_val = 2
n_test = 2

[system]
kind = "task_app"
base_url = "http://127.0.0.1:{port}"

[lm.task]
model = "python/fake_models:word_problem_lm"

[runtime]
workdir = "{(tmp_path / "work").as_posix()}"
"""
    )
    with pytest.raises(SystemExit) as info:
        main(["train", str(config), "--store", str(tmp_path / "emery.db")])
    assert info.value.code == 2
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr
    assert f"task app http://127.0.0.1:{port}/health: ConnectError" in stderr


async def test_any_app_with_a_custom_reward_path_and_no_task_info() -> None:
    raw = FastAPI()
    seen: list[dict[str, Any]] = []

    @raw.get("/health")
    async def health() -> dict[str, str]:
        return {"ok": "yes"}

    @raw.post("/rollout")
    async def rollout(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        word = body["env"]["config"]["example"]["input"]["word"]
        prompt = body["policy"]["components"]["prompt"]
        return {"results": [{"score": 0.5 if "good" in prompt else 0.1, "answer": word}]}

    with BackgroundServer(raw) as server:
        config = parse_system_config(
            {
                "kind": "task_app",
                "base_url": server.url + "/",
                "components": {"prompt": "a good prompt"},
                "reward_path": "results.0.score",
                "output_path": "results.0.answer",
                "proxy": False,
                "env_name": "words",
            }
        )
        system = build_system(config)
        assert isinstance(system, TaskApp)
        system.check_inputs({"word"})
        result = await Evaluator(system, ExactMatch(), capitals_lm()).run_one(
            system.seed_candidate(), WORDS[1], "train"
        )
    assert (result.score, result.output) == (0.5, "w1")
    (body,) = seen
    assert body["correlation_id"] == f"{result.rollout_id}:1"
    assert body["env"]["name"] == "words"
    assert isinstance(body["env"]["seed"], int)
    assert body["env"]["config"] == {
        "example": {"id": "e1", "input": {"word": "w1"}, "expected": "W1", "meta": {}},
        "split": "train",
    }
    assert body["policy"]["config"]["inference_url"] is None


SILENT_STOPPED = threading.Event()
"""Set when the job stops the silent rollout as unresponsive (``StopWatch``)."""


class StopWatch(MemoryRecorder):
    """A recorder that sets ``SILENT_STOPPED`` when an attempt is stopped as unresponsive."""

    def save_attempt(self, attempt: Attempt) -> None:
        super().save_attempt(attempt)
        if attempt.status == "unresponsive":
            SILENT_STOPPED.set()


@agent
def busy_agent(task: dict[str, Any]) -> str:
    """Works without model calls until the silent rollout beside it has been stopped (so
    longer than ``unresponsive_seconds``; at most 10 s), heartbeating when told to."""
    if not task["beat"]:
        SILENT_STOPPED.wait(10)
        return "done"
    while not SILENT_STOPPED.wait(0.05):
        heartbeat()
    return "done"


async def test_remote_heartbeats_keep_a_busy_agent_responsive(proxy: RegistryProxy) -> None:
    # No fixed work time to outlast the limit: the beating agent works until the silent one
    # is stopped, and the limit is 30 heartbeat intervals (0.6 s, 12 intervals, was missed
    # under a load of 10 on 2 cores).
    SILENT_STOPPED.clear()
    app = create_task_app(busy_agent, api_key=KEY, heartbeat_interval_s=0.05)
    with BackgroundServer(app) as server:
        system = TaskApp(app_config(server.url))
        recorder = StopWatch()
        ev = Evaluator(
            system,
            ExactMatch(),
            capitals_lm(),
            proxy=proxy,
            recorder=recorder,
            rollouts=RolloutConfig(unresponsive_seconds=1.5, timeout_seconds=10),
        )
        beating = Example(id="b", input={"beat": True}, expected="done")
        silent = Example(id="s", input={"beat": False}, expected="done")
        alive, quiet = (await ev.evaluate(system.seed_candidate(), [beating, silent])).results
    assert SILENT_STOPPED.is_set()
    assert (alive.score, alive.error) == (1.0, None)
    assert quiet.score == 0.0
    assert [a.status for a in recorder.attempts(quiet.rollout_id or "")] == ["unresponsive"]


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="base_url must start with http"):
        parse_system_config({"kind": "task_app", "base_url": "localhost:8000"})
    with pytest.raises(ConfigError, match="reward_pth"):
        parse_system_config({"kind": "task_app", "base_url": "http://x", "reward_pth": "a"})


@pytest.fixture
def task_app_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    port = free_port()
    env = dict(os.environ, EMERY_TASK_APP_KEY=KEY)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), env.get("PYTHONPATH", "")])
    process = subprocess.Popen(
        [sys.executable, "-m", "emery", "taskapp", "serve", "test_taskapp:lm_agent",
         "--port", str(port)],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120  # a start-up, not a wait: 20 s was missed at a load of 12
    while True:
        try:
            if httpx.get(url + "/health", headers={"X-API-Key": KEY}, timeout=1).is_success:
                break
        except httpx.TransportError:
            pass
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "emery taskapp serve did not start"
        time.sleep(0.1)
    try:
        yield process, url
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=10)


@pytest.mark.slow  # starts processes: make test runs it, make check does not
async def test_a_task_app_that_dies_mid_run_fails_its_rollouts_not_the_job(
    task_app_process: tuple[subprocess.Popen[str], str], proxy: RegistryProxy
) -> None:
    process, url = task_app_process
    system = TaskApp(app_config(url, components={"SYSTEM_PROMPT": "Use capitals."}))
    recorder = MemoryRecorder()
    ev = Evaluator(
        system,
        ExactMatch(),
        capitals_lm(),
        proxy=proxy,
        recorder=recorder,
        rollouts=RolloutConfig(max_attempts=2, timeout_seconds=10),
    )
    seed = system.seed_candidate()
    alive = await ev.evaluate(seed, WORDS[:2], "val")
    assert alive.scores == [1.0, 1.0]
    process.kill()  # the app crashes
    process.wait(timeout=10)
    dead = await ev.evaluate(seed, WORDS[2:], "val")
    assert dead.scores == [0.0, 0.0]
    for result in dead.results:
        assert result.rollout_status == "failed"
        assert "ConnectError" in (result.error or "")
        assert [a.status for a in recorder.attempts(result.rollout_id or "")] == [
            "failed",
            "failed",
        ]
    assert json.dumps([r.model_dump(mode="json") for r in dead.results])
