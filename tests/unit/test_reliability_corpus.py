"""The bad-input corpus of ``benchmarks/reliability`` run in this process: every case ends
with one ``error:`` line, a non-zero exit and the store intact (``make reliability`` runs
the same cases as subprocesses, permission cases included)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from bad_input_support import RELIABILITY, run_cli

assert RELIABILITY.is_dir()

from cases import Case, all_cases  # noqa: E402
from checks import check, checkpoint, prepare, seed_config, store_rows  # noqa: E402

CASES = [case for case in all_cases() if not case.modes]  # chmod means nothing to root


def test_the_corpus_is_big_enough() -> None:
    assert len(all_cases()) >= 60
    assert len({case.name for case in all_cases()}) == len(all_cases())


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding one succeeded job, shared by every case (each gets a copy)."""
    folder = tmp_path_factory.mktemp("template")
    store = folder / "emery.db"
    assert run_cli(["train", str(seed_config(folder)), "--store", str(store)]) == 0
    checkpoint(store)
    return store


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input(
    case: Case,
    template: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store, args = prepare(case, tmp_path / "case", template)
    monkeypatch.chdir(tmp_path / "case")
    monkeypatch.setenv("EMERY_STORE", str(store))
    monkeypatch.setenv("EMERY_MODEL_DIR", str(tmp_path / "models"))
    for name in ("EMERY_API_KEY", "EMERY_TASK_APP_KEY"):
        monkeypatch.delenv(name, raising=False)
    before = store_rows(store)
    capsys.readouterr()
    code = run_cli(args)
    outcome = check(case, code, capsys.readouterr().err, store, before)
    assert outcome.problems == [], outcome.error_line


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file: make reliability covers it")
@pytest.mark.parametrize("case", [c for c in all_cases() if c.modes], ids=lambda c: c.name)
def test_bad_permissions(
    case: Case,
    template: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    test_bad_input(case, template, tmp_path, monkeypatch, capsys)
    for name in case.modes:
        os.chmod(tmp_path / "case" / name, 0o755)
