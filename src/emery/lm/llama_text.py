"""One sequence's reply as tokens arrive, with ``Llama._create_completion``'s stop rules.

An end-of-generation token stops with ``stop`` and is not part of the reply; a stop string
cuts the reply before it (``stop``); ``max_tokens`` tokens stop with ``length``; an
incomplete UTF-8 character is held back before stop strings and the length are checked
(never past the room left in the context).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from emery.lm.llama_prompt import Prompt

_LEAD_BYTES = ((2, 192), (3, 224), (4, 240))


class Generation:
    """The completion of one prompt: feed it sampled tokens until it says it is done."""

    def __init__(
        self,
        prompt: Prompt,
        piece: Callable[[int], bytes],
        is_eog: Callable[[int], bool],
        bos: int = -1,
    ) -> None:
        self.prompt = prompt
        self.tokens: list[int] = []
        self.finish_reason: str | None = None
        self._piece = piece
        self._is_eog = is_eog
        self._bos = bos
        self._bytes = b""
        self._text = b""
        self._multibyte = 0

    @property
    def text(self) -> str:
        return self._text.decode("utf-8", errors="ignore")

    def push(self, token: int) -> bool:
        """Take the token sampled next; True when the reply is finished."""
        if self._stopped_by_criteria():
            return self._finish("stop", self._all_bytes())
        if self._is_eog(token):
            return self._finish("stop", self._all_bytes())
        self.tokens.append(token)
        self._bytes += self._piece(token)
        text = self._all_bytes()
        self._multibyte_check(text)
        if len(self.tokens) >= self.prompt.room:
            return self._finish("length", text)
        if self._multibyte > 0:  # as llama-cpp-python: no stop or length check yet
            self._multibyte -= 1
            return False
        hits = [s for s in self.prompt.stop if s in text]
        if hits:
            return self._finish("stop", text[: text.index(hits[0])])
        if len(self.tokens) >= self.prompt.max_tokens:
            return self._finish("length", text)
        return False

    def _all_bytes(self) -> bytes:
        if self.tokens and self.tokens[0] == self._bos and self._bytes[:1] == b" ":
            return self._bytes[1:]
        return self._bytes

    def _multibyte_check(self, text: bytes) -> None:
        for k, char in enumerate(text[-3:]):
            k = 3 - k
            for num, pattern in _LEAD_BYTES:
                if num > k and pattern & char == pattern:
                    self._multibyte = num - k

    def _stopped_by_criteria(self) -> bool:
        """The chat handler's stop rule, asked (as llama-cpp-python does) of the tokens
        evaluated so far: the prompt and every reply token but the one just sampled."""
        criteria = self.prompt.stop_on
        if criteria is None:
            return False
        evaluated = np.asarray(self.prompt.tokens + self.tokens, dtype=np.intc)
        return bool(criteria(evaluated, _NO_LOGITS))

    def _finish(self, reason: str, text: bytes) -> bool:
        self.finish_reason = reason
        self._text = text
        return True


_NO_LOGITS: Any = np.zeros(0, dtype=np.single)
