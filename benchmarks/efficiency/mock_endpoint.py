"""A mock OpenAI-compatible endpoint for measuring search efficiency without a model.

``POST /v1/chat/completions`` answers after a fixed latency (``latency_s``), by model name:

- ``mock-task`` answers "What is A + B?" (the last user message). How often it is right
  depends on which instruction phrases the system prompt contains (``accuracy``: a base
  of 0.25, plus each ``HELPFUL`` phrase's weight, minus each harmful ``DECOY``'s). Whether
  it is right on one question is decided by hashes: the question's difficulty (a hash of
  the question) against that accuracy, the answer flipped on 10% of (system prompt,
  question) pairs (a hash of both). So a better prompt solves the easy questions first,
  as a real model's would, and every prompt has some luck of its own; the same request
  always gets the same reply.
- ``mock-proposer`` plays the reflection model: it reads the current instruction (the
  first fenced block of the prompt) and returns it with one phrase it lacks appended,
  picked by a hash of the prompt and the request's seed among all ten phrases (helpful or
  not), so about half the proposals help. With ``prune_share`` (default 0: never) that
  share of its replies, chosen by a hash, drops one of the instruction's phrases instead,
  as a reflection model that shortens a prompt would. MIPRO's requests get the same kind
  of answer (``mipro_reply``): its dataset-summary requests a one-line summary with no
  phrase, its instruction requests one of the instructions tried so far (the prompt's
  history list) with one phrase it lacks appended. GEPA's prompts have neither marker, so
  its replies are as before.

Every reply reports a usage that depends on the request (``usage``), so a cost front has
something to measure: prompt tokens are the messages' characters / 4, and ``mock-task``
bills hidden reasoning tokens besides its reply, set by the system prompt's phrases
(``REASONING``: "Think about the problem." thinks at length for no gain, "Check the sum
twice." pays for its checking, "Be concise." halves the reasoning). The replies' text does
not depend on it.

``--task noisy`` (``NOISY``) makes luck matter, so an acceptance rule that rewards it
shows: smaller helpful weights (0.05 to 0.15), milder harmful decoys (-0.04 to -0.08), two
local decoys ("Be concise.", "Think about the problem.") that help on a quarter of the
questions (+0.25) and hurt on the rest (-0.15: -0.05 on average), so on a lucky minibatch
they look better, and 15% of (prompt, question) pairs flipped. ``DEFAULT`` is the task as
before.

No state, no model. ``sums`` is a dataset of such questions.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import hashlib
import json
import random
import re
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response

from emery.core.models import Dataset, Example

HELPFUL = {
    "Add the two numbers.": 0.20,
    "Check the sum twice.": 0.15,
    "Reply with the number only.": 0.12,
    "Carry the tens carefully.": 0.10,
    "Write digits without units.": 0.08,
}
DECOY = {
    "Be concise.": 0.0,
    "Think about the problem.": 0.0,
    "Use a friendly tone.": -0.05,
    "Mention your confidence.": -0.08,
    "Restate the question first.": -0.10,
}
PHRASES = {**HELPFUL, **DECOY}
BASE_REASONING = 40
REASONING = {
    "Think about the problem.": 160,
    "Check the sum twice.": 40,
    "Restate the question first.": 20,
    "Mention your confidence.": 10,
}
"""Hidden reasoning tokens ``mock-task`` bills per reply for each phrase of its system
prompt, beside ``BASE_REASONING``; "Be concise." halves the sum."""
BASE = 0.25
FLIP = 0.10
_FENCED = re.compile(r"```[a-z]*\n?(.*?)```", re.DOTALL)
_NUMBERS = re.compile(r"-?\d+")
MIPRO_SUMMARY = "You study datasets"
"""How MIPRO's summary requests' system message starts (``mipro/grounding.py``)."""
MIPRO_HISTORY = "Instructions tried so far for this stage:\n"
"""The header of MIPRO's proposer history (``mipro/proposer.py``), one ``- 'text' (note)``
line per instruction tried."""
_TRIED = re.compile(r"^- ((['\"]).*\2) \((?:validation score [\d.]+|not scored yet)\)$", re.M)


def accuracy(instruction: str) -> float:
    """The chance that ``mock-task`` answers a question right under ``instruction``."""
    return DEFAULT.accuracy(instruction)


@dataclass(frozen=True)
class Task:
    """What ``mock-task``'s accuracy depends on: each phrase's weight on every question,
    the local decoys (phrase → share of questions, gain there, loss on the others; which
    questions by a hash of both) and the share of (prompt, question) pairs flipped."""

    weights: dict[str, float]
    local: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    flip: float = FLIP

    def accuracy(self, instruction: str, question: str | None = None) -> float:
        """The chance of a right answer under ``instruction`` (on ``question``: with the
        local decoys' gain or loss there; without one, their mean)."""
        gain = sum(weight for phrase, weight in self.weights.items() if phrase in instruction)
        for phrase, (share, inside, outside) in self.local.items():
            if phrase in instruction:
                if question is None:
                    gain += share * inside - (1 - share) * outside
                else:
                    gain += inside if unit(phrase, question) < share else -outside
        return min(0.95, max(0.05, BASE + gain))


def unit(*parts: str) -> float:
    """A number in [0, 1) from a hash of ``parts``."""
    digest = hashlib.sha256("\x00".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def difficulty(question: str) -> float:
    """How hard a question is: the prompt's accuracy must exceed it (before the flips)."""
    return unit(question)


def tokens(text: str) -> int:
    """Tokens of ``text`` as the mock counts them: one per four characters, at least one."""
    return max(1, -(-len(text) // 4))


def usage(model: str | None, messages: list[dict[str, Any]], text: str) -> dict[str, int]:
    """The reply's usage: prompt tokens of every message, completion tokens of the reply
    plus, for ``mock-task``, the reasoning its system prompt asks for (``REASONING``)."""
    prompt = sum(tokens(str(m["content"])) for m in messages)
    completion = tokens(text)
    if model != "mock-proposer":
        system = "\n".join(str(m["content"]) for m in messages[:-1])
        reasoning = BASE_REASONING + sum(
            cost for phrase, cost in REASONING.items() if phrase in system
        )
        completion += reasoning // 2 if "Be concise." in system else reasoning
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


DEFAULT = Task(PHRASES)
NOISY = Task(
    {
        "Add the two numbers.": 0.15,
        "Check the sum twice.": 0.12,
        "Reply with the number only.": 0.10,
        "Carry the tens carefully.": 0.08,
        "Write digits without units.": 0.05,
        "Use a friendly tone.": -0.04,
        "Mention your confidence.": -0.06,
        "Restate the question first.": -0.08,
    },
    local={
        "Be concise.": (0.25, 0.25, 0.15),
        "Think about the problem.": (0.25, 0.25, 0.15),
    },
    flip=0.15,
)
TASKS = {"default": DEFAULT, "noisy": NOISY}
"""The mock's tasks by ``--task`` name (module doc)."""


def task_reply(messages: list[dict[str, Any]], task: Task = DEFAULT) -> str:
    question = str(messages[-1]["content"])
    system = "\n".join(str(m["content"]) for m in messages[:-1])
    numbers = [int(n) for n in _NUMBERS.findall(question)]
    right = sum(numbers[-2:])
    solved = difficulty(question) < task.accuracy(system, question)
    if unit(system, question) < task.flip:
        solved = not solved
    answer = right if solved else right + 1
    return f"Adding them up.\nAnswer: {answer}"


def mipro_reply(prompt: str, seed: Any) -> str | None:
    """MIPRO's summary and instruction requests answered (module doc); None for others."""
    if prompt.startswith(MIPRO_SUMMARY):
        return "The questions ask for the sum of two two-digit numbers."
    if MIPRO_HISTORY not in prompt:
        return None
    history = prompt.split(MIPRO_HISTORY, 1)[1]
    tried = [str(ast.literal_eval(quoted)) for quoted, _ in _TRIED.findall(history)]
    current = tried[int(unit(prompt, str(seed), "base") * len(tried))] if tried else ""
    missing = [phrase for phrase in PHRASES if phrase not in current]
    if not missing:
        return f"```\n{current}\n```"
    phrase = missing[int(unit(prompt, str(seed)) * len(missing))]
    return f"```\n{current} {phrase}\n```"


def proposer_reply(messages: list[dict[str, Any]], seed: Any, prune_share: float = 0.0) -> str:
    prompt = "\n".join(str(m["content"]) for m in messages)
    mipro = mipro_reply(prompt, seed)
    if mipro is not None:
        return mipro
    fenced = _FENCED.findall(prompt)
    current = fenced[0].strip() if fenced else ""
    present = [phrase for phrase in PHRASES if phrase in current]
    if present and unit(prompt, str(seed), "prune") < prune_share:
        dropped = present[int(unit(prompt, str(seed), "drop") * len(present))]
        return f"```\n{' '.join(current.replace(dropped, '').split())}\n```"
    missing = [phrase for phrase in PHRASES if phrase not in current]
    if not missing:
        return f"```\n{current}\n```"
    phrase = missing[int(unit(prompt, str(seed)) * len(missing))]
    return f"```\n{current} {phrase}\n```"


LogEntry = tuple[str, float, float, str]
"""One request in the mock's log: its model, when it arrived and was answered
(``time.monotonic`` seconds), and the client's ``host:port`` (one per connection)."""


def waves(log: list[LogEntry], started: float, ended: float) -> dict[str, Any]:
    """Where a run's wall time went, from the requests it sent between ``started`` and
    ``ended``: ``waves`` are the stretches with a request in flight (requests that overlap
    belong to one wave, so a batch whose lanes refill without a gap is one wave of several
    latencies; ``proposer_waves`` those with a proposer request), ``busy_s`` their total
    length (divided by the latency: the round trips the search waited on, one after the
    other), ``idle_s`` the rest of the wall time, with no request in flight (the search's
    own work between round trips, and the client's and the server's handling of each
    request, which the machine's load stretches). ``connections`` counts the client
    connections the run's requests came on, ``connects`` those of them no earlier request
    had used (a client that keeps its connections alive opens about as many as it has
    requests in flight at once, once)."""
    spans = sorted((a, b, m) for m, a, b, _ in log if started <= a <= ended)
    before = {client for _, a, _, client in log if a < started}
    clients = {client for _, a, _, client in log if started <= a <= ended}
    sizes: list[int] = []
    proposer, busy, end, has_proposer = 0, 0.0, float("-inf"), False
    for arrived, answered, model in spans:
        if arrived > end:  # a new wave
            proposer += has_proposer
            sizes.append(0)
            has_proposer = False
            busy += answered - arrived
            end = answered
        elif answered > end:
            busy += answered - end
            end = answered
        sizes[-1] += 1
        has_proposer = has_proposer or model == "mock-proposer"
    proposer += has_proposer
    return {
        "requests": len(spans),
        "waves": len(sizes),
        "proposer_waves": proposer,
        "busy_s": busy,
        "idle_s": (ended - started) - busy,
        "wave_sizes": dict(sorted(Counter(sizes).items())),
        "connections": len(clients),
        "connects": len(clients - before),
    }


def sums(n_train: int = 60, n_val: int = 30, n_test: int = 200) -> Dataset:
    """'What is A + B?' questions, the same every run. Each split's questions are spread
    evenly over the mock's difficulty (one in each of n equal slices), so a prompt's
    accuracy is about the same on every split and a split is not luckily easy."""
    rng = random.Random(7)
    seen: set[str] = set()

    def split(name: str, n: int) -> list[Example]:
        examples = []
        for i in range(n):
            while True:
                a, b = rng.randrange(10, 99), rng.randrange(10, 99)
                question = f"What is {a} + {b}?"
                if question not in seen and i / n <= difficulty(question) < (i + 1) / n:
                    break
            seen.add(question)
            examples.append(Example(id=f"{name}-{i}", input={"question": question}, expected=a + b))
        rng.shuffle(examples)
        return examples

    return Dataset(
        name="sums",
        description="Add two numbers. End with a line 'Answer: <number>'.",
        train=split("train", n_train),
        val=split("val", n_val),
        test=split("test", n_test),
    )


def mock_app(latency_s: float = 0.05, prune_share: float = 0.0, task: str = "default") -> FastAPI:
    """The endpoint (module doc), answering after ``latency_s`` seconds; ``prune_share``
    of the proposer's replies drop a phrase the instruction has instead of adding one;
    ``task`` names the task's profile (``TASKS``).

    The completions route is a plain Starlette route that reads and writes JSON bytes
    itself: FastAPI's body validation and response encoding cost the mock about 0.04 ms
    of CPU more a request (0.36-0.38 against 0.32 ms), on the cores the client it
    measures runs on."""
    app = FastAPI()
    app.state.calls = 0
    app.state.log = []  # LogEntry per request: model, arrived, answered, client's host:port

    @app.get("/v1/log")
    async def log() -> list[LogEntry]:
        return list(app.state.log)

    async def complete(request: Request) -> Response:
        body = json.loads(await request.body())
        arrived = time.monotonic()
        await asyncio.sleep(latency_s)
        app.state.calls += 1
        peer = request.client
        client = f"{peer.host}:{peer.port}" if peer is not None else ""
        app.state.log.append((str(body.get("model")), arrived, time.monotonic(), client))
        messages = body["messages"]
        if body.get("model") == "mock-proposer":
            text = proposer_reply(messages, body.get("seed"), prune_share)
        else:
            text = task_reply(messages, TASKS[task])
        reply = {
            "id": f"mock-{app.state.calls}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "mock"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": usage(body.get("model"), messages, text),
        }
        return Response(json.dumps(reply).encode(), media_type="application/json")

    app.router.add_route("/v1/chat/completions", complete, methods=["POST"])
    return app


class BackgroundServer:
    """The mock endpoint served by uvicorn in its own process on ``127.0.0.1:port``, so
    its work does not share the benchmark's interpreter (as a real endpoint's would not)."""

    def __init__(
        self, port: int, latency_s: float, prune_share: float = 0.0, task: str = "default"
    ) -> None:
        self.command = [
            sys.executable,
            __file__,
            "--port",
            str(port),
            "--latency",
            str(latency_s),
            "--prune-share",
            str(prune_share),
            "--task",
            task,
        ]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self.process: subprocess.Popen[bytes] | None = None

    def log(self) -> list[LogEntry]:
        """Every request so far (``LogEntry``; ``waves`` reads it)."""
        with urllib.request.urlopen(f"{self.base_url}/log", timeout=60) as reply:
            return [(str(m), float(a), float(b), str(c)) for m, a, b, c in json.load(reply)]

    def __enter__(self) -> BackgroundServer:
        self.process = subprocess.Popen(self.command)
        deadline = time.monotonic() + 120
        while True:
            try:
                self.log()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the mock endpoint did not start") from None
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the mock endpoint (module doc).")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--prune-share", type=float, default=0.0)
    parser.add_argument("--task", choices=sorted(TASKS), default="default")
    args = parser.parse_args()
    app = mock_app(args.latency, args.prune_share, args.task)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
