"""An endless, checkpointable stream of shuffled train batches.

Each pass over the train split is a fresh permutation; a batch that straddles two passes
never holds the same example twice (the examples already in the batch are moved to the end
of the next pass). The cursor is plain data, so a resumed search continues exactly where
the checkpoint left it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from pydantic import BaseModel, Field


class BatchCursor(BaseModel):
    """Where the stream stands: the current pass's order, the position in it, the pass number."""

    order: list[str] = Field(default_factory=list)
    position: int = 0
    epoch: int = 0


class ShuffledBatches:
    """Batches of example ids drawn from ``ids`` without repetition inside a batch.

    A pass's permutation depends only on ``(seed, epoch)``, never on the search's RNG.
    """

    def __init__(self, ids: Sequence[str], seed: int, cursor: BatchCursor | None = None) -> None:
        if not ids:
            raise ValueError("cannot draw batches from an empty split")
        if len(set(ids)) != len(ids):
            raise ValueError("example ids must be unique")
        self.ids = list(ids)
        self.seed = seed
        self.cursor = cursor.model_copy(deep=True) if cursor else BatchCursor()
        if not self.cursor.order:
            self.cursor.order = self._permutation(self.cursor.epoch, avoid=())

    def _permutation(self, epoch: int, avoid: Sequence[str]) -> list[str]:
        order = list(self.ids)
        random.Random(f"apo-batches:{self.seed}:{epoch}").shuffle(order)
        held = set(avoid)
        return [i for i in order if i not in held] + [i for i in order if i in held]

    def next(self, size: int) -> list[str]:
        """The next ``size`` ids (at most the split's size), advancing the cursor."""
        size = min(size, len(self.ids))
        batch: list[str] = []
        while len(batch) < size:
            if self.cursor.position >= len(self.cursor.order):
                self.cursor.epoch += 1
                self.cursor.order = self._permutation(self.cursor.epoch, avoid=batch)
                self.cursor.position = 0
            batch.append(self.cursor.order[self.cursor.position])
            self.cursor.position += 1
        return batch

    def peek(self, size: int) -> list[str]:
        """What ``next(size)`` would return, without moving the cursor."""
        saved = self.cursor.model_copy(deep=True)
        try:
            return self.next(size)
        finally:
            self.cursor = saved
