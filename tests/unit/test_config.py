"""Job configs: loading TOML/JSON with helpful errors, and resolving them into objects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from emery.config import (
    JobConfig,
    build_models,
    check_system_inputs,
    load_config,
    open_cache,
    parse_config,
    resolve_dataset,
    resolve_system,
    resolve_verifier,
)
from emery.core.errors import ConfigError, DataError
from emery.data.tasks import builtin_task
from emery.systems import PromptProgram, PromptProgramConfig
from emery.verifiers import ExactMatch, NormalizedMatch, NumericMatch, RegexMatch

TASK = {"dataset": {"task": "word_problems"}}


def error_of(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return str(info.value)


def test_minimal_config_defaults() -> None:
    config = parse_config(TASK)
    assert config.dataset.task == "word_problems"
    assert config.lm.task.model == "local/qwen2.5-coder-0.5b"
    assert config.lm.for_role("judge") is config.lm.task
    assert config.runtime.concurrency == 8
    assert config.system is None


def test_top_level_typo_suggests_the_key() -> None:
    message = error_of({"datset": {"task": "word_problems"}})
    assert message == "config: unknown key 'datset'; did you mean 'dataset'?"


def test_an_unknown_key_holding_a_bracket_is_named() -> None:
    """Found by the server's fuzz test: such a key was dropped as a union branch's name."""
    message = error_of({**TASK, "a[b": 1})
    assert message.startswith("config: unknown key 'a[b'; valid keys: job, system, dataset")


def test_typo_next_to_a_valid_dataset_is_reported() -> None:
    message = error_of({**TASK, "runtme": {}})
    assert "unknown key 'runtme'; did you mean 'runtime'?" in message


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {
                **TASK,
                "system": {
                    "stages": [{"name": "s", "instrution": "x", "messages": [{"template": "{q}"}]}]
                },
            },
            "unknown key 'system.stages.0.instrution'; did you mean 'instruction'?",
        ),
        ({**TASK, "lm": {"task": {"modle": "x"}}}, "'lm.task.modle'; did you mean 'model'?"),
        (
            {"dataset": {"task": "word_problems", "fields": {"id_feld": "x"}}},
            "'dataset.fields.id_feld'; did you mean 'id_field'?",
        ),
        ({**TASK, "verifier": {"knd": "exact"}}, "'verifier.knd'; did you mean 'kind'?"),
    ],
)
def test_nested_typo_suggests_the_key(data: dict[str, Any], expected: str) -> None:
    assert expected in error_of(data)


def test_unknown_key_without_a_near_match_lists_valid_keys() -> None:
    message = error_of({**TASK, "runtime": {"zzzzzz": 1}})
    assert "unknown key 'runtime.zzzzzz'" in message
    assert "valid keys:" in message
    assert "concurrency" in message


def test_missing_dataset() -> None:
    assert error_of({}) == "config: missing required key 'dataset'"


def test_both_or_neither_dataset_source() -> None:
    both = error_of({"dataset": {"task": "word_problems", "path": "d.jsonl"}})
    assert "set exactly one of dataset.task" in both
    assert "set exactly one" in error_of({"dataset": {}})


def test_value_errors_name_the_key() -> None:
    message = error_of({**TASK, "runtime": {"concurrency": 0}})
    assert message.startswith("config: runtime.concurrency:")
    assert "greater than or equal to 1" in message
    regex = error_of(
        {
            **TASK,
            "system": {
                "stages": [
                    {"name": "s", "messages": [{"template": "{q}"}], "parser": {"kind": "regex"}}
                ]
            },
        }
    )
    assert "system.stages.0.parser: parser.pattern is required" in regex


INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"job": {"type": "rl"}, "rl": {"learning_rate": INF}}, "rl.learning_rate"),
        ({"job": {"type": "rl"}, "rl": {"temperature": INF}}, "rl.temperature"),
        ({"job": {"type": "rl"}, "rl": {"beta": INF}}, "rl.beta"),
        ({"job": {"type": "sft"}, "sft": {"learning_rate": INF}}, "sft.learning_rate"),
        ({"runtime": {"timeout_s": INF}}, "runtime.timeout_s"),
        ({"job": {"budget": {"lm_cost_usd": INF}}}, "job.budget.lm_cost_usd"),
        ({"lm": {"task": {"timeout_s": NAN}}}, "lm.task.timeout_s"),
        ({"verifier": {"kind": "numeric", "abs_tol": INF}}, "verifier.abs_tol"),
        ({"dataset": {"task": "word_problems", "split": {"train": INF}}}, "dataset.split.train"),
    ],
)
def test_settings_refuse_inf_and_nan(data: dict[str, Any], key: str) -> None:
    message = error_of({**TASK, **data})
    assert message.startswith(f"config: {key}:")
    assert "finite number" in message


def test_algorithm_settings_and_systems_refuse_inf() -> None:
    from emery.algorithms.registry import parse_settings

    with pytest.raises(ConfigError, match="finite number"):
        parse_settings("gepa", {"epsilon": NAN})
    stage = {"name": "s", "messages": [{"template": "{q}"}], "temperature": INF}
    assert "finite number" in error_of({**TASK, "system": {"stages": [stage]}})


def test_load_toml(tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_text(
        """
[job]
name = "demo"

[dataset]
task = "intent"
n_test = 5

[lm.task]
model = "openai/gpt-4o-mini"
temperature = 0.2

