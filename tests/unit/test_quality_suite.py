"""The quality suite's rows, resume and verdict (benchmarks/quality/suite.py, issue 30 #4):
a scripted model stands in for the real one."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from suite_support import words_config

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "quality"))

import suite
from suite_table import SuiteRow, TrialRow, channels, compared, markdown, read_rows, verdict

MODEL = "python/suite_support:scripted_lm"


def run_suite(tmp_path: Path, *extra: str) -> Path:
    out = tmp_path / "rows.jsonl"
    sets = f"word_problems,{words_config(tmp_path)}"
    suite.main(
        [
            "--sets",
            sets,
            "--budgets",
            "20",
            "--seeds",
            "0,1",
            "--algorithms",
            "gepa",
            "--model",
            MODEL,
            "--out",
            str(out),
            *extra,
        ]
    )
    return out


def test_a_fake_run_makes_a_row_per_set_and_seed_and_resume_skips_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import common

    scored: list[str] = []
    split_result = common.split_result

    async def counted(*args: Any, **kwargs: Any) -> Any:
        scored.append(args[5])
        return await split_result(*args, **kwargs)

    monkeypatch.setattr(common, "split_result", counted)
    out = run_suite(tmp_path)
    # seed (and expert) scored on test once per set, the winner once per row: 2 + 1 + 3 + 1
    assert scored == ["test"] * 7
    rows = read_rows(out)
    assert [row.key for row in rows] == [
        ("word_problems", 20, 0, "gepa"),
        ("word_problems", 20, 1, "gepa"),
        ("words", 20, 0, "gepa"),
        ("words", 20, 1, "gepa"),
    ]
    words = rows[2]
    # The config's n_val = 7 is dropped: the default (10 at 20 calls) sizes val.
    assert words.sizes == {"train": 10, "val": 10, "test": 10}
    assert set(words.scores) == {"seed", "expert", "best"}
    assert len(words.test_ids) == len(words.scores["seed"]) == 10
    assert words.scores["seed"] == rows[3].scores["seed"]  # scored once, same examples
    assert words.vs_seed == compared(words.scores)[0]
    assert set(rows[0].scores) == {"seed", "best"}  # a built-in task has no expert
    assert 0 < rows[0].metric_calls <= 20
    table = capsys.readouterr().out
    assert "| words | 20 | 1 | gepa |" in table
    assert "### Verdict" in table

    with pytest.raises(SystemExit, match="already holds 4 rows; pass --resume"):
        run_suite(tmp_path)

    def no_search(*args: object, **kwargs: object) -> None:
        raise AssertionError("a done row ran again")

    monkeypatch.setattr(suite, "run_emery", no_search)
    run_suite(tmp_path, "--resume")
    assert len(read_rows(out)) == 4


def row(set_name: str, seed: int, seed_right: int, best_right: int, **fields: object) -> SuiteRow:
    """A row on 40 test examples: the seed right on the first ``seed_right``, the winner on
    the first ``best_right``, the expert on the first 20."""
    scores = {
        name: [1.0 if i < right else 0.0 for i in range(40)]
        for name, right in (("seed", seed_right), ("best", best_right), ("expert", 20))
    }
    vs_seed, vs_expert = compared(scores)
    values: dict[str, object] = {"budget": 200, "algorithm": "mipro", "peer": False}
    values.update(fields)
    return SuiteRow.model_validate(
        {"set": set_name, "seed": seed, "scores": scores, "vs_seed": vs_seed,
         "vs_expert": vs_expert, **values}
    )  # fmt: skip


def statuses(rows: list[SuiteRow], sets: list[str]) -> list[str]:
    return [target.status for target in verdict(rows, sets)]


def test_the_verdict_reads_the_lift_expert_peer_and_worse_targets() -> None:
    lifted = [row("a", 0, 10, 30), row("a", 1, 10, 30), row("a", 2, 10, 12)]
    peers = [row("a", 0, 10, 20, algorithm="gepa 0.1.4", peer=True)]
    # seeds 0 and 1 lift +50 points (interval above 0), seed 2 +5: 2 of 3; best 60% on
    # average, expert 50%: +10; above the peer's 50%; mean lift 35 points.
    assert statuses(lifted + peers, ["a"]) == ["met"] * 5

    one_seed = [row("a", 0, 10, 30), row("a", 1, 10, 12), row("a", 2, 10, 12)]
    assert statuses(one_seed + peers, ["a"])[0] == "not met"

    below_expert = [row("a", s, 10, 21) for s in range(3)]  # +27.5 lift, expert + 2.5
    assert statuses(below_expert + peers, ["a"])[:2] == ["met", "not met"]

    worse = row("a", 0, 30, 5, budget=100, algorithm="apo")  # -62.5, interval below 0
    assert worse.vs_seed is not None
    assert worse.vs_seed.high < 0
    targets = verdict([*lifted, *peers, worse], ["a"])
    assert targets[3].status == "not met"
    assert "a/100/seed 0/apo" in targets[3].detail
    slightly_worse = row("a", 0, 12, 10, budget=100, algorithm="apo")  # interval spans 0
    assert verdict([*lifted, *peers, slightly_worse], ["a"])[3].status == "met"

    # A set not run leaves its targets and the mean lift not yet run; no peers: not yet run.
    unrun = statuses(lifted, ["a", "b"])
    assert unrun[2] == "not yet run"
    assert unrun[3:6] == ["not yet run"] * 3
    assert unrun[-1] == "not yet run"
    assert statuses([row("a", s, 10, 17) for s in range(3)], ["a"])[-1] == "met"  # +17.5
    assert statuses([row("a", s, 10, 15) for s in range(3)], ["a"])[-1] == "not met"  # +12.5


def test_the_table_lists_planned_rows_not_yet_run() -> None:
    table = markdown([row("a", 0, 10, 30)], [("a", 200, 0, "mipro"), ("a", 200, 1, "mipro")])
    assert "| a | 200 | 0 | mipro | 25.0% (" in table
    assert "| a | 200 | 1 | mipro | not yet run |" in table
    assert "+50.0 [+" in table


def test_peers_at_200_calls_are_rows_scored_against_the_same_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gepa_vs_library
    import mipro_vs_dspy
    from common import RowReport, transplant

    config = words_config(tmp_path)
    task = suite.set_task(str(config), 200)
    expert = transplant(task, {"say": "Repeat the word in capital letters."})
    seen: list[int] = []

    def library(args: object, *rest: object) -> tuple[RowReport, object]:
        seen.append(vars(args)["metric_calls"])
        return RowReport(name="gepa", metric_calls=190), expert

    def dspy(args: object, *rest: object) -> tuple[RowReport, object, dict[str, object]]:
        seen.append(mipro_vs_dspy.matched_budget(args))  # type: ignore[arg-type]
        found = {"seed_test_dspy": [0.0] * 10, "best_test_dspy": [1.0] * 10}
        return RowReport(name="dspy", metric_calls=180), task.system().seed_candidate(), found

    def broken(*args: object) -> None:
        raise RuntimeError("AdapterParseError: no field\nmore")

    monkeypatch.setattr(gepa_vs_library, "library_winner", library)
    monkeypatch.setattr(mipro_vs_dspy, "dspy_winner", dspy)
    monkeypatch.setattr(suite.Suite, "peer_model", lambda self: self.model)
    out = tmp_path / "rows.jsonl"
    argv = ["--sets", str(config), "--budgets", "100,200", "--seeds", "0", "--peers"]
    suite.main([*argv, "--algorithms", "baseline", "--model", MODEL, "--out", str(out)])
    rows = {row.algorithm: row for row in read_rows(out) if row.budget == 200}
    assert list(rows) == ["baseline", "gepa 0.1.4", "dspy MIPROv2", "dspy MIPROv2 (DSPy's reading)"]
    assert seen[0] == 200
    assert 150 < seen[1] <= 200  # DSPy's plan: the most trials that fit 200 calls
    gepa = rows["gepa 0.1.4"]
    assert gepa.peer
    assert gepa.scores["seed"] == rows["baseline"].scores["seed"]
    assert gepa.scores["best"] == gepa.scores["expert"]
    assert rows["dspy MIPROv2 (DSPy's reading)"].vs_seed.verdict == "better"  # type: ignore[union-attr]

    monkeypatch.setattr(gepa_vs_library, "library_winner", broken)
    out.unlink()
    suite.main([*argv, "--algorithms", "baseline", "--model", MODEL, "--out", str(out)])
    failed = next(row for row in read_rows(out) if row.algorithm == "gepa 0.1.4")
    assert failed.error == "AdapterParseError: no field"


def test_the_targets_are_read_on_the_development_sets_chosen() -> None:
    assert suite.verdict_sets(suite.arguments([])) == [
        "svamp",
        "clinc",
        "restaurant8k",
        "humaneval",
    ]
    chosen = suite.arguments(["--sets", "clinc,word_problems"])
    assert suite.verdict_sets(chosen) == ["clinc"]
    assert suite.verdict_sets(suite.arguments(["--sets", "word_problems"])) == ["word_problems"]


def test_peers_names_the_peers_to_run() -> None:
    def peers(*argv: str) -> list[str]:
        args = suite.arguments(["--sets", "clinc", "--budgets", "200", "--seeds", "0", *argv])
        return [key[3] for key in suite.planned(args) if key[3] in suite.PEERS]

    assert peers() == []
    assert peers("--peers") == ["gepa 0.1.4", "dspy MIPROv2"]
    assert peers("--peers", "dspy") == ["dspy MIPROv2"]
    with pytest.raises(SystemExit):
        suite.arguments(["--peers", "optuna"])


def test_a_mipro_row_keeps_its_trials_and_the_table_reads_its_single_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rows.jsonl"
    args = ["--sets", "word_problems", "--budgets", "60", "--seeds", "0", "--algorithms", "mipro"]
    suite.main([*args, "--model", MODEL, "--out", str(out)])
    (mipro,) = read_rows(out)
    assert mipro.trials[0].kind == "baseline"
    base = mipro.trials[1]
    assert base.choices["solve.layout"] == "layout.answer_stage"  # the designed base
    assert all(len(t.choices) == len(t.params) for t in mipro.trials)

    capsys.readouterr()
    suite.main([*args, "--out", str(out), "--table"])
    assert "MIPRO's single changes against their base" in capsys.readouterr().out


def test_single_changes_are_tallied_by_source_against_their_base() -> None:
    def trial(number: int, score: float, **params: int) -> TrialRow:
        values = {"s.instruction": 0, "s.demos": 0, "s.layout": 1, **params}
        instruction = "proposed" if values["s.instruction"] else "original"
        choices = {
            "s.instruction": f"instruction.{instruction}",
            "s.demos": "demos.nearest" if values["s.demos"] else "demos.empty",
            "s.layout": "layout.answer_stage",
        }
        return TrialRow(
            number=number, kind="full", params=values, choices=choices, score=score, n=40
        )

    rows = [
        row("a", 0, 10, 20, trials=[trial(1, 0.5), trial(2, 0.5, **{"s.instruction": 2}),
                                    trial(3, 0.7, **{"s.demos": 3}),
                                    trial(4, 0.8, **{"s.instruction": 2, "s.demos": 3})]),
        row("b", 0, 10, 20, trials=[trial(1, 0.6), trial(2, 0.55, **{"s.instruction": 1})]),
    ]  # fmt: skip

    tallies = {t.source: t.differences for t in channels(rows)}
    assert tallies == {
        "instruction.proposed": [0.0, pytest.approx(-0.05)],
        "demos.nearest": [pytest.approx(0.2)],
    }  # the combination (two changes) is not a single change
