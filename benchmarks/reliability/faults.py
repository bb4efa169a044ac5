"""LM fault injection: each job runs ``python -m emery train`` with its task, reflection
and proposer models behind a local mock OpenAI-compatible endpoint (``mock_openai.py``)
that answers like the scripted models and fails a share of the requests with HTTP 429,
HTTP 500, a hang past the client's timeout, or a garbage body.

- at 20% the model client retries (``max_attempts`` 8) and the job's result must equal
  the fault-free run's;
- at 100% (``max_attempts`` 5, the default) the job must end ``failed`` with a non-zero
  exit, one ``failed`` line naming the cause, and no traceback.

Usage: python benchmarks/reliability/faults.py [--algorithms gepa,mipro,apo]
       [--faults 429,500,hang,garbage] [--rates 0.2,1.0] [--jobs 2]

Exits 1 when any job misses its expectation."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mock_openai import FAULTS, Injector, MockServer
from search_jobs import (
    ALGORITHMS,
    differences,
    emery_env,
    outcome,
    run_emery,
    search_config,
    traceback_in,
)

TIMEOUT_S = 1.0  # the model client's request timeout; a hang lasts 3 s
ATTEMPTS = {0.0: 5, 0.2: 8, 1.0: 5}


@dataclass
class FaultRun:
    """One job against the mock endpoint and what came of it."""

    algorithm: str
    fault: str
    rate: float
    code: int = 0
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    outcome: dict[str, Any] = field(default_factory=dict)
    failed_line: str = ""
    problems: list[str] = field(default_factory=list)


def config(algorithm: str, base_url: str, workdir: Path, rate: float) -> str:
    """The job config with every model behind the mock endpoint at ``base_url``."""
    client = f'base_url = "{base_url}"\nmax_attempts = {ATTEMPTS.get(rate, 5)}\n'
    client += f"timeout_s = {TIMEOUT_S}"
    return search_config(
        algorithm,
        workdir,
        task=f'model = "openai/task"\n{client}',
        reflection=f'model = "openai/reflection"\n{client}',
    )


def run_job(algorithm: str, fault: str, rate: float, root: Path) -> FaultRun:
    """One job whose models fail ``rate`` of their requests with ``fault``."""
    run = FaultRun(algorithm, fault, rate)
    folder = root / f"{algorithm}-{fault}-{rate}"
    folder.mkdir(parents=True)
    kinds = FAULTS if fault == "mixed" else (fault,)
    with MockServer(Injector(rate=rate, kinds=kinds, seed=len(folder.name))) as server:
        path = folder / "job.toml"
        path.write_text(config(algorithm, server.base_url, folder / "work", rate))
        store = folder / "emery.db"
        started = time.monotonic()
        done = run_emery(
            ["train", str(path), "--store", str(store), "--stream-format", "none"],
            emery_env(),
            folder,
        )
        run.seconds = time.monotonic() - started
        run.counts = dict(server.injector.counts)
    run.code = done.returncode
    run.outcome = outcome(store)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    failed = [line for line in lines if " failed" in line and line.startswith("job ")]
    run.failed_line = failed[-1] if failed else ""
    if traceback_in(done.stderr):
        run.problems.append("traceback")
    return run


def judge(run: FaultRun, fault_free: dict[str, Any]) -> None:
    """Add to ``run.problems`` what misses the expectation for its rate."""
    if run.rate < 1.0:
        if run.code != 0:
            run.problems.append(f"exit {run.code}")
        differs = differences(run.outcome, fault_free)
        if differs:
            run.problems.append("differs in " + ", ".join(differs))
        return
    if run.outcome["state"] != "failed":
        run.problems.append(f"state {run.outcome['state']}, not failed")
    if run.code == 0:
        run.problems.append("exit 0")
    if not run.failed_line:
        run.problems.append("no 'job ... failed: cause' line")


def suite(
    algorithms: list[str], faults: list[str], rates: list[float], jobs: int
) -> list[FaultRun]:
    """The fault-free run and one run per (fault, rate) of each algorithm, judged."""
    root = Path(tempfile.mkdtemp(prefix="emery-faults-"))
    plans = [(a, "none", 0.0) for a in algorithms]
    plans += [(a, f, r) for a in algorithms for f in faults for r in rates]
    try:
        with ThreadPoolExecutor(jobs) as pool:
            runs = list(pool.map(lambda plan: run_job(*plan, root), plans))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    clean = {run.algorithm: run.outcome for run in runs if run.fault == "none"}
    for run in runs:
        judge(run, clean[run.algorithm])
    return runs


def line(run: FaultRun) -> str:
    """One run as a line of the report."""
    injected = sum(n for kind, n in run.counts.items() if kind in FAULTS)
    verdict = "; ".join(run.problems) or "ok"
    end = f"{run.outcome['state']}, exit {run.code}"
    if run.rate < 1.0 and run.fault != "none":
        end += ", result " + ("equal" if "differs" not in verdict else "DIFFERENT")
    shown = f"\n      {run.failed_line}" if run.rate >= 1.0 and run.failed_line else ""
    return (
        f"{run.algorithm:<6} {run.fault:<8} {run.rate:>4.0%}: {injected:>3} faults in"
        f" {run.counts.get('requests', 0):>3} requests, {end}, {run.seconds:.0f} s: {verdict}"
        + shown
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    parser.add_argument("--faults", default=",".join((*FAULTS, "mixed")))
    parser.add_argument("--rates", default="0.2,1.0")
    parser.add_argument("--jobs", type=int, default=2, help="jobs at once")
    args = parser.parse_args()
    started = time.monotonic()
    runs = suite(
        args.algorithms.split(","),
        args.faults.split(","),
        [float(rate) for rate in args.rates.split(",")],
        args.jobs,
    )
    for run in runs:
        print(line(run))
    print(f"{time.monotonic() - started:.0f} s")
    sys.exit(1 if any(run.problems for run in runs) else 0)


if __name__ == "__main__":
    main()
