"""llama.cpp's low-level calls behind the batcher: one context, one KV stream per slot.

``llama_cpp.Llama`` (vocabulary only) supplies the tokenizer and chat template. The weights
are loaded once, without llama.cpp's CPU weight repacking: repacked Q4_K/Q6_K/Q4_0 tensors
are multiplied by one kernel for a lone token and by another for groups of 4, which round
differently and flipped near-tie greedy tokens once 4 requests ran together. Unpacked, every
row of a batch is computed as it would be alone, so a greedy reply does not depend on what
else is in the batch. One context holds ``slots`` sequences, each in its own KV stream
(``kv_unified`` off) of ``n_ctx`` cells, so a sequence's cache is laid out as it would be
alone. Memory: the weights (mapped from the file) plus the KV streams,
``slots × n_ctx × n_layer × (n_embd_k_gqa + n_embd_v_gqa) × 2`` bytes (f16), plus a compute
buffer that grows with ``n_ctx`` (about 300 MiB for Qwen2.5-0.5B at 4 × 4096).
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from emery.core.models import ChatMessage
from emery.lm.llama_prompt import Prompt, Sampling, build_prompt

N_BATCH = 512  # prompt tokens per llama_decode call, as llama_cpp.Llama's default
MIN_CHUNK = 8
"""The fewest tokens a prompt is read in at once, unless the whole prompt is shorter:
llama.cpp computes a call of fewer tokens with other kernels (on the CPU, 1 token for
SmolLM2 and up to 7 for Qwen2.5 gave other logits than the same positions read among
more), so a prompt read in pieces of at least this many gets the logits it gets read
whole, and a reply does not depend on how its prompt was split (``llama_batcher``)."""


def prefill_chunks(n: int, n_batch: int) -> list[int]:
    """The sizes ``n`` prompt tokens are read in: ``n_batch`` at a time, none shorter than
    ``MIN_CHUNK`` unless ``n`` is (the last two share out a short remainder)."""
    sizes: list[int] = []
    while n > 0:
        size = min(n_batch, n)
        short = MIN_CHUNK - (n - size)  # what the last piece would lack
        if 0 < short < MIN_CHUNK and size - short >= MIN_CHUNK:
            size -= short
        sizes.append(size)
        n -= size
    return sizes


PENALTY_LAST_N = 64  # llama_cpp.Llama's last_n_tokens_size
REPACK_WEIGHTS = False  # see the module docstring


class LlamaDecoder:
    """Decodes sequences in slots ``0..slots-1`` of one llama.cpp context."""

    def __init__(
        self,
        path: str | Path,
        *,
        slots: int,
        n_ctx: int,
        n_threads: int,
        seed: int,
        lora_path: str | Path | None = None,
    ) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self.slots = slots
        self._seed = seed
        with _muted_log():  # llama.cpp's loading notes, as Llama(verbose=False) does
            self.llama = _vocabulary(path, n_threads=n_threads, seed=seed)
            model_params = llama_cpp.llama_model_default_params()
            model_params.use_extra_bufts = REPACK_WEIGHTS
            self._model = llama_cpp.llama_model_load_from_file(str(path).encode(), model_params)
            self._ctx = None
            self._adapter = None
            params = llama_cpp.llama_context_params.from_buffer_copy(self.llama.context_params)
            self.n_batch = min(n_ctx, N_BATCH)
            params.n_ctx = n_ctx * slots
            params.n_batch = max(self.n_batch, slots)
            params.n_ubatch = params.n_batch
            params.n_seq_max = slots
            params.kv_unified = False
            try:
                if not self._model:
                    raise RuntimeError(f"llama.cpp could not load {path}")
                self._ctx = llama_cpp.llama_init_from_model(self._model, params)
                if not self._ctx:
                    raise RuntimeError(f"llama.cpp could not make a context of {slots} x {n_ctx}")
                if lora_path is not None:
                    self._apply_lora(lora_path)
            except Exception:
                self._release()
                raise
        self.n_ctx = int(llama_cpp.llama_n_ctx_seq(self._ctx))
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self._n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self._batch = llama_cpp.llama_batch_init(params.n_batch, 0, 1)
        self._samplers: dict[int, Any] = {}
        self._sampled_at: dict[int, int] = {}  # slot -> batch index of its last sample
        self._piece_buffer = ctypes.create_string_buffer(256)
        self.bos = int(self.llama.token_bos())

    def _apply_lora(self, lora_path: str | Path) -> None:
        lib = self._lib
        adapter = lib.llama_adapter_lora_init(self._model, str(lora_path).encode())
        if not adapter:
            raise RuntimeError(f"llama.cpp could not load the LoRA adapter {lora_path}")
        self._adapter = adapter
        adapters = (lib.llama_adapter_lora_p_ctypes * 1)(adapter)
        scales = (ctypes.c_float * 1)(1.0)
        if lib.llama_set_adapters_lora(self._ctx, adapters, 1, scales):
            raise RuntimeError(f"llama.cpp could not apply the LoRA adapter {lora_path}")

    def prepare(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Prompt:
        return build_prompt(self.llama, messages, params, self.n_ctx, self._seed)

    def piece(self, token: int) -> bytes:
        """The bytes of one token as ``Llama.detokenize`` writes them (no specials)."""
        buf = self._piece_buffer
        n = self._lib.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
        return bytes(buf.raw[: max(n, 0)])

    def is_eog(self, token: int) -> bool:
        return bool(self._lib.llama_vocab_is_eog(self._vocab, token))

    def begin(self, slot: int, sampling: Sampling) -> None:
        """A fresh sampler for the request that now holds ``slot``."""
        self.end(slot)
        self._samplers[slot] = self._sampler(sampling)

    def end(self, slot: int) -> None:
        sampler = self._samplers.pop(slot, None)
        if sampler is not None:
            self._lib.llama_sampler_free(sampler)

    def keep(self, slot: int, source: int, n: int) -> None:
        """Let ``slot`` hold the first ``n`` positions of ``source``'s cache (0: nothing).

        Across streams llama.cpp copies a whole stream; the positions after ``n`` are then
        dropped, and new tokens go to the cells right after them."""
        lib = self._lib
        if source != slot and n > 0:
            lib.llama_memory_seq_rm(self._mem, slot, -1, -1)
            lib.llama_memory_seq_cp(self._mem, source, slot, -1, -1)
        lib.llama_memory_seq_rm(self._mem, slot, n, -1)

    def prefill(self, slot: int, tokens: Sequence[int], pos: int) -> int:
        """Read ``tokens`` into ``slot`` from position ``pos`` (in calls of its own:
        ``prefill_chunks``) and sample the token after them."""
        start = 0
        for size in prefill_chunks(len(tokens), self.n_batch):
            chunk = tokens[start : start + size]
            self._fill([(slot, token, pos + start + i) for i, token in enumerate(chunk)])
            self._batch.logits[len(chunk) - 1] = True
            self._decode()
            start += size
        return self._sample(slot, len(chunk) - 1)

    def step(self, entries: Sequence[tuple[int, int, int]]) -> list[int]:
        """Decode one token for each ``(slot, token, position)`` and sample each slot's next."""
        self._fill(entries)
        for i in range(len(entries)):
            self._batch.logits[i] = True
        self._decode()
        return [self._sample(slot, i) for i, (slot, _, _) in enumerate(entries)]

    def logprob(self, slot: int, token: int) -> float:
        """The model's log-probability of ``token`` where ``slot`` last sampled (log-softmax
        of the logits, before the sampler's penalties and temperature); asked before the
        next decode, while those logits are still there."""
        return float(self._log_softmax(slot)[token])

    def top(self, slot: int, n: int) -> list[tuple[int, float]]:
        """The ``n`` likeliest tokens where ``slot`` last sampled, likeliest first, with
        their log-probabilities (as ``logprob`` reads them)."""
        logprobs = self._log_softmax(slot)
        n = min(n, len(logprobs))
        best = np.argpartition(-logprobs, n - 1)[:n]
        best = best[np.argsort(-logprobs[best], kind="stable")]
        return [(int(token), float(logprobs[token])) for token in best]

    def _log_softmax(self, slot: int) -> np.ndarray[Any, np.dtype[np.float64]]:
        pointer = self._lib.llama_get_logits_ith(self._ctx, self._sampled_at[slot])
        logits = np.ctypeslib.as_array(pointer, shape=(self._n_vocab,)).astype(np.float64)
        shifted = logits - logits.max()
        out: np.ndarray[Any, np.dtype[np.float64]] = shifted - np.log(np.exp(shifted).sum())
        return out

    def close(self) -> None:
        for slot in list(self._samplers):
            self.end(slot)
        if self._ctx:
            self._lib.llama_batch_free(self._batch)
        self._release()

    def _release(self) -> None:
        """Free what llama.cpp holds for this decoder (each part once)."""
        lib = self._lib
        if self._ctx:
            lib.llama_free(self._ctx)
            self._ctx = None
        if self._adapter is not None:
            lib.llama_adapter_lora_free(self._adapter)
            self._adapter = None
        if self._model:
            lib.llama_model_free(self._model)
            self._model = None
        self.llama.close()

    def _fill(self, entries: Sequence[tuple[int, int, int]]) -> None:
        batch = self._batch
        batch.n_tokens = len(entries)
        for i, (slot, token, pos) in enumerate(entries):
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = slot
            batch.logits[i] = False

    def _decode(self) -> None:
        code = self._lib.llama_decode(self._ctx, self._batch)
        if code != 0:
            raise RuntimeError(f"llama_decode failed ({code})")

    def _sample(self, slot: int, index: int) -> int:
        self._sampled_at[slot] = index
        return int(self._lib.llama_sampler_sample(self._samplers[slot], self._ctx, index))

    def _sampler(self, s: Sampling) -> Any:
        """The chain ``Llama._init_sampler`` builds (no grammar, no mirostat)."""
        lib = self._lib
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        parts = [
            lib.llama_sampler_init_penalties(
                self._n_vocab,
                PENALTY_LAST_N,
                s.repeat_penalty,
                s.frequency_penalty,
                s.presence_penalty,
            )
        ]
        if s.temperature < 0.0:
            parts.append(lib.llama_sampler_init_dist(s.seed))
        elif s.temperature == 0.0:
            parts.append(lib.llama_sampler_init_greedy())
        else:
            parts += [
                lib.llama_sampler_init_top_k(s.top_k),
                lib.llama_sampler_init_typical(s.typical_p, 1),
                lib.llama_sampler_init_top_p(s.top_p, 1),
                lib.llama_sampler_init_min_p(s.min_p, 1),
                lib.llama_sampler_init_temp(s.temperature),
                lib.llama_sampler_init_dist(s.seed),
            ]
        for part in parts:
            lib.llama_sampler_chain_add(chain, part)
        return chain


def _vocabulary(path: str | Path, *, n_threads: int, seed: int) -> Any:
    """A ``llama_cpp.Llama`` that only tokenizes and formats chats."""
    import llama_cpp

    return llama_cpp.Llama(
        model_path=str(path),
        vocab_only=True,
        n_ctx=64,
        n_threads=n_threads,
        n_threads_batch=n_threads,
        seed=seed,
        verbose=False,
    )


@contextlib.contextmanager
def _muted_log() -> Iterator[None]:
    """llama.cpp's log silenced (globally) while a model loads: it notes quirks of the model
    file on stderr, and that the vocabulary-only context exceeds a training context of 0."""
    import llama_cpp
    from llama_cpp._logger import llama_log_callback

    mute = llama_cpp.llama_log_callback(lambda level, text, user_data: None)
    llama_cpp.llama_log_set(mute, ctypes.c_void_p(0))
    try:
        yield
    finally:
        llama_cpp.llama_log_set(llama_log_callback, ctypes.c_void_p(0))
