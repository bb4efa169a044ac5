"""DSPy 3.4.1: ``dspy.Evaluate`` with ``num_threads`` on a one-field ``Predict`` program.

Runs in the benchmark's own venv (.bench-venvs/dspy); prints one JSON line. DSPy's cache
is off so every example is a real call, as on the other sides.
"""

from __future__ import annotations

import argparse
import json
import time

import dspy


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--rollouts", type=int, required=True)
    args = parser.parse_args()
    lm = dspy.LM("openai/mock", api_base=args.url, api_key="not-needed", cache=False)
    dspy.configure(lm=lm)
    program = dspy.Predict("question -> answer")
    devset = [
        dspy.Example(question=f"What is {i} + 42 - {i}?", answer="42").with_inputs("question")
        for i in range(args.rollouts)
    ]

    def metric(example: dspy.Example, prediction: dspy.Prediction, trace: object = None) -> float:
        return float(example.answer in str(prediction.answer))

    evaluate = dspy.Evaluate(
        devset=devset, metric=metric, num_threads=args.concurrency, display_progress=False
    )
    wall, cpu = time.perf_counter(), time.process_time()
    result = evaluate(program)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        json.dumps(
            {
                "side": "dspy",
                "rollouts": len(devset),
                "wall_s": wall,
                "cpu_s": cpu,
                "score": float(result.score) / 100.0,
            }
        )
    )


if __name__ == "__main__":
    main()
