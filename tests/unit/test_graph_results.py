"""Results of a graph job: the best graph exported as a spec that loads and runs the same,
as text and drawn in the HTML report; ``emery run`` / ``job.run_inference`` on one input;
bad requests as one-line errors."""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fake_models import fake_answer, word_problem_lm
from test_export import solver
from test_graph_dataset_only import CAPITALS, task_set

import emery
from emery.cli.app import main
from emery.config.resolve import JobInputs
from emery.core.aio import run_sync
from emery.core.errors import EmeryError
from emery.core.models import Candidate, ChatMessage, Demo, Example
from emery.data.tasks import builtin_task
from emery.lm import FakeLM
from emery.reports.graph_results import job_graph
from emery.reports.html_report import gather, render_html
from emery.reports.job_result import build_result
from emery.store import MemoryStore, open_store
from emery.systems.base import RunContext
from emery.systems.graph.export import candidate_graph, graph_json
from emery.systems.graph.spec import GraphConfig
from emery.systems.graph.system import SPEC_COMPONENT, GraphSystem, spec_text
from emery.systems.registry import build_system, parse_system_config

ONE_NODE: dict[str, Any] = {
    "kind": "graph",
    "name": "one_node",
    "nodes": [
        {
            "name": "solve",
            "instruction": "Solve the problem.",
            "messages": [{"template": "{question}"}],
            "parser": {"kind": "regex", "pattern": r"Answer:\s*(-?\d+)"},
        },
        {"kind": "output", "value": "solve"},
    ],
}


def two_nodes() -> GraphConfig:
    """solve → check, as structure search would have grown it."""
    spec = json.loads(json.dumps(ONE_NODE))
    spec["nodes"].insert(
        1,
        {
            "name": "check",
            "messages": [{"template": "Problem: {question}\nDraft: {solve}"}],
            "parser": {"kind": "regex", "pattern": r"Answer:\s*(-?\d+)"},
            "max_tokens": 64,
        },
    )
    spec["nodes"][-1]["value"] = "check"
    return GraphConfig.model_validate(spec)


