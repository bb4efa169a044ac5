"""The package table: modules and lines of each package of ``src/emery`` (``--at REV`` reads
a commit instead of the working tree).

    .venv/bin/python benchmarks/shape/packages.py [--at 42a08e6]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sources(rev: str | None) -> dict[str, str]:
    """Each module's path under ``src/emery`` → its text."""
    if rev is None:
        base = ROOT / "src" / "emery"
        return {str(p.relative_to(base)): p.read_text(encoding="utf-8") for p in base.rglob("*.py")}
    listed = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev, "src/emery"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return {
        path.removeprefix("src/emery/"): subprocess.run(
            ["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
        for path in listed
        if path.endswith(".py")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--at", default=None, help="a commit (default: the working tree)")
    args = parser.parse_args()
    modules: dict[str, list[int]] = defaultdict(list)
    for path, text in sources(args.at).items():
        package = path.split("/", 1)[0] if "/" in path else path.removesuffix(".py")
        modules[package].append(len(text.splitlines()))
    print("| package | modules | lines |")
    print("| --- | ---: | ---: |")
    for package in sorted(modules):
        print(f"| {package} | {len(modules[package])} | {sum(modules[package]):,} |")
    every = [n for lines in modules.values() for n in lines]
    print(f"| all | {len(every)} | {sum(every):,} |")
    print(
        f"\nmedian module {statistics.median(every):.0f} lines; over 500: "
        f"{sum(n > 500 for n in every)}"
    )


if __name__ == "__main__":
    main()
