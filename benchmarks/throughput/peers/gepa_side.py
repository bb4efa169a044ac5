"""gepa 0.1.4's default adapter evaluating one candidate on N examples (its rollout path).

Runs in the benchmark's own venv (.bench-venvs/gepa); prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import time

# litellm's bundled price table: no attempt to download one (there is no network here).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from gepa.adapters.default_adapter.default_adapter import DefaultAdapter


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--rollouts", type=int, required=True)
    args = parser.parse_args()
    adapter = DefaultAdapter(
        model="openai/mock",
        max_litellm_workers=args.concurrency,
        litellm_batch_completion_kwargs={"api_base": args.url, "api_key": "not-needed"},
    )
    batch = [
        {"input": f"What is {i} + 42 - {i}?", "additional_context": {}, "answer": "42"}
        for i in range(args.rollouts)
    ]
    candidate = {"instruction": "Solve the problem. End with 'Answer: <number>'."}
    wall, cpu = time.perf_counter(), time.process_time()
    result = adapter.evaluate(batch, candidate)  # type: ignore[arg-type]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        json.dumps(
            {
                "side": "gepa",
                "rollouts": len(result.scores),
                "wall_s": wall,
                "cpu_s": cpu,
                "score": sum(result.scores) / len(result.scores),
            }
        )
    )


if __name__ == "__main__":
    main()
