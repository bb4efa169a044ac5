"""Fixtures shared by the unit tests."""

from __future__ import annotations

import logging

import pytest

from emery.algorithms import registry


@pytest.fixture
def random_search_algorithm(monkeypatch: pytest.MonkeyPatch) -> None:
    """``random_search`` (``jobs_support``) is a known algorithm for this test only."""
    monkeypatch.setitem(registry.ALGORITHM_MODULES, "random_search", "jobs_support")


@pytest.fixture
def quiet_evaluator_failures(caplog: pytest.LogCaptureFixture) -> None:
    """The evaluator's log of failed runs is muted (tests that fail runs on purpose)."""
    caplog.set_level(logging.ERROR, logger="emery.evaluation.evaluator")
