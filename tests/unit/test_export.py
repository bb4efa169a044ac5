"""``emery export JOB --format openai-jsonl``: fine-tuning lines from a job's stored rollouts,
each validated against the OpenAI chat format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_models import fake_answer

from emery.cli.app import main
from emery.core.spans import SpanRecord
from emery.data.tasks import builtin_task
from emery.store import SpanFilter, open_store
from emery.systems.function_agent import PromptTemplate, agent
from emery.tracing.adapters import to_conversations
from emery.tracing.export import check_chat_example

SOLVE = PromptTemplate("Solve the problem. End with 'Answer: <number>'.")
N_VAL = 6


@agent
def solver(task: dict[str, Any], lm: Any) -> str:
    """A function agent: one LM call with an optimizable system prompt."""
    return str(lm(task["question"], system=SOLVE.text))


def run_cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        main(args)
    code = info.value.code
    return code if isinstance(code, int) else 0


@pytest.fixture
def trained_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "job.toml"
    config.write_text(
        f"""
[job]
name = "export-me"
algorithm = "baseline"

[dataset]
task = "word_problems"
n_train = 0
n_val = {N_VAL}
n_test = 2

[system]
kind = "function_agent"
agent = "test_export:solver"

[lm.task]
model = "python/fake_models:word_problem_lm"

[runtime]
workdir = "{(tmp_path / "work").as_posix()}"
concurrency = 3
"""
    )
    store = tmp_path / "emery.db"
    assert run_cli(["train", str(config), "--store", str(store), "--stream-format", "none"]) == 0
    return store


def expected_right() -> int:
    dataset = builtin_task("word_problems").dataset(n_train=0, n_val=N_VAL, n_test=2)
    examples = dataset.val + dataset.test
    return sum(fake_answer(e.input["question"]) == e.expected for e in examples)


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_export_writes_valid_openai_chat_lines(
    trained_job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stored = open_store(trained_job)
    chats = stored.list_spans(SpanFilter(name="chat fake/word-problems"), limit=1).total
    stored.close()
    assert chats == N_VAL + 2  # the lines below come from these recorded LM spans
    out = tmp_path / "all.jsonl"
    assert run_cli(["export", "export-me", "--format", "openai-jsonl", "--store",
                    str(trained_job), "-o", str(out)]) == 0  # fmt: skip
    lines = read_lines(out)
    assert len(lines) == N_VAL + 2  # val and test rollouts of the seed
    for line in lines:
        check_chat_example(line)
        system, user, assistant = line["messages"]
        assert system == {"role": "system", "content": SOLVE.seed}
        assert user["role"] == "user"
        assert assistant["content"] == f"Let me think.\nAnswer: {fake_answer(user['content'])}"
    assert f"{N_VAL + 2} examples from {N_VAL + 2} rollouts" in capsys.readouterr().err

    good = tmp_path / "good.jsonl"
    assert run_cli(["export", "export-me", "--min-score", "1", "--candidate", "best",
                    "--store", str(trained_job), "-o", str(good)]) == 0  # fmt: skip
    assert 0 < len(read_lines(good)) == expected_right() < N_VAL + 2


def test_export_refuses_unknown_formats_and_candidates(
    trained_job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["export", "export-me", "--format", "csv", "--store", str(trained_job)]) == 2
    assert "--format must be one of openai-jsonl" in capsys.readouterr().err
    code = run_cli(["export", "export-me", "--candidate", "zzz", "--store", str(trained_job)])
    assert code == 2
    assert "no candidates of job" in capsys.readouterr().err


def test_stdout_export_is_pure_jsonl(trained_job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["export", "export-me", "--store", str(trained_job)]) == 0
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines()]
    assert len(lines) == N_VAL + 2
    assert "examples from" in captured.err


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"messages": []}, "non-empty"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "last message"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "role"),
        ({"messages": [{"role": "assistant", "content": 3}]}, "text"),
        ({"messages": [{"role": "assistant", "content": "x"}], "score": 1}, "unexpected"),
        (
            {"messages": [{"role": "tool", "content": "r", "tool_call_id": "c9"},
                          {"role": "assistant", "content": "x"}]},
            "unknown tool call",
        ),
        (
            {"messages": [{"role": "user", "content": "x", "tool_calls": []},
                          {"role": "assistant", "content": "x"}]},
            "only assistant",
        ),
    ],
)  # fmt: skip
def test_invalid_lines_are_detected(record: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_chat_example(record)


def chat_span(seq: int, request: list[dict[str, Any]], reply: dict[str, Any]) -> SpanRecord:
    from datetime import UTC, datetime

    at = datetime.now(UTC)
    return SpanRecord(
        trace_id="t" * 32,
        span_id=f"{seq:016x}",
        name="chat m",
        start_time=at,
        end_time=at,
        sequence=seq,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(request),
            "gen_ai.output.messages": json.dumps([reply]),
        },
    )


def test_conversations_split_independent_calls_and_keep_tool_loops_together() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    first_request = [{"role": "user", "content": "q"}]
    first_reply = {"role": "assistant", "content": "", "tool_calls": [call]}
    second_request = [
        *first_request,
        first_reply,
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]
    other_stage = [{"role": "system", "content": "Summarize."}, {"role": "user", "content": "42"}]
    spans = [
        chat_span(2, other_stage, {"role": "assistant", "content": "forty-two"}),
        chat_span(1, second_request, {"role": "assistant", "content": "It is 42."}),
        chat_span(0, first_request, first_reply),
    ]
    loop, stage = to_conversations(spans)
    assert loop == [*second_request, {"role": "assistant", "content": "It is 42."}]
    assert stage == [*other_stage, {"role": "assistant", "content": "forty-two"}]
    for conversation in (loop, stage):
        check_chat_example({"messages": conversation})
