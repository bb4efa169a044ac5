"""Train an example of ``examples/`` with scripted models, as its job.toml describes it.

Imported as ``examples_support`` (``tests/unit`` is on ``sys.path``). ``copy_example``
copies an example's folder into the test's directory and puts it on ``sys.path`` (as
running from that folder does); ``train_example`` reads its ``job.toml``, replaces what
the test names with dotted keys (models by ``python/<module>:<attr>`` fakes, a smaller
budget, the task app's URL) and runs the job in an in-memory store.
"""

from __future__ import annotations

import json
import shutil
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from emery.config import parse_config
from emery.core.spans import SpanRecord
from emery.jobs import create_job, run_job
from emery.reports.job_result import JobResult
from emery.store import MemoryStore
from emery.store.records import EvaluationFilter, RolloutFilter, SpanFilter
from emery.tracing import conventions as sc

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@dataclass
class Trained:
    store: MemoryStore
    job_id: str
    result: JobResult

    def spans(self, operation: str = "chat") -> list[SpanRecord]:
        """The job's stored spans of a GenAI ``operation`` (``chat``: LM calls,
        ``execute_tool``: tool calls), of every rollout and attempt."""
        spans = self.store.list_spans(SpanFilter(job_id=self.job_id), limit=None).items
        return [s for s in spans if s.attributes.get(sc.GEN_AI_OPERATION_NAME) == operation]

    def feedback(self, candidate_id: str, split: str = "val") -> list[str]:
        """The verifier's feedback on each of a candidate's runs on ``split``."""
        found = EvaluationFilter(job_id=self.job_id, candidate_id=candidate_id, split=split)
        return [e.result.feedback for e in self.store.list_evaluations(found, limit=None).items]

    def rollout_count(self) -> int:
        return len(self.store.list_rollouts(RolloutFilter(job_id=self.job_id), limit=None).items)


def input_messages(span: SpanRecord) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = json.loads(span.attributes[sc.GEN_AI_INPUT_MESSAGES])
    return messages


def example_config(folder: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    """``folder/job.toml`` with ``overrides`` (dotted keys) applied."""
    data = tomllib.loads((folder / "job.toml").read_text(encoding="utf-8"))
    for dotted, value in overrides.items():
        *parents, key = dotted.split(".")
        table = data
        for part in parents:
            table = table.setdefault(part, {})
        table[key] = value
    return data


def copy_example(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of ``examples/<name>`` in ``tmp_path``, importable (on ``sys.path``); its
    modules are imported afresh from the copy. What a hand run left there is not copied."""
    folder = tmp_path / name
    left = shutil.ignore_patterns("__pycache__", ".emery", "results")
    shutil.copytree(EXAMPLES / name, folder, ignore=left)
    monkeypatch.syspath_prepend(str(folder))
    for module in folder.glob("*.py"):
        sys.modules.pop(module.stem, None)
    return folder


def train_example(folder: Path, **overrides: Any) -> Trained:
    """Run the copied example ``folder`` as ``emery train job.toml`` run there would, in an
    in-memory store (its results are written in the copy).

    ``overrides`` use ``__`` for dots: ``lm__task__model="python/m:lm"``."""
    dotted = {key.replace("__", "."): value for key, value in overrides.items()}
    dotted.setdefault("runtime.workdir", str(folder / ".emery"))
    config = example_config(folder, dotted)
    store = MemoryStore()
    job = create_job(store, parse_config(config), given=config, base_dir=folder)
    record = run_job(store, job.id)
    assert record.state == "succeeded", record.error
    assert record.result is not None
    return Trained(store, job.id, JobResult.model_validate(record.result))
