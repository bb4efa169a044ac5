"""The results a job already has, by (candidate, example, split), with its memory bounded.

A long job scores many rollouts, and every one of them may be reused (the same candidate on
the same example again). ``KnownResults`` remembers every key, keeps the newest ``keep``
results in memory and reads an older one back from where it was stored (``load``) when it
is asked for again. A result not stored yet (run since the engine's last commit: ``pin``)
is never put out of memory; ``unpin`` (at the commit) makes it eligible. Without ``load``
every result stays in memory (a job with no store to read from).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping

from emery.core.example_result import ExampleResult

EvalKey = tuple[str, str, str]  # (candidate id, example id, split)
Loader = Callable[[EvalKey], ExampleResult | None]

KEEP = 20_000
"""Results kept in memory by default (about 140 MB at the 7 KB a result measured)."""


class KnownResults:
    """Results by key, the newest in memory (module doc)."""

    def __init__(
        self,
        results: Mapping[EvalKey, ExampleResult] | None = None,
        *,
        load: Loader | None = None,
        keep: int = KEEP,
    ) -> None:
        self.load = load
        self.keep = keep
        self._keys: set[EvalKey] = set()
        self._held: OrderedDict[EvalKey, ExampleResult] = OrderedDict()
        self._pinned: set[EvalKey] = set()
        for key, result in (results or {}).items():
            self._put(key, result)

    def get(self, key: EvalKey, default: ExampleResult | None = None) -> ExampleResult | None:
        """The result of ``key``, read back if it left memory; ``default`` if none."""
        if key not in self._keys:
            return default
        held = self._held.get(key)
        if held is not None:
            self._held.move_to_end(key)
            return held
        loaded = self.load(key) if self.load is not None else None
        if loaded is None:  # gone from the store meanwhile (pruned): not known any more
            self._keys.discard(key)
            return default
        self._put(key, loaded)
        return loaded

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __getitem__(self, key: EvalKey) -> ExampleResult:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __setitem__(self, key: EvalKey, result: ExampleResult) -> None:
        self._put(key, result)

    def update(self, results: Mapping[EvalKey, ExampleResult]) -> None:
        """Know each of ``results`` (stored ones: they may leave memory)."""
        for key, result in results.items():
            self._put(key, result)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[EvalKey]:
        return iter(self._keys)

    def pop(self, key: EvalKey, default: ExampleResult | None = None) -> ExampleResult | None:
        """Forget ``key``; its result (from memory only) or ``default``."""
        self._keys.discard(key)
        self._pinned.discard(key)
        return self._held.pop(key, default)

    def pin(self, key: EvalKey, result: ExampleResult) -> None:
        """Know ``result`` and keep it in memory until ``unpin`` (it is not stored yet)."""
        self._pinned.add(key)
        self._put(key, result)

    def unpin(self, keys: Iterable[EvalKey]) -> None:
        """``keys``' results are stored: they may leave memory."""
        self._pinned.difference_update(keys)
        self._trim()

    def in_memory(self) -> int:
        """How many results are held in memory now."""
        return len(self._held)

    def _put(self, key: EvalKey, result: ExampleResult) -> None:
        self._keys.add(key)
        self._held[key] = result
        self._held.move_to_end(key)
        self._trim()

    def _trim(self) -> None:
        """Put the oldest results out of memory while more than ``keep`` are held; a
        pinned one goes to the back instead (each at most once a trim)."""
        if self.load is None:
            return
        passed = 0
        while len(self._held) > self.keep and passed < len(self._held):
            oldest = next(iter(self._held))
            if oldest in self._pinned:
                self._held.move_to_end(oldest)
                passed += 1
            else:
                del self._held[oldest]
