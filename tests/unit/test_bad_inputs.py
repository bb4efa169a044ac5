"""Bad input gives one ``error:`` line, a non-zero exit and an intact store (issue 19, #3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bad_input_support import job_config, one_error_line, run_cli, store_jobs


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EMERY_MODEL_DIR", str(tmp_path / "models"))
    monkeypatch.delenv("EMERY_STORE", raising=False)


@pytest.fixture
def store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A store holding one succeeded job."""
    path = tmp_path / "store" / "emery.db"
    assert run_cli(["train", str(job_config(tmp_path, name="seed")), "--store", str(path)]) == 0
    capsys.readouterr()
    assert [state for _, state in store_jobs(path)] == ["succeeded"]
    return path


def fails(capsys: pytest.CaptureFixture[str], args: list[str], *fragments: str) -> str:
    assert run_cli(args) != 0
    line = one_error_line(capsys.readouterr().err)
    for fragment in fragments:
        assert fragment in line
    return line


def dataset_config(folder: Path, data: str) -> Path:
    path = folder / "data.toml"
    path.write_text(
        f'[dataset]\npath = "{data}"\n[system]\nkind = "prompt_program"\n'
        '[[system.stages]]\nname = "answer"\ninstruction = "Answer."\n'
        'messages = [{ role = "user", template = "{question}" }]\n'
        '[lm.task]\nmodel = "python/scripted_lm:answer_lm"\n'
    )
    return path


def test_config_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.toml"
    path.write_bytes(b'[dataset]\ntask = "word_problems\xff"\n')
    fails(capsys, ["train", str(path)], "job.toml", "not UTF-8")


def test_json_config_nested_too_deeply(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    fails(capsys, ["train", str(path)], "nested too deeply")


def test_dataset_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "rows.jsonl").write_bytes(b'{"id": "a", "input": {"question": "\xff"}}\n')
    fails(capsys, ["train", str(dataset_config(tmp_path, "rows.jsonl"))], "rows.jsonl", "UTF-8")


def test_dataset_unreadable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rows.csv").write_text("id,question,expected\na,q,1\n")
    real_open = Path.open

    def denied(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self.name == "rows.csv":  # what a file without read permission does
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", denied)
    fails(capsys, ["train", str(dataset_config(tmp_path, "rows.csv"))], "permission denied")


@pytest.mark.parametrize(
    ("location", "fragment"),
    [
        ("junk.db", "is not an emery store"),
        ("/proc/emery.db", "cannot be opened"),
        ("postgresql://u:secret@127.0.0.1:1/db", "cannot connect to the store"),
        ("postgresql://u@127.0.0.1:port/db", "invalid store URL"),
        (".", "is a folder"),
        ("junk.db/emery.db", "a file is in the way"),
    ],
)
def test_bad_store(
    location: str, fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "junk.db").write_text("not a database\n")
    line = fails(capsys, ["train", str(job_config(tmp_path)), "--store", location], fragment)
    assert "secret" not in line
    assert (tmp_path / "junk.db").read_text() == "not a database\n"


def test_read_only_store(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = store_jobs(store)
    read_only = f"sqlite:///file:{store}?mode=ro&uri=true"
    fails(capsys, ["train", str(job_config(tmp_path)), "--store", read_only], "read-only")
    assert store_jobs(store) == before


@pytest.mark.parametrize(
    ("model", "fragment"),
    [
        ("python/scripted_lm:needs_arguments", "missing 1 required positional argument"),
        ("python/scripted_lm:broken_factory", "RuntimeError: the factory broke"),
        ("python/scripted_lm:SYNC_LM", "is not an LM"),
        ("python/scripted_lm:NOT_AN_LM", "is not an LM"),
        ("python/raises_on_import:lm", "importing module 'raises_on_import' failed"),
    ],
)
def test_python_model_that_is_not_an_lm(
    model: str, fragment: str, store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fails(capsys, ["train", str(job_config(tmp_path, model)), "--store", str(store)], fragment)
    jobs = dict(store_jobs(store))
    assert sorted(jobs.values()) == ["failed", "succeeded"]  # not left in "created"
    failed = next(job for job, state in jobs.items() if state == "failed")
    fails(capsys, ["jobs", "resume", failed, "--store", str(store)], "nothing to resume")


@pytest.mark.parametrize(
    ("model", "fragment"),
    [
        ("no_such_module_x:PROVIDER/m", "cannot import module 'no_such_module_x'"),
        ("json:dumps/m", "'json:dumps' is a function; expected ProviderKind"),
    ],
)
def test_a_model_provider_of_your_own_that_cannot_be_used_stores_no_job(
    model: str, fragment: str, store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fails(capsys, ["train", str(job_config(tmp_path, model)), "--store", str(store)], fragment)
    assert [state for _, state in store_jobs(store)] == ["succeeded"]  # the seed job only


def test_workdir_not_writable(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = job_config(tmp_path, workdir="taken")
    (tmp_path / "taken").write_text("a file where the workdir should be")
    fails(capsys, ["train", str(config), "--store", str(store)], "set runtime.workdir")
    assert sorted(state for _, state in store_jobs(store)) == ["failed", "succeeded"]


def test_config_with_byte_order_mark_runs(tmp_path: Path) -> None:
    path = job_config(tmp_path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert run_cli(["train", str(path), "--store", str(tmp_path / "s.db")]) == 0
