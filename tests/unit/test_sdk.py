"""The Python SDK: ``emery.optimize`` and ``emery.Job``, also from inside a running loop."""

from __future__ import annotations

import ast
import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest

import emery
from emery.core.errors import EmeryError
from emery.core.events import Event
from emery.core.models import Dataset, Example
from emery.data.tasks import builtin_task
from emery.jobs.manage import run_job
from emery.reports import JobResult
from emery.store import MemoryStore, NewJob, SQLiteStore
from emery.systems.prompt_program import PromptProgram
from emery.verifiers.text import ExactMatch

pytestmark = pytest.mark.usefixtures("random_search_algorithm")

MODELS = {
    "lm": "python/jobs_support:task_lm",
    "reflection_lm": "python/jobs_support:reflection_lm",
}


def test_optimize_in_one_call(tmp_path: Path) -> None:
    seen: list[Event] = []
    result = emery.optimize(
        None,
        {"task": "word_problems", "n_train": 6, "n_val": 8, "n_test": 4},
        algorithm="random_search",
        budget=200,
        verifier="numeric",
        settings={"iterations": 4},
        runtime={"workdir": str(tmp_path / ".emery")},
        store=MemoryStore(),
        on_event=seen.append,
        lm="python/jobs_support:careful_task_lm",
        reflection_lm=MODELS["reflection_lm"],
    )
    assert isinstance(result, JobResult)
    assert result.state == "succeeded"
    # the seed fails every question; the first reflected instruction answers them all
    assert result.baseline_val == 0.0
    assert result.best_val == 1.0
    assert result.best_candidate is not None
    assert "carefully" in result.best_candidate.components["solve"]
    assert [e.kind for e in seen][-1] == "succeeded"
    assert emery.Result is JobResult


def test_the_sdk_names_resolve_on_first_use() -> None:
    code = (
        "import sys, emery; "
        "print(sorted(m for m in sys.modules if m.startswith(('emery.jobs', 'pydantic'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"  # `import emery` imports none of them
    assert "optimize" in emery.__all__
    assert "Result" in dir(emery)
    for name in emery.__all__:
        assert getattr(emery, name) is not None
    assert emery.Result is emery.JobResult is JobResult
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = emery.nothing


def test_the_typed_exports_are_the_exports() -> None:
    """``emery/__init__.py`` lists its exports twice (typed imports for mypy, ``EXPORTS``
    for the first read): the two lists must agree."""
    tree = ast.parse(Path(emery.__file__).read_text(encoding="utf-8"))
    block = next(
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    )
    typed: dict[str, str] = {}
    for statement in block.body:
        if isinstance(statement, ast.ImportFrom):
            for alias in statement.names:
                typed[alias.asname or alias.name] = f"{statement.module}:{alias.name}"
        elif isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Name):
            typed[ast.unparse(statement.targets[0])] = typed[statement.value.id]
    assert typed == emery.EXPORTS


def test_optimize_with_python_objects(tmp_path: Path) -> None:
    task = builtin_task("word_problems")
    dataset = task.dataset(seed=0, n_train=4, n_val=6, n_test=3)
    store = MemoryStore()
    result = emery.optimize(
        PromptProgram(task.program),
        dataset,
        algorithm="random_search",
        budget={"metric_calls": 100},
        verifier=ExactMatch(),
        lm=js.task_lm(),
        reflection_lm=js.reflection_lm(),
        settings={"iterations": 2},
        runtime={"workdir": str(tmp_path / ".emery")},
        store=store,
    )
    job = store.get_job(result.job_id)
    assert job.metadata["in_process_inputs"] == ["verifier", "lms"]
    saved = Path(job.config["dataset"]["path"])
    assert saved.parent == tmp_path / ".emery" / "datasets"
    assert job.resolved_config is not None
    assert job.resolved_config["system"]["stages"][0]["name"] == "solve"
    assert result.dataset_sizes == {"train": 4, "val": 6, "test": 3}
    # the system and the dataset are written down; the verifier and the models are not,
    # so a copy of this job cannot run without them
    store.create_job(
        NewJob(
            id="copy",
            name=job.name,
            algorithm=job.algorithm,
            config=job.config,
            resolved_config=job.resolved_config,
            metadata=job.metadata,
            base_dir=job.base_dir,
        )
    )
    with pytest.raises(EmeryError, match=r"created from Python objects \(verifier, lms\)"):
        run_job(store, "copy")
    assert store.get_job("copy").state == "created"


