"""Run the bad-input corpus as a user would: each case ``python -m emery ...`` in its own
folder, with a scripted model and a store holding one finished job.

Usage: python benchmarks/reliability/run.py [-k NAME_FRAGMENT] [--jobs 2] [--verbose]

Cases that set file permissions run as ``nobody`` (``setpriv``) when this runs as root.
Exits 1 when any case fails its checks (see ``checks.py``)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cases import Case, all_cases  # noqa: E402
from checks import (  # noqa: E402
    Outcome,
    check,
    checkpoint,
    prepare,
    restore_modes,
    seed_config,
    store_rows,
)

UNPRIVILEGED = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def emery(args: list[str], cwd: Path, store: Path, *, as_nobody: bool = False) -> tuple[int, str]:
    """``python -m emery ARGS`` in ``cwd``; its exit code and stderr."""
    env = {**os.environ, "PYTHONPATH": str(HERE), "EMERY_STORE": str(store)}
    env |= {"EMERY_MODEL_DIR": str(cwd / "models"), "HOME": str(cwd), "COLUMNS": "200"}
    env.pop("EMERY_API_KEY", None)
    env.pop("EMERY_TASK_APP_KEY", None)
    command = [*(UNPRIVILEGED if as_nobody else []), sys.executable, "-m", "emery", *args]
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    return done.returncode, done.stderr


def run_case(number: int, case: Case, root: Path, template: Path) -> Outcome | None:
    """Case ``number`` in its own folder; None when it cannot run here (permissions as
    root without setpriv)."""
    folder = root / f"case-{number:03d}"
    as_nobody = bool(case.modes) and os.geteuid() == 0
    if as_nobody and shutil.which("setpriv") is None:
        return None
    store, args = prepare(case, folder, template)
    if as_nobody:
        for path in (folder, *folder.rglob("*")):
            if not (case.modes and path.relative_to(folder).as_posix() in case.modes):
                os.chown(path, 65534, 65534)
    before = store_rows(store)
    try:
        code, stderr = emery(args, folder, store, as_nobody=as_nobody)
    finally:
        restore_modes(case, folder)
    return check(case, code, stderr, store, before)


def seeded_store(root: Path) -> Path:
    """A store holding one succeeded job, made by ``emery train`` with the scripted model."""
    store = root / "template" / "emery.db"
    store.parent.mkdir(parents=True)
    code, stderr = emery(["train", str(seed_config(store.parent))], store.parent, store)
    if code != 0:
        raise SystemExit(f"could not seed the store:\n{stderr}")
    checkpoint(store)
    return store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="run only cases whose name holds this")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--verbose", action="store_true", help="print every case's error line")
    args = parser.parse_args()
    cases = [case for case in all_cases() if args.k.lower() in case.name.lower()]
    root = Path(tempfile.mkdtemp(prefix="emery-reliability-"))
    os.chmod(root, 0o755)
    template = seeded_store(root)
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = [pool.submit(run_case, n, case, root, template) for n, case in enumerate(cases)]
        outcomes = [run.result() for run in runs]
    ran = [outcome for outcome in outcomes if outcome is not None]
    failed = [outcome for outcome in ran if outcome.problems]
    for outcome in ran:
        mark = "FAIL" if outcome.problems else "ok  "
        if outcome.problems or args.verbose:
            detail = "; ".join([*outcome.problems, outcome.error_line])
            print(f"{mark} {outcome.case.name} (exit {outcome.code}): {detail}")
    skipped = len(outcomes) - len(ran)
    print(
        f"{len(ran) - len(failed)} of {len(ran)} bad-input cases passed"
        + (f", {skipped} skipped" if skipped else "")
    )
    shutil.rmtree(root, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
