"""Code harness: an agent loop written as a Python module ``run(kit) -> str``, run in a
worker process against an environment, with budgeted, kit-recorded episodes.

This package's ``__init__`` stays empty of imports: the worker process imports only
``worker``, ``kit``, ``observation`` and ``toolcalls`` (standard library only).
"""
