"""Continuous batching of chat requests over a decoder with a fixed number of slots.

One decoding thread owns the decoder. Each request gets a slot (a KV-cache sequence): its
prompt is read in decode calls of its own (so its numbers are those of a lone request),
then every running request advances one token per step, all in one batch. A request joins
at the next step once its prompt is read, and leaves when it stops, freeing its slot; a
request whose future is cancelled leaves at the next step.

A slot keeps its cache after its request leaves. A new request starts from the cached
sequence that shares the longest token prefix with its prompt: in place when that slot is
free, else copied into a free slot, so a prefix shared by many requests (an instruction and
its demos) is read once. Only positions read as a prompt are reused (a decoded reply's are
computed one token at a time, with other kernels than a prompt's), and at least
``llama_decoder.MIN_CHUNK`` tokens are read anew, so a reply is the one its prompt gets
read whole by a lone request, whatever was cached or decoded beside it. Waiting requests
are served longest shared prefix first, then in arrival order.

The decoding thread never outlives the interpreter: ``stop()`` fails what is waiting or
running, frees the model and joins the thread, and ``stop_batchers()`` does so for every
batcher with a live thread (the CLI calls it on every exit; an ``atexit`` hook does too, so
llama.cpp is never torn down under a thread that is still decoding).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any, Protocol

from emery.core.models import ChatMessage
from emery.lm.base import Completion, LMError, TokenChoice, TokenTrace, TokenUsage
from emery.lm.llama_decoder import MIN_CHUNK
from emery.lm.llama_prompt import Prompt, Sampling
from emery.lm.llama_text import Generation

MIN_COPY = 8  # shorter shared prefixes are read again rather than copied between slots


class Decoder(Protocol):
    """What the batcher needs from a model (``LlamaDecoder`` for llama.cpp)."""

    slots: int
    bos: int

    def prepare(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Prompt: ...
    def piece(self, token: int) -> bytes: ...
    def is_eog(self, token: int) -> bool: ...
    def begin(self, slot: int, sampling: Sampling) -> None: ...
    def end(self, slot: int) -> None: ...
    def keep(self, slot: int, source: int, n: int) -> None: ...
    def prefill(self, slot: int, tokens: Sequence[int], pos: int) -> int: ...
    def step(self, entries: Sequence[tuple[int, int, int]]) -> list[int]: ...
    def logprob(self, slot: int, token: int) -> float: ...
    def top(self, slot: int, n: int) -> list[tuple[int, float]]: ...
    def close(self) -> None: ...


@dataclass
class BatcherStats:
    """Counts since the batcher started (tokens are prompt tokens unless named otherwise)."""

    requests: int = 0
    prompt_tokens: int = 0
    prefilled_tokens: int = 0  # read by the model
    reused_tokens: int = 0  # taken from a slot's cache instead
    copies: int = 0  # caches copied from one slot to another
    steps: int = 0  # batched decode calls
    step_tokens: int = 0  # tokens decoded in them (step_tokens / steps: mean batch)
    cancelled: int = 0


@dataclass
class _Request:
    order: int
    messages: list[ChatMessage]
    params: dict[str, Any]
    future: Future[Completion] = field(default_factory=Future)
    prompt: Prompt | None = None
    start: float = 0.0
    logprobs: list[float] | None = None  # a list when the caller asked for its tokens
    top_n: int = 0  # the likeliest tokens to keep per reply token (0: none)
    top: list[list[TokenChoice]] = field(default_factory=list)


@dataclass
class _Slot:
    index: int
    cached: list[int] = field(default_factory=list)  # tokens in its cache, by position
    read: int = 0  # of them, the leading ones read as a prompt (not decoded one by one)
    request: _Request | None = None
    generation: Generation | None = None
    next_token: int = -1  # sampled, not yet in the cache
    used: int = 0


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix of two token lists."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class Batcher:
    """Serves chat requests from one decoder, batching every running request per step."""

    def __init__(
        self, load: Callable[[], Decoder], *, model: str, prefix_reuse: bool = True
    ) -> None:
        self.model = model
        self.prefix_reuse = prefix_reuse
        self.stats = BatcherStats()
        self._load = load
        self._decoder: Decoder | None = None
        self._slots: list[_Slot] = []
        self._incoming: list[_Request] = []
        self._pending: list[_Request] = []
        self._cond = threading.Condition()
        self._order = itertools.count()
        self._stamp = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._closing = False
        self._stopping = False

    def submit(
        self,
        messages: Sequence[ChatMessage],
        params: dict[str, Any],
        *,
        tokens: bool = False,
        top: int = 0,
    ) -> Future[Completion]:
        """Queue a request; its future may be cancelled to free its slot. With ``tokens`` its
        completion carries the prompt's and the reply's token ids and the model's
        log-probability of each reply token (``Completion.tokens``); with ``top`` as well,
        the ``top`` likeliest tokens at each reply token's position."""
        request = _Request(
            order=next(self._order),
            messages=list(messages),
            params=params,
            logprobs=[] if tokens or top else None,
            top_n=max(0, top),
        )
        with self._cond:
            self._incoming.append(request)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="emery-llama", daemon=True)
                with _live_lock:
                    _live.add(self)
                self._thread.start()
            self._cond.notify()
        return request.future

    def close(self) -> None:
        """Finish what was submitted, then free the model (a later request loads it again)."""
        with self._cond:
            thread = self._thread
            if thread is None:
                return
            self._closing = True
            self._cond.notify()
        thread.join()

    def stop(self) -> None:
        """Stop at the next step: waiting and running requests fail, the model is freed, and
        the thread has ended when this returns (a later request loads the model again)."""
        with self._cond:
            thread = self._thread
            if thread is None:
                return
            self._stopping = True
            self._cond.notify()
        if thread is not threading.current_thread():
            thread.join()

    def running(self) -> int:
        """Requests holding a slot now."""
        return sum(1 for slot in self._slots if slot.request is not None)

    def _serve(self) -> None:
        while True:
            incoming = self._wait_for_work()
            if incoming is None:
                return
            decoder = self._decoder or self._start(incoming)
            if decoder is None:
                continue
            try:
                self._prepare(decoder, incoming)
                self._drop_cancelled(decoder)
                self._admit(decoder)
                if self.running():
                    self._step(decoder)
            except Exception as exc:  # a bug here must not leave callers waiting forever
                self._fail_all(decoder, exc)

    def _fail_all(self, decoder: Decoder, exc: Exception) -> None:
        error = LMError(f"{self.model}: {exc}")
        for request in self._pending:
            _fail(request, error)
        self._pending = []
        for slot in self._slots:
            if slot.request is not None:
                _fail(slot.request, error)
                self._release(decoder, slot)
            slot.cached, slot.read = [], 0
            decoder.keep(slot.index, slot.index, 0)

    def _wait_for_work(self) -> list[_Request] | None:
        """New requests (maybe none) once there is work; None when closed and idle, or
        stopped (the model is freed then)."""
        with self._cond:
            while not self._stopping:
                if self._incoming or self._pending or self.running():
                    incoming, self._incoming = self._incoming, []
                    return incoming
                if self._closing:
                    break
                self._cond.wait()
            self._abandon()
            self._shut()
            return None

    def _abandon(self) -> None:
        """Fail every request not finished (none when closing: those were served)."""
        error = LMError(f"{self.model}: the model was stopped")
        for request in self._incoming + self._pending:
            _fail(request, error)
        self._incoming, self._pending = [], []
        for slot in self._slots:
            if slot.request is not None:
                _fail(slot.request, error)
                slot.request, slot.generation = None, None

    def _shut(self) -> None:
        if self._decoder is not None:
            self._decoder.close()
        self._decoder, self._slots, self._closing, self._stopping = None, [], False, False
        self._thread = None
        with _live_lock:
            _live.discard(self)

    def _start(self, incoming: list[_Request]) -> Decoder | None:
        """Load the decoder; when that fails, every waiting request fails with the reason."""
        try:
            self._decoder = self._load()
        except Exception as exc:
            for request in incoming + self._pending:
                _fail(request, LMError(f"{self.model}: {exc}"))
            self._pending = []
            return None
        self._slots = [_Slot(index=i) for i in range(self._decoder.slots)]
        return self._decoder

    def _prepare(self, decoder: Decoder, incoming: list[_Request]) -> None:
        for request in incoming:
            try:
                request.prompt = decoder.prepare(request.messages, request.params)
            except Exception as exc:
                _fail(request, LMError(f"{self.model}: {exc}"))
            else:
                self._pending.append(request)

    def _drop_cancelled(self, decoder: Decoder) -> None:
        self._pending = [r for r in self._pending if not r.future.cancelled()]
        for slot in self._slots:
            if slot.request is not None and slot.request.future.cancelled():
                self.stats.cancelled += 1
                self._release(decoder, slot)

    def _admit(self, decoder: Decoder) -> None:
        while self._pending:
            free = [slot for slot in self._slots if slot.request is None]
            if not free:
                return
            request, source, shared = self._choose()
            self._pending.remove(request)
            target = source if source.request is None else min(free, key=lambda s: s.used)
            self._begin(decoder, request, target, source, shared)

    def _choose(self) -> tuple[_Request, _Slot, int]:
        """The waiting request with the longest cached prefix, its source slot and length."""
        if not self.prefix_reuse:
            return min(self._pending, key=lambda r: r.order), self._slots[0], 0
        best: tuple[int, int] | None = None
        choice = (self._pending[0], self._slots[0], 0)
        for request in self._pending:
            tokens = request.prompt.tokens if request.prompt else []
            for slot in self._slots:
                shared = common_prefix(slot.cached[: slot.read], tokens)
                key = (shared, -request.order)
                if best is None or key > best:
                    best, choice = key, (request, slot, shared)
        return choice

    def _begin(
        self, decoder: Decoder, request: _Request, slot: _Slot, source: _Slot, shared: int
    ) -> None:
        """Give ``slot`` to ``request``: reuse what it can, read the rest, sample a token."""
        assert request.prompt is not None
        tokens = request.prompt.tokens
        # at least MIN_CHUNK tokens are read anew (the last one always): fewer would be read
        # with other kernels and give other logits than the same prompt read whole
        shared = max(0, min(shared, len(tokens) - MIN_CHUNK))
        if source is not slot and shared < MIN_COPY:
            source, shared = slot, 0
        request.start = time.perf_counter()
        try:
            decoder.keep(slot.index, source.index, shared)
            slot.cached, slot.read = tokens[:shared], shared
            decoder.begin(slot.index, request.prompt.sampling)
            first = decoder.prefill(slot.index, tokens[shared:], shared)
        except Exception as exc:
            slot.cached, slot.read = [], 0
            decoder.end(slot.index)
            _fail(request, LMError(f"{self.model}: {exc}"))
            return
        slot.cached, slot.read = list(tokens), len(tokens)
        self._count(len(tokens), shared, copied=source is not slot and shared > 0)
        slot.request = request
        slot.generation = Generation(request.prompt, decoder.piece, decoder.is_eog, decoder.bos)
        self._accept(decoder, slot, first)

    def _count(self, n_prompt: int, shared: int, *, copied: bool) -> None:
        stats = self.stats
        stats.requests += 1
        stats.prompt_tokens += n_prompt
        stats.reused_tokens += shared
        stats.prefilled_tokens += n_prompt - shared
        stats.copies += int(copied)

    def _step(self, decoder: Decoder) -> None:
        running = [slot for slot in self._slots if slot.request is not None]
        entries = [(slot.index, slot.next_token, len(slot.cached)) for slot in running]
        try:
            sampled = decoder.step(entries)
        except Exception as exc:
            for slot in running:
                assert slot.request is not None
                _fail(slot.request, LMError(f"{self.model}: {exc}"))
                decoder.keep(slot.index, slot.index, 0)
                slot.cached, slot.read = [], 0
                self._release(decoder, slot)
            return
        self.stats.steps += 1
        self.stats.step_tokens += len(entries)
        for slot, token in zip(running, sampled, strict=True):
            slot.cached.append(slot.next_token)
            self._accept(decoder, slot, token)

    def _accept(self, decoder: Decoder, slot: _Slot, token: int) -> None:
        generation, request = slot.generation, slot.request
        assert generation is not None
        assert request is not None
        taken = len(generation.tokens)
        done = generation.push(token)
        if request.logprobs is not None and len(generation.tokens) > taken:
            request.logprobs.append(decoder.logprob(slot.index, token))
            if request.top_n:
                request.top.append(_choices(decoder, slot.index, request.top_n))
        if not done:
            slot.next_token = token
            return
        completion = Completion(
            text=generation.text,
            finish_reason=generation.finish_reason or "stop",
            usage=TokenUsage(
                prompt_tokens=len(generation.prompt.tokens),
                completion_tokens=len(generation.tokens),
            ),
            latency_s=time.perf_counter() - request.start,
            model=self.model,
            tokens=_tokens(generation, request),
        )
        self._release(decoder, slot)  # before the caller hears: the slot is free by then
        try:
            request.future.set_result(completion)
        except InvalidStateError:  # cancelled meanwhile
            self.stats.cancelled += 1

    def _release(self, decoder: Decoder, slot: _Slot) -> None:
        decoder.end(slot.index)
        slot.request = None
        slot.generation = None
        slot.used = next(self._stamp)