def digest_lm() -> FakeLM:
    """Answers a number that is a digest of the whole chat: equal outputs, equal prompts."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        return f"Answer: {zlib.crc32(json.dumps(list(messages)).encode()) % 100_000}"

    return FakeLM(reply, model="fake/digest")


def outputs(system: GraphSystem, candidate: Candidate, questions: list[str]) -> list[Any]:
    async def one(question: str) -> Any:
        example = Example(id="x", input={"question": question})
        run = await system.run(candidate, RunContext(lm=digest_lm(), example=example))
        assert run.error is None
        return run.output

    return [run_sync(one(question)) for question in questions]


def test_exported_graph_loads_and_runs_like_the_candidate() -> None:
    system = GraphSystem(GraphConfig.model_validate(ONE_NODE))
    best = Candidate(
        components={
            SPEC_COMPONENT: spec_text(two_nodes()),
            "solve": "Think step by step.",
            "check": "Check the draft; fix it if wrong.",
            "solve:reminder": "End with 'Answer: <number>'.",
            "check:placement": "user_before",
        },
        demos={"solve": (Demo(inputs={"question": "1 + 1?"}, output="Answer: 2"),)},
    )
    text = graph_json(candidate_graph(system, best))
    loaded = build_system(parse_system_config(json.loads(text)))
    assert isinstance(loaded, GraphSystem)
    seed = loaded.seed_candidate()
    assert {k: v for k, v in best.components.items() if k != SPEC_COMPONENT} == seed.components
    assert seed.demos == best.demos

    questions = ["2 + 3?", "7 - 4?", "6 * 2?"]
    expected = outputs(system, best, questions)
    assert outputs(loaded, seed, questions) == expected
    assert outputs(system, system.seed_candidate(), questions) != expected  # prompts matter


@pytest.fixture
def graph_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A finished graph job in a SQLite store: (store path, job id)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EMERY_STORE", raising=False)
    store = str(tmp_path / "emery.db")
    return store, finished_job(store, ONE_NODE)


def job_config(system: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "job": {"algorithm": "baseline"},
        "dataset": {"task": "word_problems", "n_train": 0, "n_val": 4, "n_test": 2},
        **({"system": system} if system is not None else {}),
        "verifier": {"kind": "numeric"},
        "lm": {"task": {"model": "python/fake_models:word_problem_lm"}},
    }


def finished_job(store: str, system: dict[str, Any] | None) -> str:
    job = emery.Job.create(job_config(system), store=store).start(wait=True)
    assert job.status() == "succeeded"
    return job.id


def run_cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        main(args)
    code = info.value.code
    return code if isinstance(code, int) else 0


def question() -> str:
    data = builtin_task("word_problems").dataset(seed=0, n_train=0, n_val=0, n_test=50)
    return str(data.test[-1].input["question"])


def test_run_and_export_the_best_graph(
    graph_job: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, job_id = graph_job
    q = question()
    capsys.readouterr()
    assert run_cli(["run", job_id, "--input", json.dumps({"question": q}), "--store", store]) == 0
    assert capsys.readouterr().out == f"{fake_answer(q)}\n"
    assert emery.Job.get(job_id, store=store).run_inference({"question": q}) == str(fake_answer(q))

    target = tmp_path / "best.json"
    assert (
        run_cli(["export", job_id, "--format", "graph", "-o", str(target), "--store", store]) == 0
    )
    loaded = GraphSystem(GraphConfig.model_validate_json(target.read_text()))
    example = Example(id="q", input={"question": q})
    run = run_sync(loaded.run(loaded.seed_candidate(), RunContext(word_problem_lm(), example)))
    assert run.output == str(fake_answer(q))

    assert run_cli(["export", job_id, "--format", "txt", "--store", store]) == 0
    text = capsys.readouterr().out
    for line in ("graph one_node (policy)", "inputs: question", "  question -> solve"):
        assert line in text
    assert "Solve the problem." in text


def test_the_report_draws_the_best_graph(graph_job: tuple[str, str]) -> None:
    store_path, job_id = graph_job
    store = open_store(store_path)
    job = store.get_job(job_id)
    page = render_html(gather(store, job, build_result(store, job)))
    assert "<h2>Graph of the best candidate" in page
    svg = page[page.index("<h2>Graph of the best candidate") :]
    svg = svg[svg.index("<svg") : svg.index("</svg>")]
    assert re.findall(r"font-weight=\"600\">(\w+)</text>", svg) == ["question", "solve", "output"]
    assert svg.count("<line ") == 2
    assert "<script" not in page


def test_bad_requests_are_one_line_errors(
    graph_job: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, job_id = graph_job
    prompt_job = finished_job(store, None)
    unstarted = emery.Job.create(job_config(ONE_NODE), store=store)
    capsys.readouterr()
    cases = [
        (["run", "nope", "--input", "{}"], "nope"),
        (["run", job_id, "--input", "{bad"], "--input is not valid JSON"),
        (["run", job_id, "--input", "[1]"], "--input must be a JSON object"),
        (["run", job_id, "--input", '{"other": 1}'], "inference failed"),
        (["run", unstarted.id, "--input", "{}"], "has no best candidate"),
        (["export", unstarted.id, "--format", "graph"], "has no best candidate"),
        (["export", prompt_job, "--format", "graph"], "not a graph"),
    ]
    for args, message in cases:
        assert run_cli([*args, "--store", store]) == 2, args
        captured = capsys.readouterr()
        assert captured.out == ""
        assert message in captured.err
        assert len(captured.err.strip().splitlines()) == 1, captured.err


def test_a_dataset_only_job_exports_and_draws_its_starting_graph(tmp_path: Path) -> None:
    store = MemoryStore()
    capitals = dict(CAPITALS)
    answer = FakeLM(lambda m: capitals.get(m[-1]["content"], "?"), model="fake/capitals")
    result = emery.optimize(
        None,
        str(task_set(tmp_path)),
        algorithm="baseline",
        lm=answer,
        runtime={"workdir": str(tmp_path / "work")},
        store=store,
        progress=False,
    )
    graph = job_graph(store, result.job_id)
    assert [node.instruction for node in graph.llm_nodes()] == [
        "Name the capital city of the country."
    ]
    job = store.get_job(result.job_id)
    page = render_html(gather(store, job, build_result(store, job)))
    assert "<h2>Graph of the best candidate" in page
    assert "country -&gt; solve" in page  # the text rendering under the drawing


def test_a_job_given_a_python_system_needs_it_again(tmp_path: Path) -> None:
    store = MemoryStore()
    result = emery.optimize(
        solver,
        "word_problems",
        algorithm="baseline",
        lm="python/fake_models:word_problem_lm",
        runtime={"workdir": str(tmp_path / "work")},
        store=store,
        progress=False,
    )
    q = question()
    with pytest.raises(EmeryError, match="was given its system as a Python object"):
        emery.Job(store, result.job_id).run_inference({"question": q})
    job = emery.Job(store, result.job_id, inputs=JobInputs(system=solver))
    assert job.run_inference({"question": q}).endswith(f"Answer: {fake_answer(q)}")
