"""`emery train` resolves a new prompt job's config into its dataset, system and verifier
once: the run takes what creating the job resolved; a resumed job resolves it itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jobs_support as js
import pytest

from emery.cli.app import main
from emery.config import load_config, resolve
from emery.jobs import runtime, search_kind
from emery.jobs.manage import create_job
from emery.store import SQLiteStore

pytestmark = pytest.mark.usefixtures("random_search_algorithm")

CONFIG = """
[job]
algorithm = "random_search"

[dataset]
task = "word_problems"
n_train = 4
n_val = 4
n_test = 2

[lm.task]
model = "python/jobs_support:task_lm"

[lm.reflection]
model = "python/jobs_support:reflection_lm"

[verifier]
kind = "numeric"

[algorithm.random_search]
iterations = 1
"""


def run_cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        main(args)
    code = info.value.code
    return code if isinstance(code, int) else (0 if code is None else 1)


def test_train_resolves_a_new_job_s_config_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EMERY_STORE", raising=False)
    monkeypatch.setenv("PYTHONPATH", js.worker_env()["PYTHONPATH"])
    resolved: list[str] = []
    for module in (resolve, runtime, search_kind):
        for name in ("resolve_dataset", "resolve_system", "resolve_verifier"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, _counted(getattr(module, name), name, resolved))
    (tmp_path / "job.toml").write_text(CONFIG)
    assert run_cli(["train", "job.toml", "--stream-format", "none", "--quiet"]) == 0
    assert sorted(resolved) == ["resolve_dataset", "resolve_system", "resolve_verifier"]
    store = SQLiteStore(Path(".emery") / "emery.db")
    [job] = store.list_jobs().items
    assert job.state == "succeeded"
    resolved.clear()
    new = create_job(store, load_config(tmp_path / "job.toml"), config_path=tmp_path / "job.toml")
    assert len(resolved) == 3
    assert run_cli(["jobs", "resume", new.id, "--stream-format", "none", "--quiet"]) == 0
    assert len(resolved) == 6  # a run this process did not create resolves the config
    assert store.get_job(new.id).state == "succeeded"


def _counted(function: Any, name: str, calls: list[str]) -> Any:
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return function(*args, **kwargs)

    return counted
