"""Harness episode processes against hostile code: a forged ending, an unknown message, a
process left running after a timeout, and an environment that is not one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness_support import calculator_examples, calculator_lm

from emery.core.errors import ConfigError
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate
from emery.evaluation import Evaluator
from emery.systems.harness.code import CODE_COMPONENT
from emery.systems.harness.pool import CodeProcessPool
from emery.systems.harness.system import CodeHarness, CodeHarnessConfig
from emery.verifiers import ExactMatch


@pytest.fixture
def pool() -> Iterator[CodeProcessPool]:
    """One reusable process, as the job's pool would keep it."""
    pool = CodeProcessPool(keep=1)
    yield pool
    pool.close()


def episode(system: CodeHarness, code: str | None = None) -> ExampleResult:
    evaluator = Evaluator(system, ExactMatch(), calculator_lm())
    seed = system.seed_candidate()
    components = {**seed.components, **({CODE_COMPONENT: code} if code else {})}
    result = asyncio.run(
        evaluator.evaluate(Candidate(components=components), calculator_examples(1), "val")
    )
    return result.results[0]


def gone(pid: int, within_s: float = 3.0) -> bool:
    """Whether process ``pid`` ends (exits, or is a zombie) within ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.02)
    return False


def forging(pid_file: Path) -> str:
    """Code that sends a ``done`` on whatever channel it can find, then goes on."""
    return (
        "import gc, os, time\n\n"
        "def run(kit):\n"
        f"    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "    channel = next(o for o in gc.get_objects() if type(o).__name__ == 'Channel')\n"
        "    channel.send({'type': 'done', 'answer': 'forged'})\n"
        "    time.sleep(0.5)\n"
        "    return 'late'\n"
    )


def test_a_forged_done_ends_the_episode_and_the_code_with_it(
    pool: CodeProcessPool, tmp_path: Path
) -> None:
    system = CodeHarness(CodeHarnessConfig(environment="calculator", timeout_s=10), pool=pool)
    pid_file = tmp_path / "pid"
    first = episode(system, forging(pid_file))
    assert first.output == "forged"
    assert gone(int(pid_file.read_text()), within_s=0.2)  # the code did not go on
    second = episode(system)  # the same process, its channel not fed by the first episode
    assert second.score == 1.0
    assert pool.started == 1


def test_an_unknown_message_stops_the_episode_with_protocol(pool: CodeProcessPool) -> None:
    system = CodeHarness(CodeHarnessConfig(environment="calculator", timeout_s=10), pool=pool)
    code = "def run(kit):\n    kit._request({'type': 'hello'})\n    return 'x'\n"
    result = episode(system, code)
    assert result.error is not None
    assert "episode stopped (protocol)" in result.error
    assert "'hello'" in result.error
    assert episode(system).score == 1.0


def test_a_timed_out_episode_leaves_no_process_behind(
    pool: CodeProcessPool, tmp_path: Path
) -> None:
    system = CodeHarness(CodeHarnessConfig(environment="calculator", timeout_s=0.6), pool=pool)
    assert episode(system).score == 1.0  # a started process: the time limit is the code's
    pid_file = tmp_path / "pid"
    code = (
        "import subprocess, time\n\n"
        "def run(kit):\n"
        "    sleeper = subprocess.Popen(['sleep', '60'])\n"
        f"    open({str(pid_file)!r}, 'w').write(str(sleeper.pid))\n"
        "    time.sleep(60)\n"
    )
    result = episode(system, code)
    assert result.error is not None
    assert "episode stopped (timeout)" in result.error
    assert gone(int(pid_file.read_text()))


@pytest.mark.parametrize(
    ("spec", "expect"),
    [
        ("json:loads", "not an environment class or factory"),
        ("json:JSONDecoder", "made a JSONDecoder, not an environment (it has no reset, execute"),
    ],
)
def test_a_callable_that_makes_no_environment_is_a_config_error(spec: str, expect: str) -> None:
    with pytest.raises(ConfigError, match=r"system\.environment: ") as info:
        CodeHarness(CodeHarnessConfig(environment=spec))
    assert expect in str(info.value)
