"""Start the support agent as a task app, optimize it with `emery train`, export the data.

    python examples/openai_agent/run.py [--algorithm gepa] [--store PATH] [--budget N]

Runs on the embedded local model (no network, no API key). The agent's OpenAI calls reach
the model through emery's LM proxy, which records them as spans of each rollout.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
PORT = 8510


def start_task_app(port: int, key: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, EMERY_TASK_APP_KEY=key)
    command = [
        sys.executable, "-m", "emery", "taskapp", "serve", "support_agent:classify",
        "--component", "SYSTEM_PROMPT", "--port", str(port), "--app-dir", str(HERE),
    ]  # fmt: skip
    app = subprocess.Popen(command, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", headers={"X-API-Key": key}).is_success:
                return app
        except httpx.TransportError:
            time.sleep(0.2)
    app.kill()
    raise SystemExit("the task app did not start")


def job_config(args: argparse.Namespace, port: int) -> Path:
    """job.toml with the command line's overrides, written next to a scratch store."""
    data = tomllib.loads((HERE / "job.toml").read_text())
    data["job"]["algorithm"] = args.algorithm
    if args.budget is not None:
        data["job"]["budget"]["metric_calls"] = args.budget
    if args.model is not None:
        data["lm"]["task"]["model"] = args.model
        data["lm"]["reflection"]["model"] = args.model
    for split in ("n_train", "n_val", "n_test"):
        if getattr(args, split) is not None:
            data["dataset"][split] = getattr(args, split)
    data["system"]["base_url"] = f"http://127.0.0.1:{port}"
    out = Path(tempfile.mkdtemp(prefix="emery-openai-agent-")) / "job.toml"
    out.write_text(_toml(data))
    return out


def _toml(data: dict[str, object], prefix: str = "") -> str:
    scalars, tables = [], []
    for key, value in data.items():
        if isinstance(value, dict):
            tables.append(_toml(value, f"{prefix}{key}."))
        else:
            scalars.append(f"{key} = {_value(value)}")
    head = f"[{prefix[:-1]}]\n" if prefix and scalars else ""
    return head + "".join(line + "\n" for line in scalars) + "\n" + "".join(tables)


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", default="gepa")
    parser.add_argument("--budget", type=int, default=None, help="metric calls")
    parser.add_argument("--model", default=None, help="task and reflection model")
    parser.add_argument("--n-train", dest="n_train", type=int, default=None)
    parser.add_argument("--n-val", dest="n_val", type=int, default=None)
    parser.add_argument("--n-test", dest="n_test", type=int, default=None)
    parser.add_argument("--store", default=None, help="store (default: a scratch file)")
    parser.add_argument("--port", type=int, default=PORT)
    args = parser.parse_args()

    key = os.environ.get("EMERY_TASK_APP_KEY") or os.urandom(12).hex()
    config = job_config(args, args.port)
    store = args.store or str(config.parent / "emery.db")
    app = start_task_app(args.port, key)
    try:
        env = dict(os.environ, EMERY_TASK_APP_KEY=key)
        train = [sys.executable, "-m", "emery", "train", str(config), "--store", store]
        code = subprocess.call(train, env=env)
        if code == 0:
            data = config.parent / "support-agent.jsonl"
            subprocess.call(
                [sys.executable, "-m", "emery", "export", "support-agent-gepa",
                 "--candidate", "best", "--min-score", "1", "--store", store, "-o", str(data)],
            )  # fmt: skip
            print(f"store: {store}\nfine-tuning data: {data}")
        raise SystemExit(code)
    finally:
        app.send_signal(signal.SIGINT)
        app.wait(timeout=10)


if __name__ == "__main__":
    main()
