"""Batched greedy decoding gives every prompt its single-sequence reply (issue 50).

Varied prompts (three instructions, none to two demos, questions from the built-in word
problems, intents and extraction tasks, some repeated and some that go on after an earlier
reply) are answered twice by the embedded model: one at a time by a lone sequence that
reads each prompt whole (``n_parallel = 1``, no prefix reuse: the reference), and all at
once by the batcher (``n_parallel = 4``, prefix reuse on, requests joining and leaving
mid-batch). Every reply must be the same text; the script prints how many differ.

    .venv/bin/python benchmarks/reliability/batched_decoding.py --prompts 300 --max-tokens 48
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from typing import Any

from emery.core.models import ChatMessage
from emery.data.tasks import builtin_task
from emery.lm.config import local_model_path
from emery.lm.local import LocalLM

INSTRUCTIONS = (
    "Solve the word problem. Show one line per step, then 'Answer: <number>'.",
    "You are terse. Answer in one line.",
    "Read the text and reply with what it asks for, as JSON.",
)
DEMOS: list[ChatMessage] = [
    {"role": "user", "content": "Ava has 3 bags with 4 shells in each. How many shells?"},
    {"role": "assistant", "content": "3 x 4 = 12.\nAnswer: 12"},
    {"role": "user", "content": "Ben had 35 dollars and spent 9. How many are left?"},
    {"role": "assistant", "content": "35 - 9 = 26.\nAnswer: 26"},
]


def questions(n: int) -> list[str]:
    """``n`` questions from three built-in tasks, each task's first field."""
    found: list[str] = []
    for task in ("word_problems", "intent", "extraction"):
        data = builtin_task(task).dataset(seed=11)
        for example in [*data.train, *data.val, *data.test]:
            found.append(str(next(iter(example.input.values()))))
    random.Random(5).shuffle(found)
    return (found * (n // len(found) + 1))[:n]


def prompts(n: int, seed: int = 0) -> list[list[ChatMessage]]:
    rng = random.Random(seed)
    made: list[list[ChatMessage]] = []
    for question in questions(n):
        demos = DEMOS[: 2 * rng.randrange(3)]
        chat: list[ChatMessage] = [
            {"role": "system", "content": rng.choice(INSTRUCTIONS)},
            *demos,
            {"role": "user", "content": question},
        ]
        if made and rng.random() < 0.1:  # the same prompt again
            chat = made[rng.randrange(len(made))]
        made.append(chat)
    return made


async def answer_all(lm: LocalLM, chats: list[list[ChatMessage]], max_tokens: int) -> list[str]:
    replies = await asyncio.gather(*(lm.complete(c, max_tokens=max_tokens) for c in chats))
    return [r.text for r in replies]


async def answer_one_by_one(
    lm: LocalLM, chats: list[list[ChatMessage]], max_tokens: int
) -> list[str]:
    return [(await lm.complete(c, max_tokens=max_tokens)).text for c in chats]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--prompts", type=int, default=300)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--parallel", type=int, default=4)
    args = parser.parse_args()
    path = str(local_model_path(args.model))
    chats = prompts(args.prompts)
    # follow-ups: a prompt that goes on after an earlier one's reply (found below)
    started = time.perf_counter()
    alone = LocalLM(path, n_ctx=4096, n_parallel=1, prefix_reuse=False)
    reference = asyncio.run(answer_one_by_one(alone, chats, args.max_tokens))
    alone.batcher.close()
    follow_ups = follow_up_chats(chats, reference)
    alone = LocalLM(path, n_ctx=4096, n_parallel=1, prefix_reuse=False)
    reference += asyncio.run(answer_one_by_one(alone, follow_ups, args.max_tokens))
    alone.batcher.close()
    single_s = time.perf_counter() - started
    started = time.perf_counter()
    batched_lm = LocalLM(path, n_ctx=4096 * args.parallel, n_parallel=args.parallel)
    batched = asyncio.run(answer_all(batched_lm, chats + follow_ups, args.max_tokens))
    stats: Any = batched_lm.batcher.stats
    batched_lm.batcher.close()
    batched_s = time.perf_counter() - started
    differ = [i for i, (a, b) in enumerate(zip(reference, batched, strict=True)) if a != b]
    print(
        f"{args.model}: {len(differ)} of {len(reference)} replies differ"
        f" ({len(chats)} prompts + {len(follow_ups)} follow-ups, {args.max_tokens} tokens);"
        f" one at a time {single_s:.0f} s, batched x{args.parallel} {batched_s:.0f} s;"
        f" reused {stats.reused_tokens} of {stats.prompt_tokens} prompt tokens,"
        f" {stats.step_tokens / max(stats.steps, 1):.2f} sequences a step"
    )
    for i in differ[:5]:
        print(f"  #{i}: {reference[i][:60]!r} != {batched[i][:60]!r}")


def follow_up_chats(chats: list[list[ChatMessage]], replies: list[str]) -> list[list[ChatMessage]]:
    """A tenth of the chats again with their reply and a next question."""
    return [
        [*chat, {"role": "assistant", "content": reply}, {"role": "user", "content": "Why?"}]
        for chat, reply in list(zip(chats, replies, strict=True))[::10]
    ]


if __name__ == "__main__":
    main()
