"""One plug-in lookup (``core/plugins.py``): a built-in name, ``module:attr``, an entry point."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from emery.algorithms.registry import (
    ALGORITHMS,
    algorithm_spec,
    checked_settings,
    settings_table,
)
from emery.core import plugins
from emery.core.errors import ConfigError
from emery.systems.registry import system_kind

RANDOM_SEARCH = EntryPoint(name="random", value="jobs_support:SPEC", group="emery.algorithms")


def test_a_built_in_name_and_a_module_attr_reference_give_the_spec() -> None:
    assert algorithm_spec("gepa").name == "gepa"
    assert algorithm_spec("jobs_support:SPEC").name == "random_search"
    assert system_kind("emery.systems.task_app:KIND").name == "task_app"


def test_an_entry_point_of_the_group_is_found_and_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        plugins,
        "entry_points",
        lambda group: [RANDOM_SEARCH] if group == RANDOM_SEARCH.group else [],
    )
    assert algorithm_spec("random").name == "random_search"
    assert "random" in ALGORITHMS.names()
    with pytest.raises(ConfigError, match="known algorithms: apo, baseline, gepa, graph_gepa"):
        algorithm_spec("nope")


def test_a_broken_entry_point_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = EntryPoint(name="broken", value="no_such_module_x:SPEC", group="emery.algorithms")
    monkeypatch.setattr(plugins, "entry_points", lambda group: [broken])
    with pytest.raises(ConfigError) as info:
        algorithm_spec("broken")
    assert str(info.value).startswith("job.algorithm: the emery.algorithms entry point 'broken'")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("magic", "job.algorithm: unknown algorithm 'magic'; known algorithms: apo, baseline"),
        ("no_such_module_x:SPEC", "job.algorithm: cannot import module 'no_such_module_x'"),
        ("jobs_support:NOPE", "job.algorithm: module 'jobs_support' has no attribute 'NOPE'"),
        ("jobs_support:task_lm", "job.algorithm: 'jobs_support:task_lm' is a function; expected"),
    ],
)
def test_a_bad_reference_is_a_one_line_config_error(ref: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        algorithm_spec(ref)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_a_system_kind_keeps_its_message() -> None:
    with pytest.raises(ConfigError, match=r"^system.kind: unknown kind 'robot'; known kinds: "):
        system_kind("robot")


def test_a_plug_in_reads_the_table_under_its_spec_name() -> None:
    tables = {"random_search": {"iterations": 2}}
    assert settings_table("jobs_support:SPEC", tables) == {"iterations": 2}
    assert settings_table("jobs_support:SPEC", {"jobs_support:SPEC": {"iterations": 3}}) == {
        "iterations": 3
    }
    assert settings_table("gepa", tables) is None


def test_a_plug_ins_own_table_is_known_and_a_typo_is_not() -> None:
    settings = checked_settings("jobs_support:SPEC", {"random_search": {"iterations": 2}})
    assert settings.model_dump()["iterations"] == 2
    with pytest.raises(ConfigError, match=r"\[algorithm.gepaa\]; did you mean 'gepa'\?"):
        checked_settings("jobs_support:SPEC", {"random_search": {}, "gepaa": {}})
    with pytest.raises(ConfigError, match=r"^algorithm.random_search.iterations: "):
        checked_settings("jobs_support:SPEC", {"random_search": {"iterations": 0}})
