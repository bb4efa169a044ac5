"""``[verifier] kind = "published"``: a verifier graph one job trained and published scores
another job's outputs, as its own job would run it (its graph, candidate and model)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest
from bad_input_support import one_error_line, run_cli
from test_verifier_graph import VERIFIER, traces

import emery
from emery.core.models import ChatMessage
from emery.lm import FakeLM
from emery.reports import published

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")

JUDGE = "Recompute the answer yourself; score 1 only if the given answer matches yours."


def judge_model() -> FakeLM:
    """``python/test_published_verifier:judge_model``: scores 1 when the answer in the
    chat is the problem's gold answer, else 0 with the right answer as the reason."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        content = messages[-1]["content"]
        question = content.removeprefix("Question: ").split("\nAnswer: ")[0]
        gold = js.gold(question)
        found = re.search(r"Answer: (-?\d+)", content)
        if gold is None or found is None:
            return json.dumps({"score": 0, "reason": "no answer to check"})
        right = int(found.group(1)) == gold
        return json.dumps({"score": int(right), "reason": f"the answer is {gold}"})

    return FakeLM(reply, model="fake/judge")


def judge_graph() -> dict[str, Any]:
    graph = json.loads(json.dumps(VERIFIER))
    graph["nodes"][0]["instruction"] = JUDGE
    graph["nodes"][0]["messages"] = [{"template": "Question: {input}\nAnswer: {output}"}]
    return graph


def publish_judge(tmp_path: Path, path: Path | None = None) -> Path:
    """A store (``path``, else a new one) where a verifier graph job ran and was published
    as ``answer-judge``."""
    data = traces()
    rows = {
        split: [{"id": e.id, "input": e.input, "expected": e.expected} for e in data.split(split)]
        for split in ("train", "val", "test")
    }
    (tmp_path / "traces.json").write_text(json.dumps(rows))
    config = {
        "job": {"algorithm": "baseline"},
        "dataset": {"path": str(tmp_path / "traces.json")},
        "system": judge_graph(),
        "verifier": {"kind": "agreement"},
        "lm": {"task": {"model": "python/test_published_verifier:judge_model"}},
        "runtime": {"workdir": str(tmp_path / ".emery")},
    }
    path = path or tmp_path / "judges.db"
    job = emery.Job.create(config, store=str(path)).start(wait=True)
    assert job.status() == "succeeded"
    published.publish(emery.open_store(path), job.id, "answer-judge")
    return path


def test_a_published_verifier_graph_scores_another_jobs_outputs(tmp_path: Path) -> None:
    judges = publish_judge(tmp_path)
    means = {}
    for verifier in (
        {"kind": "numeric"},
        {"kind": "published", "name": "answer-judge", "version": 1, "store": str(judges)},
    ):
        config = js.search_config(tmp_path / verifier["kind"], algorithm="baseline", settings={})
        config["verifier"] = verifier
        job = emery.Job.create(config, store=str(tmp_path / "jobs.db")).start(wait=True)
        assert job.status() == "succeeded", job.record().error
        result = job.result()
        assert result.baseline_test is not None
        means[verifier["kind"]] = (result.baseline_val, result.baseline_test.mean)
    assert means["published"] == means["numeric"]
    assert 0 < means["numeric"][1] < 1, "some answers right, some wrong: the judge must tell"


@pytest.mark.parametrize(
    ("verifier", "says"),
    [
        ({"kind": "published", "name": "answer-judge"}, "version"),
        ({"kind": "published", "name": "answer-judge", "version": 9}, "no version 9"),
        ({"kind": "published", "name": "nobody", "version": 1}, "no published prompt 'nobody'"),
    ],
)
def test_a_bad_published_verifier_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], verifier: dict[str, Any], says: str
) -> None:
    judges = publish_judge(tmp_path)
    config = js.search_config(tmp_path / "job", algorithm="baseline", settings={})
    config["verifier"] = {**verifier, "store": str(judges)}
    (tmp_path / "job.json").write_text(json.dumps(config))
    code = run_cli(["train", str(tmp_path / "job.json"), "--store", str(tmp_path / "j.db")])
    assert code != 0
    assert says in one_error_line(capsys.readouterr().err)
