"""Built-in tasks for the code harness: each environment's seeded task generator, run by
the baseline loop (``[system] kind = "code_harness"``) when no system is given."""

from __future__ import annotations

from emery.data.tasks.base import BuiltinTask
from emery.systems.harness.envs.calculator import CalculatorEnv
from emery.systems.harness.envs.files import FilesEnv
from emery.systems.harness.envs.kv_store import KeyValueEnv
from emery.verifiers.kinds import NormalizedConfig, NumericConfig


def _harness(environment: str) -> dict[str, str]:
    return {"kind": "code_harness", "environment": environment}


CALCULATOR = BuiltinTask(
    name="harness_calculator",
    description="Answer a quantity question with the calculate and convert tools.",
    generate=CalculatorEnv.generate,
    program=None,
    verifier=NumericConfig(),
    system=_harness("calculator"),
)
KV_STORE = BuiltinTask(
    name="harness_kv",
    description="Answer a question about people and teams with several key-value lookups.",
    generate=KeyValueEnv.generate,
    program=None,
    verifier=NormalizedConfig(),
    system=_harness("kv_store"),
)
FILES = BuiltinTask(
    name="harness_files",
    description="Find a number in a small directory of notes with list, read and search.",
    generate=FilesEnv.generate,
    program=None,
    verifier=NumericConfig(),
    system=_harness("files"),
)
TASKS = (CALCULATOR, KV_STORE, FILES)
