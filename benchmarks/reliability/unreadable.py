"""Replies the parser cannot read are wrong answers, not failed runs (issue 50).

The case: ``emery train`` on the built-in word problems with a task model that never
writes the line the stage's parser reads (``scripted_lm.unlabeled_lm``: ``\\boxed{12}``
instead of ``Answer: 12``). Such a reply scores 0, as a wrong answer does. The job must

- exit 0, succeed, and print no traceback;
- say ``N unreadable`` and never ``failed`` on its event lines (``evaluated ... on val:
  0.0% (n=3, 3 new rollouts, 3 unreadable)``), and warn in the report that the parser
  could not read the seed's replies;
- store every rollout ``succeeded`` with score 0 and no error, and every evaluation
  without an error, the parser's message kept as ``unreadable`` and in the feedback;
- count them in the result: the seed's test summary ``unreadable`` = n, ``failed`` = 0.

Before the fix, each reply was stored as a failed rollout (status ``failed``, the pattern
in ``error``) and every line said ``3 failed``.

Usage: python benchmarks/reliability/unreadable.py [--verbose]

Exits 1 when the job misses any of these."""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_jobs import emery_env, run_emery, traceback_in

MODEL = "python/scripted_lm:unlabeled_lm"
SIZES = {"train": 2, "val": 3, "test": 4}


def config(workdir: Path) -> str:
    """The job: the seed scored on val and test (no search) with ``unlabeled_lm``."""
    sizes = "".join(f"n_{split} = {n}\n" for split, n in SIZES.items())
    return (
        f'[dataset]\ntask = "word_problems"\n{sizes}\n[lm.task]\nmodel = "{MODEL}"\n\n'
        f'[runtime]\nworkdir = "{workdir.as_posix()}"\nmax_attempts = 2\n'
    )


def problems(code: int, stderr: str, stdout: str, store: Path) -> list[str]:
    """What is wrong with how the case's job ended (nothing: it passed)."""
    found = []
    if code != 0:
        found.append(f"exit code {code}")
    if traceback_in(stderr):
        found.append("traceback")
    evaluated = [line for line in stderr.splitlines() if " evaluated " in line]
    if len(evaluated) != 2 or any("failed" in line for line in evaluated):
        found.append(f"evaluated lines: {evaluated}")
    for split in ("val", "test"):
        said = f"{SIZES[split]} new rollouts, {SIZES[split]} unreadable)"
        if not any(f" on {split}: " in line and said in line for line in evaluated):
            found.append(f"no {split} line saying {said!r}")
    if "could not read the seed's reply" not in " ".join(stdout.split()):
        found.append("the report does not warn of the seed's unreadable replies")
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        states = db.execute("SELECT state, result FROM jobs").fetchall()
        rollouts = db.execute("SELECT status, score, error, attempt_count FROM rollouts").fetchall()
        evaluations = db.execute("SELECT score, error, feedback, extra FROM evaluations").fetchall()
    if [state for state, _ in states] != ["succeeded"]:
        return [*found, f"jobs: {[state for state, _ in states]}"]
    expected = SIZES["val"] + SIZES["test"]
    if len(rollouts) != expected or set(rollouts) != {("succeeded", 0.0, None, 1)}:
        found.append(f"rollouts (status, score, error, attempts): {sorted(set(rollouts))}")
    for score, error, feedback, extra in evaluations:
        unreadable = json.loads(extra).get("unreadable") or ""
        if score != 0.0 or error is not None or "must match the pattern" not in unreadable:
            found.append(
                f"an evaluation: score {score}, error {error!r}, unreadable {unreadable!r}"
            )
            break
        if not feedback.startswith("The reply could not be read: "):
            found.append(f"an evaluation's feedback: {feedback!r}")
            break
    test = (json.loads(states[0][1] or "{}").get("baseline_test")) or {}
    if (test.get("unreadable"), test.get("failed")) != (SIZES["test"], 0):
        found.append(f"the seed's test summary: {test}")
    return found


def run_case(folder: Path) -> list[str]:
    """Run the case in ``folder`` as a user would (``python -m emery train``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job.toml").write_text(config(folder / "work"))
    store = folder / "emery.db"
    done = run_emery(["train", "job.toml", "--store", str(store)], emery_env(), folder)
    return problems(done.returncode, done.stderr, done.stdout, store)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        found = run_case(Path(root))
    if args.verbose or found:
        for problem in found:
            print(f"  {problem}")
    print("unreadable replies: " + ("passed" if not found else f"{len(found)} problems"))
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