[[system.stages]]
name = "classify"
instruction = "Classify."
messages = [{ template = "{message}" }]
"""
    )
    config = load_config(path)
    assert config.job.name == "demo"
    assert config.dataset.n_test == 5
    assert config.lm.task.temperature == 0.2
    assert isinstance(config.system, PromptProgramConfig)
    assert config.system.stages[0].name == "classify"


def test_load_json(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps({"dataset": {"task": "intent"}, "runtime": {"concurrency": 2}}))
    assert load_config(path).runtime.concurrency == 2


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"absent\.toml: config file not found"):
        load_config(tmp_path / "absent.toml")
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("[dataset\ntask = 1")
    with pytest.raises(ConfigError, match=r"bad\.toml: invalid TOML"):
        load_config(bad_toml)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{\n"dataset": }')
    with pytest.raises(ConfigError, match=r"bad\.json:2: invalid JSON"):
        load_config(bad_json)
    not_object = tmp_path / "list.json"
    not_object.write_text("[1]")
    with pytest.raises(ConfigError, match="must be a table/object"):
        load_config(not_object)
    typo = tmp_path / "typo.toml"
    typo.write_text('[datset]\ntask = "intent"\n')
    with pytest.raises(ConfigError, match=r"typo\.toml: unknown key 'datset'; did you mean"):
        load_config(typo)


def test_resolve_system_falls_back_to_the_task_program() -> None:
    system = resolve_system(parse_config(TASK))
    assert isinstance(system, PromptProgram)
    assert system.config == builtin_task("word_problems").program
    custom = parse_config(
        {
            **TASK,
            "system": {
                "name": "mine",
                "stages": [{"name": "s", "messages": [{"template": "{question}"}]}],
            },
        }
    )
    assert resolve_system(custom).name == "mine"


def test_file_dataset_without_system_needs_the_file(tmp_path: Path) -> None:
    config = parse_config({"dataset": {"path": str(tmp_path / "d.jsonl")}})
    with pytest.raises(DataError, match="dataset file not found"):
        resolve_system(config)


def test_resolve_dataset_for_a_task_with_sizes_and_limit() -> None:
    config = parse_config({"dataset": {"task": "intent", "n_train": 4, "n_val": 3, "n_test": 9}})
    assert resolve_dataset(config).sizes() == {"train": 4, "val": 3, "test": 9}
    limited = parse_config({"dataset": {"task": "intent", "n_test": 9, "limit": 2}})
    assert resolve_dataset(limited).sizes() == {"train": 2, "val": 2, "test": 2}


def test_resolve_dataset_from_a_relative_path(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text(
        "".join(json.dumps({"id": str(i), "q": i, "expected": i}) + "\n" for i in range(8))
    )
    config = parse_config(
        {"dataset": {"path": "d.jsonl", "seed": 5, "split": {"train": 1, "val": 0, "test": 1}}}
    )
    dataset = resolve_dataset(config, base_dir=tmp_path)
    assert dataset.sizes() == {"train": 4, "val": 0, "test": 4}


def test_resolve_verifier_order() -> None:
    config = parse_config(TASK)
    dataset = resolve_dataset(parse_config({"dataset": {"task": "word_problems", "n_test": 1}}))
    assert isinstance(resolve_verifier(config, dataset), NumericMatch)
    explicit = parse_config({**TASK, "verifier": {"kind": "regex", "pattern": "x"}})
    assert isinstance(resolve_verifier(explicit, dataset), RegexMatch)
    no_hint = dataset.model_copy(update={"verifier": None})
    assert isinstance(resolve_verifier(config, no_hint), ExactMatch)
    intent = resolve_dataset(parse_config({"dataset": {"task": "intent", "n_test": 1}}))
    assert isinstance(
        resolve_verifier(parse_config({"dataset": {"task": "intent"}}), intent), NormalizedMatch
    )


def test_check_system_inputs_uses_fields_common_to_all_examples(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text(
        json.dumps({"question": "a", "hint": "h"}) + "\n" + json.dumps({"question": "b"}) + "\n"
    )
    config = JobConfig.model_validate(
        {
            "dataset": {"path": str(tmp_path / "d.jsonl")},
            "system": {"stages": [{"name": "s", "messages": [{"template": "{question} {hint}"}]}]},
        }
    )
    with pytest.raises(ConfigError, match=r"placeholder \{hint\}"):
        check_system_inputs(resolve_system(config), resolve_dataset(config))


def test_build_models_and_open_cache(tmp_path: Path) -> None:
    config = parse_config(
        {
            **TASK,
            "lm": {
                "task": {"model": "python/fake_models:ECHO_LM"},
                "judge": {"model": "python/fake_models:make_echo_lm", "temperature": 0.5},
            },
            "runtime": {"workdir": "work"},
        }
    )
    cache = open_cache(config, base_dir=tmp_path)
    assert cache is not None
    try:
        assert Path(cache.path) == tmp_path / "work" / "lm_cache.db"
        models = build_models(config, roles=("task", "judge"), cache=cache)
        assert set(models.by_role) == {"task", "judge"}
        assert models["task"].model == "fake/echo"
        assert models["judge"].model == "fake/echo-factory"
        assert models["judge"].temperature == 0.5
        assert models["task"].meter is models.meter
    finally:
        cache.close()
    no_cache = parse_config({**TASK, "runtime": {"cache": False}})
    assert open_cache(no_cache, base_dir=tmp_path) is None
