"""What recording rollouts costs: the same function-agent evaluation with spans kept
nowhere, in memory, and in a SQLite store, side by side in one run.

    .venv/bin/python benchmarks/tracing/overhead.py [N_ROLLOUTS]

Each rollout makes three LM calls to an instant FakeLM and emits a reward (5 spans, 8
rollout/attempt status writes), 32 at a time, so the figures are pure tracing overhead.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from emery.core.models import Example
from emery.evaluation import Evaluator
from emery.lm import FakeLM
from emery.store import SQLiteStore
from emery.systems.function_agent import FunctionAgent, agent
from emery.tracing import MemoryRecorder, NullRecorder, RolloutRecorder, emit_reward
from emery.tracing.store_recorder import StoreRecorder
from emery.verifiers import ExactMatch


@agent
async def three_calls(task: dict[str, Any], lm: Any) -> str:
    reply = ""
    for step in range(3):
        reply = await lm.acall(f"{task['word']} {step}")
    emit_reward(1.0)
    return reply


async def seconds(recorder: RolloutRecorder, examples: list[Example]) -> float:
    system = FunctionAgent(three_calls, instrument_openai=False)
    lm = FakeLM(lambda messages: messages[-1]["content"])
    ev = Evaluator(system, ExactMatch(), lm, recorder=recorder, concurrency=32)
    start = time.perf_counter()
    await ev.evaluate(system.seed_candidate(), examples)
    return time.perf_counter() - start


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    examples = [Example(id=f"e{i}", input={"word": f"w{i}"}) for i in range(n)]
    scratch = Path(tempfile.mkdtemp(prefix="emery-tracing-bench-"))
    store = SQLiteStore(scratch / "emery.db")
    runs: list[tuple[str, RolloutRecorder]] = [
        ("none", NullRecorder()),
        ("memory", MemoryRecorder()),
        ("sqlite", StoreRecorder(store)),
    ]
    results = [(name, asyncio.run(seconds(recorder, examples))) for name, recorder in runs]
    store.close()
    base = results[0][1]
    print(f"{n} rollouts, 5 spans each, concurrency 32")
    print(f"{'recorder':10s} {'seconds':>8s} {'rollouts/s':>11s} {'x none':>7s}")
    for name, took in results:
        print(f"{name:10s} {took:8.2f} {n / took:11.0f} {took / base:7.2f}")


if __name__ == "__main__":
    main()
