"""``benchmarks/production/loop.py`` with its scripted models: traffic through the prompt
route, thumbs by trace id, a dataset from the traces, a search, a publish, the next stretch
scored before and after, and a second round warm-started from the first; for both
applications of ``apps.py`` (the SVAMP math helper, the CLINC intent router)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from emery.algorithms.evidence import paired
from emery.core.models import Example
from emery.data.tasks import builtin_task
from emery.data.trace_template import TraceTemplate
from emery.evaluation import Evaluator
from emery.lm import FakeLM
from emery.systems import PromptProgram, PromptProgramConfig
from emery.systems.parsers import ParseError, ParserConfig
from emery.verifiers.feedback_score import FeedbackScore

PRODUCTION = Path(__file__).resolve().parents[2] / "benchmarks" / "production"
if str(PRODUCTION) not in sys.path:
    sys.path.insert(0, str(PRODUCTION))

import apps  # noqa: E402
import gate  # noqa: E402
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


def test_the_served_version_stays_when_val_cannot_show_the_proposal_better(
    tmp_path: Path,
) -> None:
    dataset = questions_file(tmp_path / "questions.jsonl")
    out = tmp_path / "prod.json"
    args = ["--model", "fake", "--dataset", str(dataset), "--offset", "0", "--traffic", "20"]
    report = loop.main([*args, "--stretch", "20", "--budget", "30", "--out", str(out)])

    assert json.loads(out.read_text()) == report
    first, second = report["rounds"]
    assert report["traffic_rows"] == "6-25"  # the test rows, in file order
    assert first["instruction_before"] == apps.SVAMP.seed
    # thumbs on 30% of the stretch: 6 labeled, 3 on val, too few to show a proposal better:
    # the search keeps the served text (mipro.winner), and the gate keeps v1
    assert (first["labeled"], first["examples"]) == (6, 20)
    assert 0 < first["thumbs_up"] < 6  # the user's thumbs: up on the right replies only
    assert 0 < first["data_right"]["mean"] < 0.5
    assert (first["judge"]["n"], first["judge"]["rho"]) == (6, 1.0)
    assert first["label_line"].startswith("labels: 6 of 6 examples have feedback (100%)")
    assert first["instruction_after"] == apps.SVAMP.seed
    gate = first["gate"]
    assert (gate["publish"], gate["n"], gate["verdict"]) == (False, 3, "undecided")
    assert gate["decision"] == "kept v1: not shown better"
    assert gate["result"] is None  # the publish request was rejected, with the evidence
    assert gate["low"] < 0 < gate["high"]
    assert (first["served_version"], first["published_version"]) == (1, 1)
    assert first["proposed"] == "proposed"
    # the next stretch asks the job's winner on the side: the served text, the same replies
    before, after = first["score"]["before"], first["score"]["after"]
    assert (before["n"], after["n"]) == (20, 20)
    assert before["mean"] == after["mean"] < 0.5
    # round 2: v1 still served; its data are all the calls v1 answered, warm-started, and
    # round 1's programs rescored on round 2's val do not replace the served text there
    assert (second["served_version"], second["published_version"]) == (1, 1)
    assert second["data_rows"] == "6-45"
    assert (second["labeled"], second["examples"]) == (12, 40)
    assert second["warm_start"] == first["job"]
    assert second["warm_rescored"]  # round 1's candidates, scored again on round 2's val
    assert second["instruction_after"] == apps.SVAMP.seed
    assert second["score"]["before"]["mean"] < 0.5  # v1, still live


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
    # val (the newest 10 labeled calls) shows the proposal better: the gate publishes it
    gate = first["gate"]
    assert (gate["publish"], gate["n"], gate["verdict"]) == (True, 10, "better")
    assert gate["low"] > 0
    assert (first["published_version"], first["proposed"]) == (2, "v2")
    assert gate["result"] == "intent-router version 2"  # the approved request published it
    after, before = first["score"]["after"], first["score"]["before"]
    assert (after["n"], after["mean"]) == (20, 1.0)  # v2, live
    assert before["mean"] < 0.5  # v1, on the side
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


def test_the_reviewer_publishes_only_what_the_paired_val_scores_show_better() -> None:
    served = [float(i < 2) for i in range(10)]  # right on 2 of 10
    better = gate.decide(paired([float(i < 9) for i in range(10)], served), served_version=2)
    assert (better.publish, better.decision) == (True, "published: shown better")
    assert (better.evidence.n, better.evidence.verdict) == (10, "better")
    # right on one example more than the served version: not shown better
    slightly = [*served[:5], 1.0, *served[6:]]
    kept = gate.decide(paired(slightly, served), served_version=2)
    assert (kept.publish, kept.decision) == (False, "kept v2: not shown better")
    assert kept.evidence.low < 0 < kept.evidence.high
    assert kept.reason.startswith("kept v2: not shown better (val: n = 10, proposed - served")
    # no example both were run on: no evidence, nothing published
    assert not gate.decide(None, served_version=1).publish


def feedback_example(recorded: str, thumb: float, fields: dict[str, str]) -> Example:
    """A call from the traces: the recorded reply as expected, its thumb as feedback."""
    return Example(id="call", input=fields, expected=recorded, meta={"feedback": {"score": thumb}})


@pytest.mark.parametrize(
    ("app", "fields", "recorded", "unreadable", "readable"),
    [
        (
            apps.CLINC,
            {"query": "how much pto is left", "labels": "pto_used, w2"},
            "w2",
            'The request falls under the intent "pto_used".',
            "pto_used",
        ),
        (
            apps.SVAMP,
            {"question": "3 and 4 apples?"},
            "3 + 4 = 8\nAnswer: 8",
            "So she has 7 apples.",
            "3 + 4 = 7\nAnswer: 7",
        ),
    ],
)
async def test_a_reply_the_application_cannot_read_scores_0_in_the_search(
    app: apps.Application, fields: dict[str, str], recorded: str, unreadable: str, readable: str
) -> None:
    program = PromptProgram(
        PromptProgramConfig.model_validate({"stages": [loop.stage(app, app.seed, 24)]})
    )
    example = feedback_example(recorded, 0.0, fields)  # the recorded reply: thumbed down

    async def score(reply: str) -> tuple[float, str | None, str | None]:
        evaluator = Evaluator(program, FeedbackScore(), FakeLM(lambda _: reply))
        found = await evaluator.evaluate(program.seed_candidate(), [example], "val")
        return found.results[0].score, found.results[0].unreadable, found.results[0].error

    assert app.correct(unreadable, 7.0 if app is apps.SVAMP else "pto_used") == 0.0
    low, why, error = await score(unreadable)
    assert low == 0.0  # unlike the thumbed-down reply, but unreadable: not a good reply
    assert "must match the pattern" in (why or "")
    assert error is None  # a wrong answer, not a failed run
    high, why, error = await score(readable)
    assert (why, error) == (None, None)
    assert high > 0.0


def test_the_router_parser_reads_one_label_on_the_last_line() -> None:
    parser = ParserConfig.model_validate(apps.CLINC.reply_parser)
    assert parser.parse("  PTO_Used.\n") == "PTO_Used"
    assert parser.parse("The request is about leave.\n`pto_used`") == "pto_used"
    for sentence in ("The intent is pto_used.", "pto used", ""):
        with pytest.raises(ParseError):
            parser.parse(sentence)
    math = ParserConfig.model_validate(apps.SVAMP.reply_parser)
    assert math.parse("so\nAnswer: 8\nDone.") == "so\nAnswer: 8"
    with pytest.raises(ParseError):
        math.parse("Answer: 5\nAnswer: none")  # the last Answer line has no number


@pytest.mark.parametrize("app", [apps.CLINC, apps.SVAMP])
def test_the_search_reads_the_replies_in_the_application_format(app: apps.Application) -> None:
    parser = ParserConfig.model_validate(app.reply_parser)
    for question in app.load(app.dataset, "test", 0, 20):
        for reply in app.sample_replies(question):
            parser.parse(reply)  # the scripted model's right and wrong replies both read
