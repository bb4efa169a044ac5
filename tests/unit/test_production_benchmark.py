"""``benchmarks/production/loop.py`` with its scripted models: traffic through the prompt
route, thumbs by trace id, a dataset from the traces, a search, a publish, the next stretch
scored before and after, and a second round warm-started from the first; for both
applications of ``apps.py`` (the SVAMP math helper, the CLINC intent router)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from emery.data.tasks import builtin_task
from emery.data.trace_template import TraceTemplate

PRODUCTION = Path(__file__).resolve().parents[2] / "benchmarks" / "production"
if str(PRODUCTION) not in sys.path:
    sys.path.insert(0, str(PRODUCTION))

import apps  # noqa: E402
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
    assert first["instruction_before"] == apps.SVAMP.seed
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
    correct = apps.correct_number
    assert correct("3 + 4 = 7\nAnswer: 7", 7.0) == 1.0
    assert correct("Answer: 5\nwait, no.\nAnswer: 1,250", 1250.0) == 1.0
    assert correct("Answer: 2.50", 2.5) == 1.0
    assert correct("The answer is 7.", 7.0) == 0.0  # not the format the prompt asked for
    assert correct("Answer: 8", 7.0) == 0.0
    # the small model's LaTeX on the Answer line: the number it boxed
    assert correct("so 140 + 303 = 443\n\nAnswer: \\(\\boxed{443}\\)", 443.0) == 1.0
    assert correct("Answer: \\boxed{8}", 8.0) == 1.0
    assert correct("Answer: in 2 rows there are \\(\\boxed{28}\\) birds.", 28.0) == 1.0
    assert correct("Answer: 2 rows of 14, so 28", 28.0) == 0.0  # the line's first number
    assert correct("Therefore she has \\(\\boxed{8}\\) apples.", 8.0) == 0.0  # no Answer line


def test_the_router_loop_serves_the_label_list_and_thumbs_by_the_gold_label(
    tmp_path: Path,
) -> None:
    out = tmp_path / "router.json"
    args = ["--model", "fake", "--app", "clinc", "--traffic", "20", "--rounds", "1"]
    report = loop.main([*args, "--stretch", "20", "--feedback-share", "1", "--out", str(out)])

    assert report["application"]["name"] == "intent-router"
    assert report["traffic_rows"] == "390-409"  # clinc15.jsonl: test rows 120-139
    (first,) = report["rounds"]
    assert first["instruction_before"] == apps.CLINC.seed
    assert "Reply with the intent label only." in first["instruction_after"]
    # every call's prompt read back through the template: query and label list recovered
    assert first["matched"] == first["examples"] == 20
    assert first["dataset_summary"][0].startswith("selected 20 chat calls: 20 matched, 0 un")
    # a thumb on every call: up exactly on the replies that name the gold label
    right = first["data_right"]["mean"]
    assert 0 < right < 0.5  # the scripted model is right on about a third under v1
    assert (first["labeled"], first["thumbs_up"]) == (20, round(20 * right))
    assert (first["judge"]["n"], first["judge"]["rho"]) == (20, 1.0)
    after, before = first["score"]["after"], first["score"]["before"]
    assert (after["n"], after["mean"]) == (20, 1.0)
    assert before["mean"] < 0.5
    assert first["score"]["difference"]["verdict"] == "better"


def test_the_router_asks_with_the_row_label_list_and_the_template_reads_it_back() -> None:
    (question,) = apps.CLINC.load(apps.CLINC.dataset, "test", 0, 1)
    labels = "bill_balance, calendar_update, confirm_reservation, credit_limit"
    assert question.fields["labels"].startswith(labels)  # the row's list, as it stands
    message = apps.CLINC.message(question)
    assert message == f"Request: {question.fields['query']}\nIntents: {question.fields['labels']}"
    found = TraceTemplate.from_text(apps.CLINC.template).match(
        [{"role": "system", "content": "v1"}, {"role": "user", "content": message}]
    )
    assert (found.status, found.fields) == ("matched", question.fields)
    right, wrong = apps.CLINC.sample_replies(question)
    assert apps.CLINC.correct(right, question.gold) == 1.0
    assert apps.CLINC.correct(wrong, question.gold) == 0.0
    assert wrong in apps.labels_of(question)


def test_the_router_user_reads_the_last_line_as_the_quality_verifier_does() -> None:
    assert apps.correct_label("pto_used", "pto_used") == 1.0
    assert apps.correct_label("  PTO_Used.\n", "pto_used") == 1.0  # case and punctuation
    assert apps.correct_label("pto used", "pto_used") == 1.0  # "_" is punctuation too
    assert apps.correct_label("The request is about leave.\npto_used", "pto_used") == 1.0
    assert apps.correct_label("pto_used\nor maybe w2", "pto_used") == 0.0  # the last line
    assert apps.correct_label("The intent is pto_used.", "pto_used") == 0.0  # not the label alone
    assert apps.correct_label("w2", "pto_used") == 0.0
    assert apps.correct_label("", "pto_used") == 0.0
