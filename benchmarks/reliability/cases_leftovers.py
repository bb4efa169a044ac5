"""Issue 50's bad-input leftovers: configs nested thousands of levels deep (in the file,
in a ``--set`` value), and stores this user may not reach or write, under ``emery
runner`` and the other commands that open a store."""

from __future__ import annotations

from cases import Case, job, train

DEEP = 5000
"""Past Python's recursion limit (1000): the parser, a copy or a writer that recursed
would end in a RecursionError traceback."""

DEEP_ARRAY = "[" * DEEP + "]" * DEEP
DEEP_INLINE = "{x = " * DEEP + "1" + "}" * DEEP
DEEP_KEY = ".".join(["a"] * DEEP)


def _runner(name: str, expect: str, files: dict[str, str | bytes], modes: dict[str, int]) -> Case:
    args = ["runner", "--store", "locked/emery.db", "--idle-exit-s", "0"]
    return Case(f"runner: {name}", args, expect, files, modes)


def leftover_cases() -> list[Case]:
    """TOML nested 5000 deep four ways, a ``--set`` value as deep, ``emery eval`` on a
    deep config; a runner (and ``jobs list``) on a store whose folder it may not enter,
    and on a read-only store file or folder."""
    store = {"locked/emery.db": b""}
    return [
        train("config: TOML arrays 5000 deep", "nested too deeply", f"x = {DEEP_ARRAY}\n"),
        train("config: TOML inline tables 5000 deep", "nested too deeply", f"x = {DEEP_INLINE}\n"),
        train("config: TOML table header 5000 keys deep", "nested over 64", f"[{DEEP_KEY}]\n"),
        train("config: TOML dotted key 5000 deep", "nested over 64", f"{DEEP_KEY} = 1\n"),
        train(
            "config: deep table after a valid job",
            "nested over 64",
            job(extra=f"[algorithm.{DEEP_KEY}]\nx = 1\n"),
        ),
        Case(
            "config: --set value 5000 deep",
            ["train", "job.toml", "--set", f"algorithm.gepa.x={DEEP_ARRAY}"],
            "nested too deeply",
            {"job.toml": job()},
        ),
        Case(
            "config: --set inline tables 5000 deep",
            ["train", "job.toml", "--set", f"algorithm.gepa.x={DEEP_INLINE}"],
            "nested too deeply",
            {"job.toml": job()},
        ),
        Case(
            "eval: TOML dotted key 5000 deep",
            ["eval", "job.toml"],
            "nested over 64",
            {"job.toml": f"{DEEP_KEY} = 1\n"},
        ),
        _runner(
            "store folder it may not enter", "may not enter its folder", store, {"locked": 0o600}
        ),
        _runner("store folder read-only", "may not write its folder", store, {"locked": 0o555}),
        _runner(
            "store file read-only",
            "may not write locked/emery.db",
            store,
            {"locked/emery.db": 0o444},
        ),
        Case(
            "jobs list: store folder it may not enter",
            ["jobs", "list", "--store", "locked/emery.db"],
            "may not enter its folder",
            store,
            {"locked": 0o600},
        ),
    ]
