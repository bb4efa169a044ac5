"""``benchmarks/production/loop.py`` with its scripted models: traffic through the prompt
route, thumbs by trace id, a dataset from the traces, a search, a publish, the next stretch
scored before and after, and a second round warm-started from the first."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from emery.data.tasks import builtin_task

PRODUCTION = Path(__file__).resolve().parents[2] / "benchmarks" / "production"
if str(PRODUCTION) not in sys.path:
    sys.path.insert(0, str(PRODUCTION))

import loop  # noqa: E402


def questions_file(path: Path) -> Path:
    """Word problems in the shared datasets' shape: 2 train, 4 val, 60 test rows."""
    data = builtin_task("word_problems").dataset(seed=0, n_train=2, n_val=4, n_test=60)
    rows = [
        {"id": e.id, "input": e.input, "expected": e.expected, "split": split}
        for split in ("train", "val", "test")
        for e in getattr(data, split)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_the_loop_lifts_the_next_stretch_and_warm_starts_round_two(tmp_path: Path) -> None:
    dataset = questions_file(tmp_path / "questions.jsonl")
    out = tmp_path / "prod.json"
    args = ["--model", "fake", "--dataset", str(dataset), "--offset", "0", "--traffic", "20"]
    report = loop.main([*args, "--stretch", "20", "--budget", "30", "--out", str(out)])

    assert json.loads(out.read_text()) == report
    first, second = report["rounds"]
    assert report["traffic_rows"] == "6-25"  # the test rows, in file order
    assert (first["served_version"], first["published_version"]) == (1, 2)
    assert (second["served_version"], second["published_version"]) == (2, 3)
    assert first["instruction_before"] == loop.SEED
    assert "carefully" in first["instruction_after"]  # what the scripted writer proposes
    # thumbs on 30% of each stretch; the scripted judge ranks them as the user did
    assert (first["labeled"], first["examples"]) == (6, 20)
    assert 0 < first["thumbs_up"] < 6  # the user's thumbs: up on the right replies only
    assert 0 < first["data_right"]["mean"] < 0.5
    assert second["data_right"]["mean"] == 1.0  # round 2's data: the calls v2 answered
    assert (first["judge"]["n"], first["judge"]["rho"]) == (6, 1.0)
    assert first["label_line"].startswith("labels: 6 of 6 examples have feedback (100%)")
    # the next stretch: v1 right on about a third, v2 on all, paired on the same 20 calls
    before, after = first["score"]["before"], first["score"]["after"]
    assert (before["n"], after["n"], after["mean"]) == (20, 20, 1.0)
    assert before["mean"] < 0.5
    assert first["score"]["difference"]["verdict"] == "better"
    assert second["warm_start"] == first["job"]
    assert second["warm_rescored"]  # round 1's candidates, scored again on round 2's val
    assert second["data_rows"] == first["stretch_rows"] == "26-45"
    assert second["score"]["before"]["mean"] == 1.0  # v2, now served, asked on the side


def test_the_user_reads_the_last_answer_line() -> None:
    assert loop.correct("3 + 4 = 7\nAnswer: 7", 7.0) == 1.0
    assert loop.correct("Answer: 5\nwait, no.\nAnswer: 1,250", 1250.0) == 1.0
    assert loop.correct("Answer: 2.50", 2.5) == 1.0
    assert loop.correct("The answer is 7.", 7.0) == 0.0  # not the format the prompt asked for
    assert loop.correct("Answer: 8", 7.0) == 0.0
    # the small model's LaTeX on the Answer line: the number it boxed
    assert loop.correct("so 140 + 303 = 443\n\nAnswer: \\(\\boxed{443}\\)", 443.0) == 1.0
    assert loop.correct("Answer: \\boxed{8}", 8.0) == 1.0
    assert loop.correct("Answer: in 2 rows there are \\(\\boxed{28}\\) birds.", 28.0) == 1.0
    assert loop.correct("Answer: 2 rows of 14, so 28", 28.0) == 0.0  # the line's first number
    assert loop.correct("Therefore she has \\(\\boxed{8}\\) apples.", 8.0) == 0.0  # no Answer line
