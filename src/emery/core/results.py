"""Deprecated name of :mod:`emery.core.example_result`, kept only until the two modules that
still import it (``workers/runner.py``, ``workers/queue_executor.py``) import the new name;
then this file goes."""

from emery.core.example_result import ExampleResult

__all__ = ["ExampleResult"]