def config(tmp_path: Path, iterations: int = 4) -> dict[str, Any]:
    return js.search_config(tmp_path / ".emery", iterations=iterations)


def test_a_job_from_creation_to_inference(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "emery.db")
    job = emery.Job.create(config(tmp_path), store=store, name="sdk-run")
    assert job.status() == "created"
    seen: list[str] = []
    final = job.stream_until_complete(lambda e: seen.append(e.kind))
    assert final.state == "succeeded"
    assert seen[0] == "created"
    assert seen[-1] == "succeeded"
    assert [e.kind for e in job.events(since=len(seen) - 1)] == ["succeeded"]
    result = job.result()
    assert result.best_candidate == job.best_candidate()
    question = builtin_task("word_problems").dataset(seed=0, n_train=6, n_val=8, n_test=4).val[0]
    answer = job.run_inference(question.input)
    assert answer in (str(question.expected), str(int(question.expected) + 1))
    again = emery.Job.get("sdk-run", store=store)
    assert again.id == job.id
    assert repr(again) == f"Job('{job.id}', state='succeeded')"


def test_pause_and_resume_from_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(js.DELAY_ENV, "0.02")
    store = MemoryStore()
    job = emery.Job.create(config(tmp_path, iterations=30), store=store).start()
    js.wait_until(lambda: store.get_checkpoint(job.id) is not None)
    assert job.pause().state == "paused"
    assert job.wait().state == "paused"
    monkeypatch.setenv(js.DELAY_ENV, "0")
    assert job.resume(wait=True).status() == "succeeded"
    assert [e.kind for e in job.events() if e.kind in ("paused", "resumed")] == [
        "paused",
        "resumed",
    ]


def test_cancel_from_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(js.DELAY_ENV, "0.02")
    store = MemoryStore()
    job = emery.Job.create(config(tmp_path, iterations=30), store=store).start()
    js.wait_until(lambda: store.get_checkpoint(job.id) is not None)
    assert job.cancel().state == "cancelled"
    assert job.result().state == "cancelled"


def test_the_sdk_works_inside_a_running_event_loop(tmp_path: Path) -> None:
    async def notebook_cell() -> tuple[str, Any]:
        job = emery.Job.create(config(tmp_path, iterations=2), store=MemoryStore())
        final = job.stream_until_complete()
        example = Example(id="x", input={"question": "unknown question"})
        return final.state, job.run_inference(example.input)

    state, answer = asyncio.run(notebook_cell())
    assert state == "succeeded"
    assert answer == "0"


def test_a_failed_optimization_raises(tmp_path: Path) -> None:
    dataset = Dataset(val=[Example(id="a", input={"question": "q"}, expected="1")])
    with pytest.raises(EmeryError, match="failed: budget exhausted"):
        emery.optimize(
            None,
            "word_problems",
            algorithm="random_search",
            budget=1,
            runtime={"workdir": str(tmp_path)},
            store=MemoryStore(),
            **MODELS,
        )
    assert dataset.val  # the list form is accepted too:
    result = emery.optimize(
        {
            "kind": "prompt_program",
            "stages": [{"name": "solve", "messages": [{"template": "{question}"}]}],
        },
        dataset.val,
        algorithm="baseline",
        runtime={"workdir": str(tmp_path)},
        store=MemoryStore(),
        lm="python/jobs_support:task_lm",
    )
    assert result.dataset_sizes["val"] == 1
