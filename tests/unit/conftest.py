"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest

from emery.algorithms import registry


@pytest.fixture
def random_search_algorithm(monkeypatch: pytest.MonkeyPatch) -> None:
    """``random_search`` (``jobs_support``) is a known algorithm for this test only."""
    monkeypatch.setitem(registry.ALGORITHM_MODULES, "random_search", "jobs_support")
