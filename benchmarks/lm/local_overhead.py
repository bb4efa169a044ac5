"""LocalLM against llama-cpp-python called directly, and the gain from prefix reuse.

Usage: python benchmarks/lm/local_overhead.py [--model local/qwen2.5-coder-0.5b] [--repeats 3]

1. Wrapper overhead: the same chat prompt decoded greedily by ``llama_cpp.Llama`` and by
   ``LocalLM`` (KV cache reset before every call on both sides), completion tokens/s.
2. Prefix reuse: 20 word problems under one long instruction, scored through ``LocalLM``
   with ``prefix_reuse`` on and off; wall time and speedup.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from emery.core.models import ChatMessage
from emery.data.tasks import builtin_task
from emery.lm.config import local_model_path
from emery.lm.local import LocalLM

PROMPT: list[ChatMessage] = [
    {"role": "system", "content": "You are a careful assistant. Explain step by step."},
    {"role": "user", "content": "Describe how a bicycle gear system works, in detail."},
]

INSTRUCTION = (
    "You solve arithmetic word problems. Read the problem carefully, identify every quantity, "
    "decide which operations connect them, and compute the result. Keep the reasoning short: "
    "one line per step. Whole numbers only. Never change the numbers given in the problem. "
    "When a problem mentions items in containers, multiply the number of containers by the "
    "items in each. When something is given away or spent, subtract it. When items are "
    "shared equally, divide. Finish with a final line of the form 'Answer: <number>'.\n\n"
    "Example: Ava has 3 bags with 4 shells in each and gives 2 shells away. How many shells "
    "does Ava have left?\n3 bags x 4 shells = 12 shells. 12 - 2 = 10.\nAnswer: 10\n\n"
    "Example: Ben earns 7 dollars per hour and works 5 hours, then spends 9 dollars. How many "
    "dollars are left?\n7 x 5 = 35. 35 - 9 = 26.\nAnswer: 26"
)


async def decode_speeds(
    path: str, lm: LocalLM, max_tokens: int, repeats: int
) -> tuple[float, float]:
    """Completion tok/s of llama-cpp-python direct and of ``lm``, calls alternating."""
    import llama_cpp

    llama = llama_cpp.Llama(model_path=path, n_ctx=4096, n_threads=lm.n_threads, verbose=False)
    await lm.complete(PROMPT, max_tokens=1)  # load outside the timing
    totals = {"direct": [0, 0.0], "wrapper": [0, 0.0]}
    for _ in range(repeats):
        llama.reset()
        start = time.perf_counter()
        out = llama.create_chat_completion(messages=PROMPT, max_tokens=max_tokens, temperature=0.0)
        totals["direct"][0] += out["usage"]["completion_tokens"]
        totals["direct"][1] += time.perf_counter() - start
        start = time.perf_counter()
        completion = await lm.complete(PROMPT, max_tokens=max_tokens, temperature=0.0)
        totals["wrapper"][0] += completion.usage.completion_tokens
        totals["wrapper"][1] += time.perf_counter() - start
    return (
        totals["direct"][0] / totals["direct"][1],
        totals["wrapper"][0] / totals["wrapper"][1],
    )


async def score_shared_instruction(lm: LocalLM, questions: list[str]) -> float:
    start = time.perf_counter()
    await asyncio.gather(
        *(
            lm.complete(
                [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": q}],
                max_tokens=8,
                temperature=0.0,
            )
            for q in questions
        )
    )
    return time.perf_counter() - start


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    threads = os.cpu_count() or 1
    path = str(local_model_path(args.model.removeprefix("local/")))

    no_reuse = LocalLM(path, n_threads=threads, prefix_reuse=False)
    direct, wrapped = await decode_speeds(path, no_reuse, args.max_tokens, args.repeats)

    questions = [
        e.input["question"] for e in builtin_task("word_problems").dataset(seed=7).test[:20]
    ]
    await score_shared_instruction(no_reuse, questions[:1])  # load the model outside the timing
    without = await score_shared_instruction(no_reuse, questions)
    reuse = LocalLM(path, n_threads=threads, prefix_reuse=True)
    await score_shared_instruction(reuse, questions[:1])
    with_reuse = await score_shared_instruction(reuse, questions)

    print(f"model {args.model}, {threads} threads")
    print("| measure | value |")
    print("| --- | --- |")
    print(f"| llama-cpp-python direct, completion tok/s | {direct:.1f} |")
    print(f"| LocalLM, completion tok/s | {wrapped:.1f} |")
    print(f"| LocalLM / direct | {wrapped / direct:.3f} |")
    print(f"| 20 examples, shared instruction, no prefix reuse | {without:.2f} s |")
    print(f"| 20 examples, shared instruction, prefix reuse | {with_reuse:.2f} s |")
    print(f"| prefix reuse speedup | {without / with_reuse:.2f}x |")


if __name__ == "__main__":
    asyncio.run(main())
