"""Code harness: an agent loop written as a Python module ``run(kit) -> str``, run in a
episode process against an environment, with budgeted, kit-recorded episodes.

This package's ``__init__`` stays empty of imports: the episode process imports only
``episode_process``, ``kit``, ``observation`` and ``toolcalls`` (standard library only).
"""
