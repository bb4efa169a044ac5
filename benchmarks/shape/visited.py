"""Which emery modules a job passes through from ``emery train`` to a store write.

Runs ``emery train ARGS`` in this process under a profiler and stops at the first call of
the store method ``--stop-at`` names (``create_job``: the job stored; ``swap_owner``: the
engine reserving it). Prints the modules on the call stack at that write (the stays) and
every module a function of which the command ran before it (code run while importing a
module is not counted: it is the same for any command).

    cd examples/classification && ../../.venv/bin/python ../../benchmarks/shape/visited.py \
        --stop-at swap_owner -- train job.toml

Give another checkout's source first on ``PYTHONPATH`` to measure that code the same way.
Run it in a copy of the example folder: the command stores the job under ``.emery/``.
"""

from __future__ import annotations

import argparse
import sys
from types import FrameType
from typing import Any

MARK = "/src/emery/"
COMMAND = "cli/train_cmd.py"


class Reached(BaseException):
    """Raised by the profiler at the store write, to end the command there."""


def module_of(frame: FrameType) -> str | None:
    path = frame.f_code.co_filename
    return path.split(MARK, 1)[1] if MARK in path else None


def in_command(frame: FrameType) -> bool:
    """Whether ``frame`` runs inside the command's own function and not in an import."""
    walk: FrameType | None = frame
    while walk is not None:
        if walk.f_code.co_name == "<module>":
            return False
        if module_of(walk) == COMMAND:
            return True
        walk = walk.f_back
    return False


def stays(frame: FrameType) -> list[str]:
    """The emery modules on the stack at ``frame``, outermost first, repeats folded."""
    found: list[str] = []
    walk: FrameType | None = frame
    while walk is not None:
        module = module_of(walk)
        if module is not None and (not found or found[-1] != module):
            found.append(module)
        walk = walk.f_back
    return found[::-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stop-at", default="create_job", help="store method that ends it")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="emery's arguments")
    args = parser.parse_args()
    command = [a for a in args.command if a != "--"]
    ran: set[str] = set()
    stack: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        module = module_of(frame) if event == "call" else None
        if module is None or not in_command(frame):
            return
        ran.add(module)
        if frame.f_code.co_name == args.stop_at and module.startswith("store/"):
            stack.extend(stays(frame))
            raise Reached

    from emery.cli.app import app

    sys.setprofile(profile)
    try:
        app(command, standalone_mode=False)
    except Reached:
        pass
    finally:
        sys.setprofile(None)
    if not stack:
        sys.exit(f"error: the command never called a store's {args.stop_at}")
    print(f"stays at {args.stop_at} ({len(stack)} modules):")
    for module in stack:
        print(f"  {module}")
    print(f"modules the command ran before it: {len(ran)}")
    for module in sorted(ran):
        print(f"  {module}")


if __name__ == "__main__":
    main()
