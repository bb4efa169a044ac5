"""One throughput measurement of emery: an eval job of N rollouts at concurrency C.

Run by ``run.py`` in a fresh process; prints one JSON line. The job is a real one: the
SQLite store on, the response cache on (every prompt is new, so every call is a miss and
a cache write), rollouts with attempts and spans recorded, results committed. The clock
covers creating the job, running it and reading its result; the modules it needs are
imported and the store file opened before it starts, as the peers import theirs and make
their clients before theirs.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import emery
import emery.jobs.engine
import emery.lm.openai_compat
import emery.sdk.job
import emery.store.backends
from emery.core.models import Dataset, Example
from emery.systems.parsers import ParserConfig
from emery.systems.prompt_program import (
    MessageTemplate,
    PromptProgram,
    PromptProgramConfig,
    StageConfig,
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--rollouts", type=int, required=True)
    args = parser.parse_args()
    program = PromptProgram(
        PromptProgramConfig(
            name="throughput",
            stages=[
                StageConfig(
                    name="solve",
                    instruction="Solve the problem. End with 'Answer: <number>'.",
                    messages=[MessageTemplate(template="{question}")],
                    parser=ParserConfig(kind="regex", pattern=r"Answer:\s*(-?\d+)"),
                )
            ],
        )
    )
    examples = [
        Example(id=f"q{i}", input={"question": f"What is {i} + 42 - {i}?"}, expected=42)
        for i in range(args.rollouts)
    ]
    dataset = Dataset(name="throughput", val=examples)  # no test split: no extra round
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        # Opened before the clock, as the peers make their LM clients before theirs.
        store = emery.open_store(str(work / "emery.db"))
        wall, cpu = time.perf_counter(), time.process_time()
        result = emery.optimize(
            program,
            dataset,
            algorithm="baseline",
            lm={
                "model": "openai/mock",
                "base_url": args.url,
                "api_key": "not-needed",
                "concurrency": args.concurrency,
                "max_attempts": 1,
            },
            verifier="numeric",
            runtime={"concurrency": args.concurrency, "workdir": str(work / "work")},
            store=store,
        )
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        stored = store.count_evaluations(result.job_id)
    print(
        json.dumps(
            {
                "side": "emery",
                "rollouts": stored,
                "wall_s": wall,
                "cpu_s": cpu,
                "score": result.best_val,
            }
        )
    )


if __name__ == "__main__":
    main()
