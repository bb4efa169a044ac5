"""A search that has ended stays ended, and its budget holds across a pause (issue 50).

The case: ``emery train`` runs GEPA on the built-in word problems with the scripted models
(``scripted_lm``, 50 ms a call) under ``wall_time_s = 3``, so the time runs out in the
middle of a step and that step is cut (undone whole, its time counted). When the final
test scoring begins (the line ``scoring the seed candidate ... on the test split``), the
case presses Ctrl-C (SIGINT), which pauses the job; then ``emery jobs resume JOB``. The
job must

- be paused by the Ctrl-C with the search's time, the cut step's included, in the store:
  the checkpoint's ``wall_time_s`` at least the 3 s cap;
- resume into the test scoring only: exit 0, succeed, no traceback; no more
  ``iteration_completed`` events, no train or val rollout and no reflection call after the
  resume; the stop reason names the wall time and the result's ``budget`` is the one
  stored at the pause.

Before the fix the stored search time lacked the cut step's seconds and the end of the
search was not stored before the test scoring: the resumed job went back into the search,
repeated the cut step and searched on.

Usage: python benchmarks/reliability/search_end.py [--verbose]

Exits 1 when the job misses any of these."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_jobs import (
    REFLECTION_LM,
    TASK_LM,
    emery_command,
    emery_env,
    only_job,
    run_emery,
    traceback_in,
)

CAP_S = 3
DELAY_S = 0.05
TEST_LINE = "on the test split"


def config(workdir: Path) -> str:
    """GEPA under a 3 s wall-time budget, one rollout at a time, the response cache off
    (a repeated call is made again and logged)."""
    roles = "".join(
        f'[lm.{role}]\nmodel = "{REFLECTION_LM}"\n' for role in ("reflection", "proposer")
    )
    return (
        f'[job]\nalgorithm = "gepa"\nseed = 3\n[job.budget]\nwall_time_s = {CAP_S}\n'
        '[dataset]\ntask = "word_problems"\nn_train = 8\nn_val = 8\nn_test = 6\n'
        f'[lm.task]\nmodel = "{TASK_LM}"\n{roles}[verifier]\nkind = "numeric"\n'
        f'[runtime]\nworkdir = "{workdir.as_posix()}"\nconcurrency = 1\ncache = false\n'
    )


@dataclass
class Snapshot:
    """What the store holds of the job's search at one moment."""

    state: str
    budget: dict[str, Any]
    steps: int
    searched: int
    reflections: int


def snapshot(store: Path, calls: Path) -> Snapshot:
    from emery.store import SQLiteStore
    from emery.store.records import EvaluationFilter

    job = only_job(store)
    db = SQLiteStore(store)
    try:
        checkpoint = db.get_checkpoint(job.id)
        steps = len(db.list_events(job.id, kinds=["iteration_completed"]))
        page = db.list_evaluations(EvaluationFilter(job_id=job.id), limit=None)
        searched = sum(1 for e in page.items if e.result.split in ("train", "val"))
    finally:
        db.close()
    lines = calls.read_text().splitlines() if calls.exists() else []
    return Snapshot(
        state=job.state,
        budget=checkpoint.budget if checkpoint is not None else {},
        steps=steps,
        searched=searched,
        reflections=sum(1 for line in lines if line.startswith("scripted-reflection")),
    )


def train_until_test_scoring(folder: Path, store: Path, env: dict[str, str]) -> tuple[bool, str]:
    """``emery train``, Ctrl-C once the test scoring begins; (pressed, its stderr)."""
    process = subprocess.Popen(
        emery_command("train", "job.toml", "--store", str(store)),
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    pressed, lines = False, []
    for line in process.stderr:
        lines.append(line)
        if not pressed and TEST_LINE in line:
            process.send_signal(signal.SIGINT)
            pressed = True
    process.wait(timeout=120)
    return pressed, "".join(lines)


def problems(folder: Path) -> list[str]:
    """Run the case in ``folder``; what is wrong with how the job ended (nothing: passed)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job.toml").write_text(config(folder / "work"))
    store, calls = folder / "emery.db", folder / "calls.log"
    env = emery_env(calls, DELAY_S)
    pressed, stderr = train_until_test_scoring(folder, store, env)
    if traceback_in(stderr):
        return ["traceback in emery train"]
    paused = snapshot(store, calls)
    if not pressed or paused.state != "paused":
        return [f"not paused in the test scoring (Ctrl-C pressed: {pressed}, {paused.state})"]
    found = []
    spent = float(paused.budget.get("wall_time_s", 0.0))
    if spent < CAP_S:
        found.append(f"the search time stored at the pause is {spent:g} s, under the {CAP_S} s cap")
    resumed = run_emery(["jobs", "resume", only_job(store).id, "--store", str(store)], env, folder)
    if resumed.returncode != 0 or traceback_in(resumed.stderr):
        return [*found, f"resume exited {resumed.returncode}: {resumed.stderr.strip()[-300:]}"]
    end = snapshot(store, calls)
    job = only_job(store)
    result = job.result or {}
    if end.state != "succeeded":
        found.append(f"the resumed job is {end.state}")
    if not (job.stop_reason or "").startswith("wall_time_s"):
        found.append(f"stop reason {job.stop_reason!r}")
    if end.steps != paused.steps:
        found.append(f"{end.steps - paused.steps} more search steps after the resume")
    if end.searched != paused.searched:
        found.append(
            f"{end.searched - paused.searched} more train or val rollouts after the resume"
        )
    if end.reflections != paused.reflections:
        found.append(f"{end.reflections - paused.reflections} reflection calls after the resume")
    if result.get("budget") != paused.budget:
        found.append(f"result budget {result.get('budget')} is not the one stored at the pause")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        found = problems(Path(root))
    if args.verbose or found:
        for problem in found:
            print(f"  {problem}")
    print("an ended search stays ended: " + ("passed" if not found else f"{len(found)} problems"))
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
