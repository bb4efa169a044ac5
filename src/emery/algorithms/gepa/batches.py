"""The minibatch sampler: how each step's train minibatch is drawn.

The sampler is a strategy: ``minibatch_sampler`` names a ``SamplerKind`` in
``MINIBATCH_SAMPLERS`` (``core/plugins.py``): the built-in ``epoch_shuffled``, a
``"module:attr"`` of your own, or an entry point of the ``emery.minibatch_samplers``
group. It draws the minibatch a child is judged on and the further ones it is judged on
while the evidence is undecided (``mutation.draw_extension``); with ``failure_share`` the
reflection is shown a failure-aware minibatch besides (``failure_batches``).

``epoch_shuffled``: each epoch is a fresh shuffle of the train ids, padded with the
least-used ids so it divides into whole minibatches; minibatches are read from it in
order. The shuffle uses the search's RNG, whose state is checkpointed, so a resumed job
draws the same batches.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from emery.algorithms.gepa.state import GepaState, SamplerState
from emery.core.plugins import PluginRegistry

if TYPE_CHECKING:
    from emery.algorithms.gepa.settings import GepaSettings


@runtime_checkable
class MinibatchSampler(Protocol):
    def draw(
        self, state: GepaState, train_ids: list[str], size: int, rng: random.Random
    ) -> list[str]:
        """The next minibatch of ``size`` train ids (fewer only if train is smaller). Keep
        what must survive a resume in ``state.sampler`` and draw only from ``rng``."""
        ...


class EpochShuffled:
    """Minibatches read in order from a fresh shuffle of train each epoch (module doc)."""

    def draw(
        self, state: GepaState, train_ids: list[str], size: int, rng: random.Random
    ) -> list[str]:
        return next_minibatch(state.sampler, train_ids, size, rng)


@dataclass(frozen=True)
class SamplerKind:
    """A minibatch sampler GEPA can be told to use: ``build`` makes it from GEPA's settings."""

    name: str
    build: Callable[[GepaSettings], MinibatchSampler]


EPOCH_SHUFFLED = SamplerKind("epoch_shuffled", lambda _: EpochShuffled())

MINIBATCH_SAMPLERS = PluginRegistry(
    what="minibatch sampler",
    plural="minibatch samplers",
    where="algorithm.gepa.minibatch_sampler",
    builtins={EPOCH_SHUFFLED.name: f"{__name__}:EPOCH_SHUFFLED"},
    attribute="SAMPLER",
    group="emery.minibatch_samplers",
    type=SamplerKind,
)


def minibatch_sampler(settings: GepaSettings) -> MinibatchSampler:
    """The sampler ``settings.minibatch_sampler`` names."""
    return MINIBATCH_SAMPLERS.get(settings.minibatch_sampler).build(settings)


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
