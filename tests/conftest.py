"""Collection order for the whole suite."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that must share one pytest-xdist worker (``xdist_group``: the Ray tests, about
    three minutes together) come first, so that worker starts them at once instead of
    running them alone at the end while the other worker waits."""
    items.sort(key=lambda item: item.get_closest_marker("xdist_group") is None)
