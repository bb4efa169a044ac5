"""LocalLM's single worker thread: one call at a time, same-prefix requests grouped."""

from __future__ import annotations

import asyncio
import itertools
import threading
from pathlib import Path
from typing import Any

import pytest

from emery.core.errors import ConfigError
from emery.core.models import ChatMessage
from emery.lm import LMError, LocalLM
from emery.lm.local import prompt_key, shared_prefix

SYSTEM_A = "Alpha instructions: answer in one word."
SYSTEM_B = "Beta instructions: answer with a number."


class FakeLlama:
    """Stands in for ``llama_cpp.Llama``: records calls and catches concurrent entry.

    The first call blocks until ``release`` is set, so every other request is queued
    before the worker chooses the next one.
    """

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.events: list[tuple[str, str]] = []
        self.kwargs: list[dict[str, Any]] = []
        self.active = 0
        self.overlaps = 0
        self.threads: set[int] = set()
        self.fail_on: str | None = None
        self._lock = threading.Lock()

    def reset(self) -> None:
        self.events.append(("reset", ""))

    def create_chat_completion(self, messages: list[ChatMessage], **kw: Any) -> dict[str, Any]:
        with self._lock:
            self.active += 1
            if self.active > 1:
                self.overlaps += 1
        try:
            self.threads.add(threading.get_ident())
            self.entered.set()
            self.release.wait(timeout=10)
            user = messages[-1]["content"]
            self.events.append(("call", f"{messages[0]['content']}|{user}"))
            self.kwargs.append(kw)
            if user == self.fail_on:
                raise RuntimeError("llama exploded")
            return {
                "choices": [
                    {
                        "message": {"role": "assistant", "content": f"re: {user}"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 2},
            }
        finally:
            with self._lock:
                self.active -= 1

    def calls(self) -> list[str]:
        return [what for kind, what in self.events if kind == "call"]


def _local_lm(tmp_path: Path, **kw: Any) -> tuple[LocalLM, FakeLlama]:
    path = tmp_path / "dummy.gguf"
    path.write_bytes(b"GGUF")
    lm = LocalLM(path, **kw)
    llama = FakeLlama()
    lm._llama = llama
    return lm, llama


def _chat(system: str, user: str) -> list[ChatMessage]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _interleaved(n: int) -> list[list[ChatMessage]]:
    return [_chat(SYSTEM_A if i % 2 == 0 else SYSTEM_B, f"question {i:02d}") for i in range(n)]


async def _run_queued(lm: LocalLM, llama: FakeLlama, chats: list[list[ChatMessage]]) -> list[str]:
    """Submit every chat at once; let the worker go only when all are queued."""
    tasks = [asyncio.ensure_future(lm.complete(chat, max_tokens=8)) for chat in chats]
    for _ in range(10_000):
        if llama.entered.is_set() and len(lm._pending) == len(chats) - 1:
            break
        await asyncio.sleep(0.001)
    else:
        pytest.fail("the requests were never all queued")
    llama.release.set()
    completions = await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)
    return [c.text for c in completions]


def _switches(calls: list[str]) -> int:
    systems = [call.split("|")[0] for call in calls]
    return sum(1 for a, b in itertools.pairwise(systems) if a != b)


async def test_prefix_reuse_groups_requests_with_the_same_prefix(tmp_path: Path) -> None:
    lm, llama = _local_lm(tmp_path)
    chats = _interleaved(12)
    texts = await _run_queued(lm, llama, chats)

    assert texts == [f"re: question {i:02d}" for i in range(12)]
    calls = llama.calls()
    assert len(calls) == 12
    fifo_switches = _switches([f"{c[0]['content']}|x" for c in chats])
    assert fifo_switches == 11
    assert _switches(calls) == 1
    assert [c.split("|")[0] for c in calls] == [SYSTEM_A] * 6 + [SYSTEM_B] * 6
    assert ("reset", "") not in llama.events
    assert llama.overlaps == 0
    assert len(llama.threads) == 1


async def test_without_prefix_reuse_order_is_fifo_and_state_is_reset(tmp_path: Path) -> None:
    lm, llama = _local_lm(tmp_path, prefix_reuse=False)
    chats = _interleaved(8)
    await _run_queued(lm, llama, chats)

    expected = [f"{c[0]['content']}|{c[1]['content']}" for c in chats]
    assert llama.calls() == expected
    kinds = [kind for kind, _ in llama.events]
    assert kinds == ["reset", "call"] * 8
    assert llama.overlaps == 0


async def test_parameters_reach_llama_without_nones(tmp_path: Path) -> None:
    lm, llama = _local_lm(tmp_path)
    llama.release.set()
    await lm.complete(_chat(SYSTEM_A, "q"), temperature=0.3, stop=["\n"], top_p=0.5)
    await lm.complete(_chat(SYSTEM_A, "q2"))
    assert llama.kwargs[0] == {"temperature": 0.3, "stop": ["\n"], "top_p": 0.5}
    assert llama.kwargs[1] == {"temperature": 0.0}


async def test_completion_fields(tmp_path: Path) -> None:
    lm, llama = _local_lm(tmp_path, model="local/dummy")
    llama.release.set()
    completion = await lm.complete(_chat(SYSTEM_A, "hello"))
    assert completion.text == "re: hello"
    assert completion.model == "local/dummy"
    assert completion.usage.prompt_tokens == 10
    assert completion.usage.completion_tokens == 2
    assert LocalLM(tmp_path / "dummy.gguf").model == "local/dummy.gguf"


async def test_a_failing_call_raises_lm_error_and_the_worker_keeps_serving(
    tmp_path: Path,
) -> None:
    lm, llama = _local_lm(tmp_path)
    llama.release.set()
    llama.fail_on = "bad"
    with pytest.raises(LMError, match="llama exploded"):
        await lm.complete(_chat(SYSTEM_A, "bad"))
    assert (await lm.complete(_chat(SYSTEM_A, "good"))).text == "re: good"


def test_missing_model_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        LocalLM(tmp_path / "absent.gguf")


def test_prompt_key_prefixes_follow_message_prefixes() -> None:
    a1 = prompt_key(_chat(SYSTEM_A, "one"))
    a2 = prompt_key(_chat(SYSTEM_A, "two"))
    b1 = prompt_key(_chat(SYSTEM_B, "one"))
    assert shared_prefix(a1, a2) > shared_prefix(a1, b1)
    assert a1.startswith(prompt_key(_chat(SYSTEM_A, "one")[:1]))
    assert shared_prefix("abc", "abd") == 2
