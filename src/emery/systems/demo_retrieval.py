"""Demos chosen per input: the few of a stage's pool most like the input being answered.

Similarity is the cosine of TF-IDF word vectors (lowercase words of the fields the stage's
templates read, IDF over the pool), so it needs no model and is the same on every run. A
demo whose inputs are the input's own is never shown (its reply would be the answer), so a
pool drawn from train can be scored on train. The nearest demo comes last, next to the
input it resembles.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from emery.core.models import Demo

NEAREST_SHOWN = 4
"""Demos shown per input when a stage selects the nearest (a labeled set's size)."""
_WORD = re.compile(r"\w+")


def _words(inputs: Mapping[str, Any]) -> Counter[str]:
    text = " ".join(str(inputs[name]) for name in sorted(inputs))
    return Counter(word.lower() for word in _WORD.findall(text))


def _vector(counts: Counter[str], idf: Mapping[str, float]) -> dict[str, float]:
    weights = {word: n * idf.get(word, 0.0) for word, n in counts.items()}
    norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
    return {word: w / norm for word, w in weights.items()}


def nearest_demos(
    pool: Sequence[Demo], inputs: Mapping[str, Any], count: int = NEAREST_SHOWN
) -> tuple[Demo, ...]:
    """The ``count`` demos of ``pool`` most like ``inputs``, least alike first (ties: pool
    order), never one whose inputs equal ``inputs``."""
    usable = [demo for demo in pool if dict(demo.inputs) != dict(inputs)]
    documents = [_words(demo.inputs) for demo in usable]
    frequency = Counter(word for document in documents for word in document)
    size = len(documents)
    idf = {word: math.log((1 + size) / (1 + n)) + 1.0 for word, n in frequency.items()}
    query = _vector(_words(inputs), idf)

    def similarity(index: int) -> float:
        vector = _vector(documents[index], idf)
        return sum(weight * vector.get(word, 0.0) for word, weight in query.items())

    ranked = sorted(range(size), key=lambda index: (-similarity(index), index))[:count]
    return tuple(usable[index] for index in reversed(ranked))
