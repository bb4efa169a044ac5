"""Serve the LangGraph triage agent as a task app and optimize it with `emery train`.

    python examples/langgraph_agent/run.py [--model local/smollm2-135m] [--budget 40]

Runs on the embedded local model (no network, no API key). The agent's langchain-openai
calls reach the model through emery's LM proxy, which records them as spans of each rollout.
Any other argument is passed to `emery train` (e.g. `--set job.algorithm="apo"`).
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

HERE = Path(__file__).resolve().parent


def start_task_app(port: int, key: str) -> subprocess.Popen[bytes]:
    """`emery taskapp serve triage:triage` on ``port``, once its /health answers."""
    command = [
        sys.executable, "-m", "emery", "taskapp", "serve", "triage:triage",
        "--component", "CLASSIFY_PROMPT", "--port", str(port), "--app-dir", str(HERE),
    ]  # fmt: skip
    app = subprocess.Popen(command, env=dict(os.environ, EMERY_TASK_APP_KEY=key))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and app.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).is_success:
                return app
        except httpx.TransportError:
            time.sleep(0.2)
    app.kill()
    raise SystemExit("error: the task app did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="task and reflection model (default: job.toml's)")
    parser.add_argument("--budget", type=int, help="metric calls (default: job.toml's)")
    parser.add_argument("--port", type=int, default=8511)
    parser.add_argument("--store", help="store (default: emery's)")
    args, train_args = parser.parse_known_args()

    key = os.environ.get("EMERY_TASK_APP_KEY") or os.urandom(12).hex()
    command = [
        sys.executable, "-m", "emery", "train", str(HERE / "job.toml"),
        "--set", f'system.base_url="http://127.0.0.1:{args.port}"',
    ]  # fmt: skip
    if args.model:
        command += ["--model", args.model, "--set", f'lm.reflection.model="{args.model}"']
    if args.budget:
        command += ["--set", f"job.budget.metric_calls={args.budget}"]
    if args.store:
        command += ["--store", args.store]
    app = start_task_app(args.port, key)
    try:
        code = subprocess.call(command + train_args, env=dict(os.environ, EMERY_TASK_APP_KEY=key))
    finally:
        app.send_signal(signal.SIGINT)
        app.wait(timeout=10)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
