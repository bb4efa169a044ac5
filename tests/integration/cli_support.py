"""Running the ``emery`` CLI from integration tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def emery_json(args: list[str], env: dict[str, str], cwd: Path | None = None) -> Any:
    """``python -m emery ARGS`` (a ``--json`` command): its parsed stdout, after exit 0."""
    done = subprocess.run(
        [sys.executable, "-m", "emery", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
