"""Batched decoding of concurrent requests against the single-sequence path, side by side.

Usage: python benchmarks/lm/batching.py [--models local/smollm2-135m,local/qwen2.5-coder-0.5b]
       [--requests 8] [--levels 1,2,4,8] [--max-tokens 256] [--warmup 4]

``--requests 100 --levels 4`` is the time of a 100-example evaluation, one at a time
against batched.

Prompts are those of a real job: SVAMP problems (``../shared/datasets/svamp.jsonl``) under
the seed instruction of ``quality/real/svamp.toml`` with 2 worked demos, greedy. Per model,
in one run:

- single: ``LocalLM(n_parallel=1)``, one request after another, its cache kept between
  calls (as fast as ``llama_cpp.Llama.create_chat_completion``, what ``LocalLM`` did before
  batching: 27.4 against 26.2 tokens/s on Qwen2.5-0.5B here);
- batched at concurrency C: the same requests sent at once to ``LocalLM(n_parallel=C)``.

The two run back to back for each C (the machine's load drifts), each after a warm-up pass
over ``--warmup`` other problems under the same instruction and demos: on the project's
machine a newly loaded model ran up to 100x slower for its first minutes (probably the
kernel's DAMON `pageout` scheme, which is on there, dropping the mapped weights). The
warm-up problems are not the measured ones, so no slot starts a measured request with its
whole prompt already read; the shared instruction and demos are, as in a job. Each row
prints both wall times and aggregate completion tokens/s, the speedup, and how many replies
are identical to single's (all of them, when greedy batching holds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from dataclasses import replace
from pathlib import Path

from emery.core.models import ChatMessage, Demo
from emery.lm.config import local_model_path
from emery.lm.local import LocalLM
from emery.systems.prompt_layout import StageLayout, arrange

Side = tuple[list[str], int, float]  # replies, completion tokens, wall seconds
DATA = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "svamp.jsonl"
INSTRUCTION = "Solve the problem step by step. End with 'Answer: <number>'."


def job_prompts(n: int, skip: int = 0) -> list[list[ChatMessage]]:
    """``n`` SVAMP questions (after ``skip`` others) under the seed instruction with 2
    worked demos."""
    rows = [json.loads(line) for line in DATA.read_text().splitlines()]
    demos: list[tuple[list[ChatMessage], Demo]] = [
        (
            [{"role": "user", "content": row["input"]["question"]}],
            Demo(inputs=row["input"], output=_worked(row)),
        )
        for row in rows[:2]
    ]
    return [
        arrange(StageLayout(), INSTRUCTION, demos, [{"role": "user", "content": q}])
        for q in (row["input"]["question"] for row in rows[2 + skip : 2 + skip + n])
    ]


def _worked(row: dict[str, object]) -> str:
    meta = row["meta"]
    assert isinstance(meta, dict)
    return (
        f"The question asks for {meta['type'].lower()}. The numbers combine as "
        f"{meta['equation']}.\nWorking it out step by step gives {row['expected']}.\n"
        f"Answer: {row['expected']}"
    )


async def single(lm: LocalLM, prompts: list[list[ChatMessage]], max_tokens: int) -> Side:
    """One request after another (``lm`` has one slot)."""
    start, texts, tokens = time.perf_counter(), [], 0
    for messages in prompts:
        out = await lm.complete(messages, max_tokens=max_tokens)
        texts.append(out.text)
        tokens += out.usage.completion_tokens
    return texts, tokens, time.perf_counter() - start


async def batched(lm: LocalLM, prompts: list[list[ChatMessage]], max_tokens: int) -> Side:
    start = time.perf_counter()
    outs = await asyncio.gather(*(lm.complete(m, max_tokens=max_tokens) for m in prompts))
    elapsed = time.perf_counter() - start
    return [o.text for o in outs], sum(o.usage.completion_tokens for o in outs), elapsed


async def run_model(
    model: str, requests: int, levels: list[int], max_tokens: int, warmup: int
) -> None:
    """Per level: the single path, then the batcher, on the same requests."""
    path = str(local_model_path(model.removeprefix("local/")))
    prompts, warm = job_prompts(requests), job_prompts(warmup, skip=requests)
    alone_lm = LocalLM(path, n_ctx=4096, n_parallel=1)
    await single(alone_lm, warm, max_tokens)  # warm up: a new model runs slowly at first here
    print(f"\n{model}: {requests} requests, max_tokens {max_tokens}")
    print("| C | single s | single tok/s | batched s | batched tok/s | ratio | identical | notes |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for level in levels:
        lm = LocalLM(path, n_ctx=4096, n_parallel=level)
        await batched(lm, warm, max_tokens)  # warm up
        reference, tokens, alone = await single(alone_lm, prompts, max_tokens)
        before = replace(lm.batcher.stats)
        texts, batch_tokens, together = await batched(lm, prompts, max_tokens)
        stats = lm.batcher.stats
        lm.batcher.close()
        mean = (stats.step_tokens - before.step_tokens) / max(stats.steps - before.steps, 1)
        same = sum(a == b for a, b in zip(texts, reference, strict=True))
        print(
            f"| {level} | {alone:.1f} | {tokens / alone:.1f} | {together:.1f} "
            f"| {batch_tokens / together:.1f} | {alone / together:.2f} | {same}/{requests} "
            f"| mean batch {mean:.2f}; load {os.getloadavg()[0]:.1f} |",
            flush=True,
        )
    alone_lm.batcher.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="local/smollm2-135m,local/qwen2.5-coder-0.5b")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--levels", default="1,2,4,8")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=4, help="warm-up requests (other problems)")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    for model in args.models.split(","):
        asyncio.run(run_model(model, args.requests, levels, args.max_tokens, args.warmup))


if __name__ == "__main__":
    main()
