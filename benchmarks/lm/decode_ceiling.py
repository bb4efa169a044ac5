"""How much a batch of sequences can gain on this machine: one ``llama_decode`` step of k
sequences (one token each) against k steps of one sequence, side by side.

Usage: python benchmarks/lm/decode_ceiling.py [--model local/qwen2.5-coder-0.5b]
       [--levels 1,2,4,8] [--steps 16] [--rounds 4]

Whatever the scheduler, batched decoding cannot make more tokens per second than one
``llama_decode`` of k tokens allows; this measures that limit, with the engine's own
decoder (``emery.lm.llama_decoder``). Every slot first reads the same SVAMP prompt of a
real job (the seed instruction and 2 worked demos, as ``batching.py`` builds it), then the
levels take turns, ``--steps`` steps each per round, so a drift in the machine's load
falls on all of them alike. Also printed: prompt reading in tokens/s (one ``llama_decode``
of up to 512 prompt tokens), the rate a batch of many tokens reaches here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from batching import job_prompts

from emery.lm.config import local_model_path
from emery.lm.llama_decoder import LlamaDecoder


def step_times(
    decoder: LlamaDecoder, levels: list[int], steps: int, rounds: int, prompt: list[int]
) -> dict[int, list[float]]:
    """Seconds per decode step of each level, over ``rounds`` interleaved rounds."""
    for slot in range(max(levels)):
        decoder.keep(slot, slot, 0)
    next_token = {slot: decoder.prefill(slot, prompt, 0) for slot in range(max(levels))}
    position = dict.fromkeys(next_token, len(prompt))
    times: dict[int, list[float]] = {level: [] for level in levels}
    for _ in range(rounds):
        for level in levels:
            for _ in range(steps):
                entries = [(slot, next_token[slot], position[slot]) for slot in range(level)]
                start = time.perf_counter()
                sampled = decoder.step(entries)
                times[level].append(time.perf_counter() - start)
                for slot, token in zip(range(level), sampled, strict=True):
                    next_token[slot], position[slot] = token, position[slot] + 1
    return times


def prompt_rate(decoder: LlamaDecoder, prompt: list[int], repeats: int = 3) -> float:
    """Prompt tokens read per second (the median of ``repeats`` readings into slot 0)."""
    rates = []
    for _ in range(repeats):
        decoder.keep(0, 0, 0)
        start = time.perf_counter()
        decoder.prefill(0, prompt, 0)
        rates.append(len(prompt) / (time.perf_counter() - start))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b")
    parser.add_argument("--levels", default="1,2,4,8")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    path = local_model_path(args.model.removeprefix("local/"))
    slots, threads = max(levels), os.cpu_count() or 1
    budget = len(levels) * args.steps * args.rounds
    decoder = LlamaDecoder(path, slots=slots, n_ctx=1024 + budget, n_threads=threads, seed=0)
    try:
        prompt = decoder.prepare(job_prompts(1)[0], {"temperature": 0.0, "max_tokens": 1})
        for slot in range(slots):
            decoder.begin(slot, prompt.sampling)
        decoder.prefill(0, prompt.tokens, 0)  # warm up
        reading = prompt_rate(decoder, prompt.tokens)
        times = step_times(decoder, levels, args.steps, args.rounds, prompt.tokens)
    finally:
        decoder.close()
    one = statistics.median(times[levels[0]]) / levels[0]
    print(f"{args.model}: prompt of {len(prompt.tokens)} tokens, {threads} threads")
    print(f"prompt reading: {reading:.1f} tok/s ({reading * one:.2f}x one-sequence decoding)")
    print("| k | ms per step | tok/s | x one sequence |")
    print("| --- | --- | --- | --- |")
    for level in levels:
        step = statistics.median(times[level])
        print(f"| {level} | {step * 1000:.1f} | {level / step:.1f} | {one * level / step:.2f} |")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
