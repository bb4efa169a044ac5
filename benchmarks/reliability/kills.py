"""SIGKILL at random points: each run starts ``python -m emery train`` with the scripted
models, SIGKILLs the process after a random number of answered model calls, resumes the
job with ``python -m emery jobs resume``, and compares the result with an uninterrupted
run of the same config. Re-paid calls: model calls answered across the kill and the
resume minus those of the uninterrupted run (the response cache, when on, answers repeats
without calling the model).

Usage: python benchmarks/reliability/kills.py [--runs 20] [--algorithms gepa,mipro,apo]
       [--cache on,off] [--jobs 2] [--seed N]

Exits 1 when any resumed job differs from its uninterrupted run or printed a traceback."""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_jobs import (
    ALGORITHMS,
    call_count,
    differences,
    emery_command,
    emery_env,
    only_job,
    outcome,
    run_emery,
    search_config,
    traceback_in,
)

DELAY_S = 0.02  # per model call: a run lasts long enough to be killed anywhere in it


@dataclass(frozen=True)
class Reference:
    """An uninterrupted run: its outcome and how many model calls it paid."""

    algorithm: str
    cache: bool
    outcome: dict[str, Any]
    calls: int


@dataclass
class KillRun:
    """One kill-and-resume run and how it compared with its reference."""

    kill_after: int
    calls: int = 0
    killed: bool = False
    differs: list[str] = field(default_factory=list)
    problem: str = ""

    @property
    def identical(self) -> bool:
        return self.killed and not self.differs and not self.problem


def write_config(folder: Path, algorithm: str, cache: bool) -> Path:
    """The run's config in a fresh ``folder`` (its workdir, response cache included,
    inside it)."""
    folder.mkdir(parents=True)
    path = folder / "job.toml"
    path.write_text(search_config(algorithm, folder / "work", cache=cache))
    return path


def train_args(config: Path) -> list[str]:
    store = config.parent / "emery.db"
    return ["train", str(config), "--store", str(store), "--stream-format", "none"]


def reference(algorithm: str, cache: bool, root: Path) -> Reference:
    """The uninterrupted run of ``algorithm`` with the cache on or off."""
    config = write_config(root / f"reference-{algorithm}-{cache}", algorithm, cache)
    log = config.parent / "calls.log"
    done = run_emery(train_args(config), emery_env(log, DELAY_S), config.parent)
    if done.returncode != 0:
        raise SystemExit(f"the uninterrupted {algorithm} run failed:\n{done.stderr}")
    return Reference(algorithm, cache, outcome(config.parent / "emery.db"), call_count(log))


def kill_at(process: subprocess.Popen[str], log: Path, calls: int, timeout_s: float) -> bool:
    """SIGKILL ``process`` once ``log`` holds ``calls`` calls; False if it ended first."""
    deadline = time.monotonic() + timeout_s
    while call_count(log) < calls:
        if process.poll() is not None or time.monotonic() > deadline:
            break
        time.sleep(0.002)
    else:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        return True
    process.kill()
    process.wait(timeout=30)
    return False


def killed_run(ref: Reference, number: int, root: Path, rng: random.Random) -> KillRun:
    """Train, SIGKILL after a random number of answered calls, resume, compare."""
    folder = root / f"kill-{ref.algorithm}-{ref.cache}-{number:02d}"
    config = write_config(folder, ref.algorithm, ref.cache)
    log, store = folder / "calls.log", folder / "emery.db"
    run = KillRun(kill_after=rng.randint(1, max(1, ref.calls - 1)))
    env = emery_env(log, DELAY_S)
    process = subprocess.Popen(
        emery_command(*train_args(config)),
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    run.killed = kill_at(process, log, run.kill_after, timeout_s=120)
    if not run.killed:
        run.problem = "the run ended before the kill"
        return run
    state = only_job(store).state
    if state != "running":
        run.problem = f"killed job is {state}, not running"
        return run
    resumed = run_emery(["jobs", "resume", only_job(store).id, "--store", str(store)], env, folder)
    run.calls = call_count(log)
    if resumed.returncode != 0 or traceback_in(resumed.stderr):
        run.problem = f"resume exited {resumed.returncode}: {resumed.stderr.strip()[-300:]}"
    run.differs = differences(outcome(store), ref.outcome)
    return run


@dataclass(frozen=True)
class Tally:
    """The runs of one algorithm and cache setting."""

    ref: Reference
    runs: list[KillRun]

    def line(self) -> str:
        same = sum(run.identical for run in self.runs)
        repaid = [run.calls - self.ref.calls for run in self.runs if run.killed]
        total = sum(repaid)
        most = max(repaid, default=0)
        cache = "on " if self.ref.cache else "off"
        return (
            f"{self.ref.algorithm:<6} cache {cache}  identical {same}/{len(self.runs)}"
            f"  re-paid calls {total} in all (max {most} per kill)"
            f"  of {self.ref.calls} per uninterrupted run"
        )


def suite(
    runs: int, algorithms: list[str], caches: list[bool], jobs: int, seed: int
) -> list[Tally]:
    """Every (algorithm, cache) reference and its ``runs`` kill-and-resume runs."""
    root = Path(tempfile.mkdtemp(prefix="emery-kills-"))
    rng = random.Random(seed)
    try:
        with ThreadPoolExecutor(jobs) as pool:
            pairs = [(a, c) for a in algorithms for c in caches]
            refs = list(pool.map(lambda pair: reference(*pair, root), pairs))
            plans = [(ref, n, random.Random(rng.random())) for ref in refs for n in range(runs)]
            done = list(pool.map(lambda plan: killed_run(plan[0], plan[1], root, plan[2]), plans))
        return [Tally(ref, done[i * runs : (i + 1) * runs]) for i, ref in enumerate(refs)]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="kills per algorithm and cache")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    parser.add_argument("--cache", default="on,off", help="on, off or on,off")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once")
    parser.add_argument("--seed", type=int, default=None, help="seed of the kill points")
    parser.add_argument("--verbose", action="store_true", help="print every run")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    caches = [part.strip() == "on" for part in args.cache.split(",")]
    started = time.monotonic()
    tallies = suite(args.runs, args.algorithms.split(","), caches, args.jobs, seed)
    bad = 0
    for tally in tallies:
        print(tally.line())
        for run in tally.runs:
            if args.verbose or not run.identical:
                detail = run.problem or (
                    "differs in " + ", ".join(run.differs) if run.differs else ""
                )
                print(f"  kill after {run.kill_after} calls: {run.calls} calls {detail}")
        bad += sum(not run.identical for run in tally.runs)
    print(f"kill seed {seed}; {time.monotonic() - started:.0f} s")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