def _tokens(generation: Generation, request: _Request) -> TokenTrace | None:
    """What a request that asked for its tokens gets (None for the others)."""
    if request.logprobs is None:
        return None
    return TokenTrace(
        prompt_token_ids=list(generation.prompt.tokens),
        completion_token_ids=list(generation.tokens),
        completion_logprobs=list(request.logprobs),
        completion_top_logprobs=list(request.top) if request.top_n else None,
    )


def _choices(decoder: Decoder, slot: int, n: int) -> list[TokenChoice]:
    """The ``n`` likeliest tokens where ``slot`` last sampled, as text (a token that is part
    of a character reads as the replacement character)."""
    return [
        TokenChoice(token=decoder.piece(token).decode("utf-8", "replace"), logprob=logprob)
        for token, logprob in decoder.top(slot, n)
    ]


def _fail(request: _Request, error: Exception) -> None:
    with contextlib.suppress(InvalidStateError):
        request.future.set_exception(error)


_live: weakref.WeakSet[Batcher] = weakref.WeakSet()  # batchers with a decoding thread
_live_lock = threading.Lock()


def stop_batchers() -> None:
    """Stop every batcher that has a decoding thread, and wait for those threads to end."""
    with _live_lock:
        batchers = list(_live)
    for batcher in batchers:
        batcher.stop()


atexit.register(stop_batchers)  # before interpreter teardown and llama.cpp's destructors
