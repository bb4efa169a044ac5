"""Datasets from traces: selection, template matching, feedback as labels, redaction, time
splits (``emery.data.from_traces``), with scripted spans in the in-memory store."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from emery.core.errors import ConfigError
from emery.core.feedback import FeedbackRecord, NewFeedback
from emery.core.spans import SpanRecord
from emery.data.from_traces import TraceSelection, dataset_from_traces, time_split
from emery.data.loaders import SplitFractions, load_dataset
from emery.data.redaction import Redactor
from emery.data.trace_template import TraceTemplate
from emery.store.backends import MemoryStore
from emery.systems.stages import StageConfig
from emery.tracing import conventions as sc

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def chat_span(
    n: int,
    question: str,
    reply: str | None = "an answer",
    *,
    service: str = "support",
    model: str = "gpt-x",
    system: str = "Answer briefly.",
    parent: str | None = None,
    job_id: str | None = None,
) -> SpanRecord:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    attributes = {
        sc.GEN_AI_OPERATION_NAME: sc.CHAT_OPERATION,
        sc.GEN_AI_REQUEST_MODEL: model,
        sc.GEN_AI_INPUT_MESSAGES: json.dumps(messages),
        sc.SERVICE_NAME: service,
    }
    if reply is not None:
        attributes[sc.GEN_AI_OUTPUT_MESSAGES] = json.dumps(
            [{"role": "assistant", "content": reply}]
        )
    start = T0 + timedelta(minutes=n)
    return SpanRecord(
        trace_id=f"{n:032x}",
        span_id=f"{n:016x}",
        parent_id=parent,
        name=f"chat {model}",
        start_time=start,
        end_time=start + timedelta(seconds=1),
        attributes=attributes,
        job_id=job_id,
    )


def reward_span(n: int, value: float, *, after: int = 1) -> SpanRecord:
    start = T0 + timedelta(minutes=n, seconds=after)
    return SpanRecord(
        trace_id=f"{n:032x}",
        span_id=f"{n + 4096:016x}",
        name=sc.REWARD_SPAN,
        start_time=start,
        end_time=start,
        attributes={sc.REWARD_VALUE: value},
    )


QUESTION = TraceTemplate.from_text("Question: {question}")


def build(store: MemoryStore, **kwargs: object):  # type: ignore[no-untyped-def]
    return dataset_from_traces(store, kwargs.pop("template", QUESTION), **kwargs)  # type: ignore[arg-type]


def test_template_matched_unmatched_and_ambiguous() -> None:
    template = TraceTemplate.from_text("{city} to {country}")
    user = [{"role": "system", "content": "x"}, {"role": "user", "content": "Lyon to France"}]
    assert template.match(user).fields == {"city": "Lyon", "country": "France"}
    assert template.match([{"role": "user", "content": "Lyon, France"}]).status == "unmatched"
    twice = [{"role": "user", "content": "Lyon to Paris to France"}]
    assert template.match(twice).status == "ambiguous"
    assert TraceTemplate.from_text("{a}={a}").match(
        [{"role": "user", "content": "1=2"}]
    ).status == ("unmatched")
    with pytest.raises(ConfigError, match="no \\{field\\}"):
        TraceTemplate.from_text("no fields here")


def test_stage_template_ignores_the_instruction_an_optimizer_changes() -> None:
    stage = StageConfig.model_validate(
        {
            "name": "answer",
            "instruction": "Answer briefly.",
            "messages": [{"role": "user", "template": "Question: {question}"}],
        }
    )
    template = TraceTemplate.from_stage(stage)
    other_instruction = [
        {"role": "system", "content": "A newer instruction."},
        {"role": "user", "content": "Question: why?"},
    ]
    assert template.match(other_instruction).fields == {"question": "why?"}


def test_calls_become_examples_and_unmatched_calls_are_counted() -> None:
    store = MemoryStore()
    store.add_spans(
        [
            chat_span(1, "Question: what is 2+2?", "4"),
            chat_span(2, "what is 3+3?", "6"),  # not the template's prompt
            chat_span(3, "Question: a", None),  # the call failed: no reply
            chat_span(4, "Question: b", "B", service="billing"),
            chat_span(5, "Question: c", "C", job_id="job1"),  # emery's own job
        ]
    )
    built = build(store, selection=TraceSelection(service="support"))
    summary = built.summary
    assert (summary.selected, summary.matched, summary.unmatched, summary.no_reply) == (3, 1, 1, 1)
    [(_, example)] = built.examples
    assert example.input == {"question": "what is 2+2?"}
    assert example.expected == "4"
    assert example.meta["trace_id"] == f"{1:032x}"
    assert "the user message does not fit the template" in summary.reasons


def test_selection_by_time_model_name_and_attribute() -> None:
    store = MemoryStore()
    spans = [chat_span(n, f"Question: q{n}", model="m1" if n % 2 else "m2") for n in range(1, 7)]
    spans[0].attributes["tenant"] = "acme"
    store.add_spans(spans)
    window = TraceSelection(since=T0 + timedelta(minutes=2), until=T0 + timedelta(minutes=5))
    assert [e.input["question"] for _, e in build(store, selection=window)] == ["q2", "q3", "q4"]
    by_model = build(store, selection=TraceSelection(model="m2"))
    assert [e.input["question"] for _, e in by_model] == ["q2", "q4", "q6"]
    assert build(store, selection=TraceSelection(span_name="chat m*")).summary.selected == 6
    assert build(store, selection=TraceSelection(span_name="chat m1")).summary.selected == 3
    tenant = build(store, selection=TraceSelection(attributes={"tenant": "acme"}))
    assert [e.input["question"] for _, e in tenant] == ["q1"]


def test_time_split_puts_the_newest_calls_in_test() -> None:
    store = MemoryStore()
    store.add_spans([chat_span(n, f"Question: q{n}") for n in (5, 1, 4, 2, 3, 9, 7, 8, 6, 10)])
    built = build(store)
    order = [(split, int(example.input["question"][1:])) for split, example in built]
    assert order == [("train", n) for n in range(1, 7)] + [("val", 7), ("val", 8)] + [
        ("test", 9),
        ("test", 10),
    ]
    assert built.summary.splits == {"train": 6, "val": 2, "test": 2}
    assert time_split(3, SplitFractions(train=1, val=0, test=1)) == ["train", "test", "test"]


def test_feedback_by_span_trace_and_reward_becomes_the_label() -> None:
    store = MemoryStore()
    root = f"{99:016x}"
    store.add_spans(
        [
            chat_span(1, "Question: a"),
            chat_span(2, "Question: b"),
            chat_span(3, "Question: c", parent=root),
            chat_span(4, "Question: d"),
            reward_span(4, 0.25),
            reward_span(1, 1.0),  # a span's own feedback outranks the reward
            chat_span(5, "Question: e"),
        ]
    )
    store.add_spans(
        [
            SpanRecord(
                trace_id=f"{3:032x}",
                span_id=root,
                name="agent",
                start_time=T0,
                end_time=T0 + timedelta(hours=1),
            )
        ]
    )
    store.add_feedback(
        FeedbackRecord.of(NewFeedback(trace_id=f"{1:032x}", span_id=f"{1:016x}", thumb="down"))
    )
    store.add_feedback(FeedbackRecord.of(NewFeedback(trace_id=f"{2:032x}", score=0.5)))
    store.add_feedback(FeedbackRecord.of(NewFeedback(trace_id=f"{2:032x}", score=0.75)))
    store.add_feedback(
        FeedbackRecord.of(NewFeedback(trace_id=f"{3:032x}", span_id=root, thumb="up"))
    )
    built = build(store)
    labels = {e.input["question"]: e.meta.get("feedback") for _, e in built}
    assert labels["a"] == {"score": 0.0, "kind": "thumb", "source": "span"}
    assert labels["b"] == {"score": 0.75, "kind": "score", "source": "trace"}  # the latest
    assert labels["c"] == {"score": 1.0, "kind": "thumb", "source": "span"}  # a span above it
    assert labels["d"] == {"score": 0.25, "kind": "reward", "source": "reward"}
    assert labels["e"] is None
    assert built.summary.with_feedback == 4
    labeled = build(store, labeled_only=True)
    assert sorted(e.input["question"] for _, e in labeled) == ["a", "b", "c", "d"]


def test_redaction_runs_before_the_example_is_made(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = MemoryStore()
    store.add_spans(
        [
            chat_span(
                1, "Question: mail ann@example.com or call 555-123-4567", "Sure, ann@example.com"
            )
        ]
    )
    store.add_feedback(
        FeedbackRecord.of(
            NewFeedback(trace_id=f"{1:032x}", thumb="up", comment="from ann@example.com")
        )
    )
    redactor = Redactor.of(
        ["email", "phone", r"Sure"], function=lambda text: text.replace("mail", "m***")
    )
    built = build(store, redactor=redactor)
    path = built.write(tmp_path / "traces.jsonl")
    text = path.read_text()
    assert "ann@example.com" not in text
    assert "555-123-4567" not in text
    [(_, example)] = built.examples
    assert example.input["question"] == "m*** [EMAIL] or call [PHONE]"
    assert example.expected == "[REDACTED], [EMAIL]"
    assert example.meta["feedback"]["comment"] == "from [EMAIL]"
    loaded = load_dataset(path)  # the file is a dataset emery reads, splits and all
    assert loaded.train[0].input == example.input


def test_bad_redaction_pattern_and_feedback_are_one_line_errors() -> None:
    with pytest.raises(ConfigError, match="not a valid regex"):
        Redactor.of(["(unclosed"])
    with pytest.raises(ValueError, match="either score"):
        NewFeedback(trace_id="a" * 32, score=0.5, thumb="up")
    with pytest.raises(ValueError, match="32 hex digits"):
        NewFeedback(trace_id="xyz", score=0.5)
    with pytest.raises(ValueError, match="less than or equal to 1"):
        NewFeedback(trace_id="a" * 32, score=1.5)


def test_cli_writes_the_dataset_and_prints_the_summary(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from emery.cli.app import main
    from emery.store.backends import SQLiteStore

    location = tmp_path / "store.db"
    store = SQLiteStore(location)
    store.add_spans([chat_span(n, f"Question: q{n} ann@example.com") for n in range(1, 6)])
    store.add_spans([chat_span(9, "Hello")])
    store.add_feedback(FeedbackRecord.of(NewFeedback(trace_id=f"{2:032x}", thumb="up")))
    store.close()
    out = tmp_path / "traces.jsonl"
    argv = ["dataset", "from-traces", "--template", "Question: {question}", "--out", str(out)]
    argv += ["--store", str(location), "--redact", "email", "--split", "0.6,0.2,0.2"]
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    printed = capsys.readouterr().err
    assert "selected 6 chat calls: 5 matched, 1 unmatched, 0 ambiguous" in printed
    assert "5 examples, 1 with feedback; splits by time: train 3, val 1, test 1 (newest)" in printed
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["split"] for row in rows] == ["train", "train", "train", "val", "test"]
    assert rows[0]["input"] == {"question": "q1 [EMAIL]"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--template", "no field"], "no {field} placeholder"),
        (["--template", "{q}", "--since", "yesterday"], "--since 'yesterday' is not an ISO"),
        (["--template", "{q}", "--since", "2026-12-01", "--until", "2026-11-01"], "time range"),
        (["--template", "{q}", "--attr", "tenant"], "must be KEY=VALUE"),
        (["--template", "{q}", "--redact", "(x"], "not a valid regex"),
        (["--template", "{q}", "--split", "1,2"], "three shares"),
        ([], "give a template"),
        (["--template", "{q}", "--service", "nobody"], "no examples, nothing written"),
    ],
)
def test_cli_bad_input_is_one_error_line(tmp_path, capsys, extra, message) -> None:  # type: ignore[no-untyped-def]
    from emery.cli.app import main

    out = tmp_path / "traces.jsonl"
    argv = ["dataset", "from-traces", "--out", str(out), "--store", str(tmp_path / "s.db")]
    with pytest.raises(SystemExit) as done:
        main([*argv, *extra])
    assert done.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error:")
    assert message in lines[0]
    assert not out.exists()


def test_feedback_and_datasets_through_the_api() -> None:
    from fastapi.testclient import TestClient

    from emery.server.api import create_server_app
    from emery.server.launcher import ThreadLauncher

    store = MemoryStore()
    store.add_spans([chat_span(n, f"Question: q{n}") for n in range(1, 4)])
    app = create_server_app(store, api_key="k", launcher=ThreadLauncher())
    with TestClient(app, headers={"X-API-Key": "k"}) as client:
        sent = client.post(
            "/api/feedback", json={"trace_id": f"{2:032X}", "span_id": f"{2:016x}", "thumb": "up"}
        )
        assert sent.status_code == 201
        assert sent.json()["score"] == 1.0
        assert client.post("/api/feedback", json={"trace_id": "zz", "score": 1}).status_code == 422
        body = {"template": "Question: {question}", "fractions": {"train": 2, "val": 0, "test": 1}}
        built = client.post("/api/datasets/from-traces", json=body).json()
        assert built["summary"]["with_feedback"] == 1
        assert [row["split"] for row in built["rows"]] == ["train", "train", "test"]
        assert built["rows"][1]["meta"]["feedback"]["kind"] == "thumb"
        bad = client.post("/api/datasets/from-traces", json={"template": "none"})
        assert bad.status_code == 400
        assert "no {field}" in bad.json()["error"]["message"]
        staged = client.post("/api/datasets/from-traces", json={"stage": "job.toml:a"})
        assert staged.status_code == 422  # the API reads no config file


def test_the_sdk_builds_datasets_and_sends_feedback() -> None:
    import emery

    store = MemoryStore()
    store.add_spans([chat_span(n, f"Question: q{n}") for n in range(1, 5)])
    record = emery.send_feedback(f"{4:032x}", score=0.25, store=store)
    assert record.id is not None
    assert record.kind == "score"
    built = emery.dataset_from_traces("Question: {question}", store=store, service="support")
    dataset = built.dataset()
    assert [e.input["question"] for e in dataset.test] == ["q4"]
    assert dataset.test[0].meta["feedback"]["score"] == 0.25
    with pytest.raises(ConfigError, match=r"feedback\.thumb"):
        emery.send_feedback(f"{4:032x}", thumb="sideways", store=store)
    with pytest.raises(ConfigError, match="servise"):
        emery.dataset_from_traces("Question: {question}", store=store, servise="x")


def test_otlp_ingest_keeps_the_service_name_for_selection() -> None:
    from emery.tracing.otlp import JSON, decode_request, request_spans

    def span(span_id: str, service: str | None) -> dict[str, object]:
        attributes = (
            [] if service is None else [{"key": "service.name", "value": {"stringValue": service}}]
        )
        return {"traceId": "ab" * 16, "spanId": span_id, "name": "chat m", "attributes": attributes}

    body = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "web"}}]
                },
                "scopeSpans": [{"spans": [span("01" * 8, None), span("02" * 8, "worker")]}],
            }
        ]
    }
    records, problems = request_spans(decode_request(json.dumps(body).encode(), JSON))
    assert problems == []
    assert [r.attributes[sc.SERVICE_NAME] for r in records] == ["web", "worker"]


def test_a_time_without_a_zone_is_utc() -> None:
    naive = TraceSelection(since=datetime(2026, 11, 1, 0, 2), until="2026-11-01T00:04")  # type: ignore[arg-type]
    assert naive.since == T0 + timedelta(minutes=2)
    assert naive.until == T0 + timedelta(minutes=4)


def test_cli_reads_the_template_from_a_stage(tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from emery.cli.app import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.toml").write_text(
        '[dataset]\ntask = "word_problems"\n[system]\nkind = "prompt_program"\n'
        '[[system.stages]]\nname = "answer"\ninstruction = "Answer."\n'
        'messages = [{ role = "user", template = "Question: {question}" }]\n'
    )
    from emery.store.backends import SQLiteStore

    location = tmp_path / "s.db"
    with_spans = SQLiteStore(location)
    with_spans.add_spans(
        [chat_span(n, f"Question: q{n}", system="Another instruction.") for n in range(3)]
    )
    with_spans.close()
    argv = [
        "dataset",
        "from-traces",
        "--stage",
        "job.toml",
        "--out",
        "t.jsonl",
        "--store",
        str(location),
    ]
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0
    rows = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert [row["input"] for row in rows] == [{"question": f"q{n}"} for n in range(3)]


def test_feedback_is_read_back_for_many_traces_oldest_first() -> None:
    store = MemoryStore()
    ids = [f"{n:032x}" for n in range(501)]  # more than one IN (...) chunk
    for n, trace_id in enumerate(reversed(ids)):
        store.add_feedback(FeedbackRecord.of(NewFeedback(trace_id=trace_id, score=n / 500)))
    found = store.list_feedback(ids)
    assert [r.score for r in found] == [n / 500 for n in range(501)]
    assert [r.id for r in store.list_feedback([ids[0], "f" * 32])] == [found[-1].id]


def test_a_store_made_before_the_feedback_table_gains_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import sqlite3

    from emery.store.backends import SQLiteStore

    path = tmp_path / "old.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:  # as an emery without feedback left it
        conn.execute("DROP TABLE feedback")
    store = SQLiteStore(path)
    store.add_feedback(FeedbackRecord.of(NewFeedback(trace_id="a" * 32, thumb="down")))
    assert [r.score for r in store.list_feedback()] == [0.0]
