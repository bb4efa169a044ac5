"""Epoch-shuffled train minibatches.

Each epoch is a fresh shuffle of the train ids, padded with the least-used ids so it
divides into whole minibatches; minibatches are read from it in order. The shuffle uses
the search's RNG, whose state is checkpointed, so a resumed job draws the same batches.
"""

from __future__ import annotations

import random

from emery.algorithms.gepa.state import SamplerState


def next_minibatch(
    sampler: SamplerState, train_ids: list[str], size: int, rng: random.Random
) -> list[str]:
    """The next minibatch of train ids (fewer than ``size`` only if train is smaller)."""
    size = min(size, len(train_ids))
    if not sampler.order or sampler.cursor + size > len(sampler.order):
        _new_epoch(sampler, train_ids, size, rng)
    batch = sampler.order[sampler.cursor : sampler.cursor + size]
    sampler.cursor += size
    return batch


def _new_epoch(sampler: SamplerState, train_ids: list[str], size: int, rng: random.Random) -> None:
    order = list(train_ids)
    rng.shuffle(order)
    counts = {example: sampler.counts.get(example, 0) + 1 for example in train_ids}
    remainder = len(order) % size
    for _ in range(size - remainder if remainder else 0):
        tail = set(order[len(order) - len(order) % size :])
        least = min(
            (example for example in train_ids if example not in tail),
            key=lambda example: (counts[example], train_ids.index(example)),
        )
        order.append(least)
        counts[least] += 1
    sampler.order = order
    sampler.cursor = 0
    sampler.epoch += 1
    sampler.counts = counts
