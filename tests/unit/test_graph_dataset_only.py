"""A file dataset with no ``[system]``: the job starts from a one-node graph built from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import emery
from emery.config import parse_config, resolve_dataset
from emery.config.resolve import resolve_system
from emery.core.errors import ConfigError
from emery.lm import FakeLM
from emery.store import MemoryStore
from emery.systems.graph.seed import starting_graph
from emery.systems.graph.system import GraphSystem

CAPITALS = {"France": "Paris", "Japan": "Tokyo", "Peru": "Lima", "Chile": "Santiago"}


def task_set(tmp_path: Path, description: str = "Name the capital city of the country.") -> Path:
    countries = list(CAPITALS) * 3
    document = {
        "metadata": {"name": "capitals", "description": description, "verifier": "normalized"},
        "tasks": [
            {"id": f"t{i}", "input": {"country": country}} for i, country in enumerate(countries)
        ],
        "gold_outputs": [
            {"task_id": f"t{i}", "output": CAPITALS[country]} for i, country in enumerate(countries)
        ],
    }
    path = tmp_path / "capitals.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_a_file_dataset_without_a_system_starts_from_a_one_node_graph(tmp_path: Path) -> None:
    config = parse_config({"dataset": {"path": str(task_set(tmp_path))}})
    system = resolve_system(config)
    assert isinstance(system, GraphSystem)
    assert system.seed_candidate().components == {"solve": "Name the capital city of the country."}
    [node] = system.graph.llm_nodes()
    assert [m.template for m in node.messages] == ["{country}"]
    system.check_inputs({"country"})
    # the same graph when the caller already holds the dataset
    again = resolve_system(config, resolve_dataset(config))
    assert isinstance(again, GraphSystem)
    assert again.version() == system.version()


def test_the_seed_template_names_every_shared_field_and_avoids_their_names(
    tmp_path: Path,
) -> None:
    rows = [{"solve": "2+2", "hint": "add", "expected": "4"}]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    config = parse_config({"dataset": {"path": str(path)}})
    graph = starting_graph(resolve_dataset(config))
    [node] = graph.llm_nodes()
    assert node.name == "solve_node"
    assert node.messages[0].template == "solve: {solve}\nhint: {hint}"
    assert "Reply with the answer only" in node.instruction


def test_fields_that_cannot_be_placeholders_are_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"the question": "q", "expected": "a"}) + "\n", encoding="utf-8")
    config = parse_config({"dataset": {"path": str(path)}})
    with pytest.raises(ConfigError, match="no input field usable as a"):
        resolve_system(config)


def test_optimize_with_only_a_task_set_runs_the_starting_graph(tmp_path: Path) -> None:
    def reply(messages: list[dict[str, str]]) -> str:
        told = "capital" in messages[0]["content"]
        country = messages[-1]["content"]
        return CAPITALS[country] if told else f"{country} is a country"

    store = MemoryStore()
    result = emery.optimize(
        None,
        str(task_set(tmp_path)),
        algorithm="baseline",
        lm=FakeLM(reply, model="fake/task"),
        runtime={"workdir": str(tmp_path / ".emery")},
        store=store,
        progress=False,
    )
    assert result.state == "succeeded"
    assert result.baseline_val == 1.0
    job = store.get_job(result.job_id)
    assert job is not None
    assert "system" not in (job.config or {}) or job.config.get("system") is None
