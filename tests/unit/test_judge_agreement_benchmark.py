"""``benchmarks/production/judge_agreement.py``: its rank statistics, and a run with the
scripted judge in both scoring modes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

PRODUCTION = Path(__file__).resolve().parents[2] / "benchmarks" / "production"
if str(PRODUCTION) not in sys.path:
    sys.path.insert(0, str(PRODUCTION))

import judge_agreement as ja  # noqa: E402


def test_auc_counts_ties_half_and_spearman_is_undefined_for_constant_scores() -> None:
    labels = [True, False, True, False]
    assert ja.auc([0.9, 0.1, 0.8, 0.2], labels) == 1.0
    assert ja.auc([0.5, 0.5, 0.5, 0.5], labels) == 0.5
    assert ja.auc([0.1, 0.9, 0.5, 0.5], labels) == pytest.approx(0.125)
    assert ja.spearman([0.5] * 4, [1, 0, 1, 0]) is None
    assert ja.spearman([0.9, 0.1, 0.8, 0.2], [1, 0, 1, 0]) == pytest.approx(2 / 5**0.5)


def test_a_scripted_run_judges_every_reply_in_both_modes(tmp_path: Path) -> None:
    out = tmp_path / "judge.json"
    args = ["--model", "fake", "--clinc", "3", "--svamp", "2", "--bootstrap", "50"]
    assert ja.main([*args, "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    for mode in ("json", "logprobs"):
        found = results["modes"][mode]
        assert found["by_data"]["all"]["n_replies"] == 10
        assert found["by_data"]["clinc"]["n_pairs"] == 3
        assert found["unreadable"] == 0
        # the scripted judge likes an even last character: its verdicts are the scores
        for reply in found["scores"]:
            assert reply["score"] == float(ord(reply["output"][-1]) % 2 == 0)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--clinc", "-1"], "error: --clinc -1 --svamp 2: pairs to judge"),
        (["--clinc", "0", "--svamp", "0"], "error: --clinc 0 --svamp 0: pairs to judge"),
        (["--bootstrap", "0"], "error: --bootstrap 0: bootstrap draws, 1 or more"),
        (["--parallel", "0"], "error: --parallel 0: replies judged at once, 1 or more"),
    ],
)
def test_bad_counts_end_with_one_error_line(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # before: --clinc -1 judged all CLINC rows but the last, 0 pairs raised ZeroDivisionError
    # and --parallel 0 waited forever on a semaphore of 0
    assert ja.main(["--model", "fake", "--svamp", "2", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert err.count("\n") == 1
