"""Serve a task-app example's agent and optimize it with `emery train`: what each task-app
example's `run.py` does (`langgraph_agent`, `openai_agent`, `openai_agents_sdk`).

    python examples/<example>/run.py [--model M] [--budget N] [--port P] [any emery train option]

1. `emery taskapp serve MODULE:FUNCTION --component NAME` hosts the agent on 127.0.0.1 with
   a fresh API key, once its /health answers;
2. `emery train <example>/job.toml --set system.base_url=...` runs the job in emery's store
   (`$EMERY_STORE` or ./.emery/emery.db, or `--store`): Ctrl-C pauses it, and the same
   command again resumes it;
3. the task app is stopped.

Options it does not know (`--set KEY=VALUE`, `--store`, `--new`, ...) go to `emery train`.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx


def start_task_app(
    folder: Path, agent: str, component: str, port: int, key: str
) -> subprocess.Popen[bytes]:
    """`emery taskapp serve` of ``agent`` in ``folder`` on ``port``, once /health answers."""
    command = [
        sys.executable, "-m", "emery", "taskapp", "serve", agent,
        "--component", component, "--port", str(port), "--app-dir", str(folder),
    ]  # fmt: skip
    env = dict(os.environ, EMERY_TASK_APP_KEY=key)
    env.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")  # the Agents SDK's export to OpenAI
    app = subprocess.Popen(command, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and app.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).is_success:
                return app
        except httpx.TransportError:
            time.sleep(0.2)
    app.kill()
    raise SystemExit("error: the task app did not start")


def train(command: list[str], env: dict[str, str]) -> int:
    """Run ``emery train`` to its end; a Ctrl-C reaches it too (same process group) and
    pauses the job, and this waits for that instead of killing it."""
    job = subprocess.Popen(command, env=env)
    while True:
        try:
            return job.wait()
        except KeyboardInterrupt:
            continue


def main(folder: Path, agent: str, component: str, port: int) -> None:
    """Serve ``agent`` (``module:function`` in ``folder``), whose prompt is the module-level
    string ``component``, and train ``folder/job.toml`` against it; exits with train's code."""
    parser = argparse.ArgumentParser(description=f"Optimize {agent} through the LM proxy.")
    parser.add_argument("--model", help="task and reflection model (default: job.toml's)")
    parser.add_argument("--budget", type=int, help="metric calls (default: job.toml's)")
    parser.add_argument("--port", type=int, default=port, help="the task app's port")
    args, train_args = parser.parse_known_args()

    command = [
        sys.executable, "-m", "emery", "train", str(folder / "job.toml"),
        "--set", f'system.base_url="http://127.0.0.1:{args.port}"',
    ]  # fmt: skip
    if args.model:
        command += ["--model", args.model, "--set", f'lm.reflection.model="{args.model}"']
    if args.budget:
        command += ["--set", f"job.budget.metric_calls={args.budget}"]
    key = os.environ.get("EMERY_TASK_APP_KEY") or os.urandom(12).hex()
    app = start_task_app(folder, agent, component, args.port, key)
    try:
        code = train(command + train_args, dict(os.environ, EMERY_TASK_APP_KEY=key))
    finally:
        if app.poll() is None:
            app.send_signal(signal.SIGINT)
        app.wait(timeout=10)
    raise SystemExit(code)
