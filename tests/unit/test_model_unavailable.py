"""A reflection (or proposer) model that fails after its retries pauses the job with the
reason, resumable once the model answers again; it never fails the job for good."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest

from emery.cli.app import main
from emery.config import parse_config
from emery.config.resolve import JobInputs
from emery.core.models import ChatMessage
from emery.jobs import JobEngine, create_job, run_job
from emery.lm import Completion
from emery.store import MemoryStore, SQLiteStore

pytestmark = pytest.mark.usefixtures("random_search_algorithm")

UNREACHABLE = {"model": "openai/m", "base_url": "http://127.0.0.1:9/v1", "max_attempts": 2}


class DownLM:
    """A reflection model whose server is down: every call raises."""

    model = "fake/down"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        self.calls += 1
        raise ConnectionRefusedError("connection refused")


def test_a_failed_reflection_call_pauses_the_job_and_a_resume_finishes_it(
    tmp_path: Path,
) -> None:
    other = MemoryStore()
    config = js.search_config(tmp_path / ".emery", iterations=4)
    reference = run_job(other, create_job(other, parse_config(config), base_dir=tmp_path).id)
    store = MemoryStore()
    down = DownLM()
    inputs = JobInputs(lms={"task": js.task_lm(), "reflection": down})
    job_id = create_job(store, parse_config(config), base_dir=tmp_path, inputs=inputs).id
    job = run_job(store, job_id, engine=JobEngine(store, job_id, inputs=inputs))
    assert job.state == "paused"
    assert job.error is None
    assert job.stop_reason == (
        "the reflection model fake/down failed: ConnectionRefusedError: connection refused"
        "; resume the job when it answers again"
    )
    assert down.calls == 1
    assert store.get_checkpoint(job_id).number == 0  # type: ignore[union-attr]
    back = JobInputs(lms={"task": js.task_lm(), "reflection": js.reflection_lm()})
    resumed = run_job(store, job_id, engine=JobEngine(store, job_id, inputs=back))
    assert resumed.state == "succeeded"
    assert (resumed.best_candidate_id, resumed.best_score) == (
        reference.best_candidate_id,
        reference.best_score,
    )


def test_train_prints_one_line_when_the_reflection_endpoint_is_down_at_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    config = js.search_config(tmp_path / ".emery", iterations=2)
    lines = [
        "[job]",
        'algorithm = "random_search"',
        "[dataset]",
        'task = "word_problems"',
        "n_train = 6",
        "n_val = 8",
        "n_test = 4",
        "[lm.task]",
        f'model = "{config["lm"]["task"]["model"]}"',
        "[lm.reflection]",
        *(f"{key} = {value!r}".replace("'", '"') for key, value in UNREACHABLE.items()),
        "[verifier]",
        'kind = "numeric"',
    ]
    (tmp_path / "job.toml").write_text("\n".join(lines) + "\n")
    store_path = tmp_path / "emery.db"
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "job.toml", "--store", str(store_path), "--stream-format", "none"])
    assert exit_info.value.code not in (0, None)
    err = capsys.readouterr().err
    [line] = [text for text in err.splitlines() if "cannot reach" in text]
    assert "lm.reflection: openai/m: cannot reach http://127.0.0.1:9/v1" in line
    assert "Traceback" not in err
    [job] = SQLiteStore(store_path).list_jobs().items
    assert job.state == "failed"  # before the seed's evaluation: nothing to keep
