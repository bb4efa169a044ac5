"""The shared harness of the quality benchmarks: one task, one model, one budget, many rows.

A row is one optimizer run: an emery algorithm (``run_emery``) or a peer library run by a
script in its own virtual environment (``run_peer``). Every row is scored on the same test
split by the same emery evaluator, so test accuracy is measured identically on all sides;
``markdown_table`` prints the rows side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from emery.algorithms import StepRecord, build_algorithm, run_search
from emery.algorithms.context import build_search_context
from emery.core.models import Candidate, Dataset, Demo, Lineage
from emery.data.tasks import builtin_task
from emery.evaluation.budget import BudgetConfig
from emery.evaluation.evaluator import Evaluator
from emery.lm import LMConfig, ResponseCache, UsageMeter, build_lm
from emery.lm.base import LM
from emery.systems.base import System
from emery.systems.prompt_program import PromptProgram
from emery.verifiers.base import Verifier
from emery.verifiers.config import build_verifier

ROOT = Path(__file__).resolve().parents[2]
VENVS = ROOT / ".bench-venvs"


@dataclass(frozen=True)
class TaskSpec:
    """A built-in task cut into train/val/test the same way for every row."""

    task: str = "word_problems"
    n_train: int = 20
    n_val: int = 15
    n_test: int = 30
    data_seed: int = 0
    seed_instruction: str | None = None

    def dataset(self) -> Dataset:
        return builtin_task(self.task).dataset(
            seed=self.data_seed, n_train=self.n_train, n_val=self.n_val, n_test=self.n_test
        )

    def system(self) -> PromptProgram:
        program = builtin_task(self.task).program
        if self.seed_instruction is not None:
            stages = [
                stage.model_copy(update={"instruction": self.seed_instruction})
                if index == 0
                else stage
                for index, stage in enumerate(program.stages)
            ]
            program = program.model_copy(update={"stages": stages})
        return PromptProgram(program)

    def verifier(self) -> Verifier:
        return build_verifier(builtin_task(self.task).verifier)


@dataclass(frozen=True)
class ModelSpec:
    """The model every row uses: in-process (``local/...``) or behind an endpoint."""

    model: str = "local/qwen2.5-coder-0.5b"
    base_url: str | None = None
    task_max_tokens: int = 256
    reflection_max_tokens: int = 400
    n_threads: int | None = None
    cache: Path | None = None

    def config(self, role: str) -> LMConfig:
        max_tokens = self.task_max_tokens if role == "task" else self.reflection_max_tokens
        if self.base_url is None:
            return LMConfig(model=self.model, max_tokens=max_tokens, n_threads=self.n_threads)
        return LMConfig(
            model=f"openai/{self.model}",
            base_url=self.base_url,
            api_key="unused",
            max_tokens=max_tokens,
            timeout_s=600,
        )

    def lms(self, meter: UsageMeter, roles: tuple[str, ...]) -> dict[str, LM]:
        """One metered LM per role, uncached unless ``cache`` names a response cache file
        (for development runs: a benchmark row should pay for its own calls)."""
        store = ResponseCache(self.cache) if self.cache is not None else None
        return {
            role: build_lm(self.config(role), role=role, meter=meter, cache=store) for role in roles
        }


class RoleStats(BaseModel):
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class RowReport(BaseModel):
    """One row of the table: what a run found, what it cost, and its scores."""

    name: str
    baseline_val: float | None = None
    best_val: float | None = None
    baseline_test: float | None = None
    best_test: float | None = None
    metric_calls: int = 0
    lm: dict[str, RoleStats] = Field(default_factory=dict)
    wall_time_s: float = 0.0
    stop_reason: str = ""
    best_components: dict[str, str] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)


@dataclass
class EmeryRun:
    """The records of an emery run, for scripts that want more than the row."""

    report: RowReport
    records: list[StepRecord] = field(default_factory=list)
    candidates: dict[str, Candidate] = field(default_factory=dict)


async def score(
    system: System,
    verifier: Verifier,
    lm: LM,
    components: dict[str, str],
    dataset: Dataset,
    split: str,
    concurrency: int,
    demos: dict[str, tuple[Demo, ...]] | None = None,
) -> float:
    """Mean score of a component assignment (and its few-shot demos, for programs that
    have them, e.g. MIPRO's) on one split (uncharged, reporting only)."""
    candidate = Candidate(
        components=components, demos=demos or {}, lineage=Lineage(operation="manual")
    )
    evaluator = Evaluator(system, verifier, lm, concurrency=concurrency)
    examples = dataset.split(split)  # type: ignore[arg-type]
    result = await evaluator.evaluate(candidate, examples, split)  # type: ignore[arg-type]
    return result.mean


async def run_emery(
    name: str,
    algorithm: str,
    settings: dict[str, Any],
    task: TaskSpec,
    model: ModelSpec,
    *,
    metric_calls: int,
    seed: int = 0,
    concurrency: int = 4,
    on_step: Any = None,
) -> EmeryRun:
    """Run one emery algorithm to its end, then score the seed and the best on test."""
    dataset, system, verifier = task.dataset(), task.system(), task.verifier()
    meter = UsageMeter()
    lms = model.lms(meter, ("task", "reflection", "proposer"))
    ctx = build_search_context(
        system=system,
        dataset=dataset,
        verifier=verifier,
        lms=lms,
        budget=BudgetConfig(metric_calls=metric_calls),
        meter=meter,
        seed=seed,
        concurrency=concurrency,
    )
    records: list[StepRecord] = []

    async def keep(record: StepRecord) -> None:
        records.append(record)
        if on_step is not None:
            on_step(record)

    started = time.perf_counter()
    outcome = await run_search(build_algorithm(algorithm, settings), ctx, on_step=keep)
    wall = time.perf_counter() - started
    usage = {
        role: RoleStats(
            calls=u.calls, prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens
        )
        for role, u in meter.by_role().items()
    }
    state = outcome.state
    seed_candidate = ctx.candidates[state.seed_candidate_id]
    best = ctx.candidates[state.best_candidate_id]
    test_lm = model.lms(UsageMeter(), ("task",))["task"]
    report = RowReport(
        name=name,
        baseline_val=state.baseline_val_score,
        best_val=state.best_val_score,
        baseline_test=await score(
            system,
            verifier,
            test_lm,
            seed_candidate.components,
            dataset,
            "test",
            concurrency,
            seed_candidate.demos,
        ),
        best_test=await score(
            system, verifier, test_lm, best.components, dataset, "test", concurrency, best.demos
        ),
        metric_calls=ctx.budget.usage.metric_calls,
        lm=usage,
        wall_time_s=wall,
        stop_reason=outcome.reason,
        best_components=dict(best.components),
    )
    return EmeryRun(report=report, records=records, candidates=dict(ctx.candidates))


def comparison_parser(description: str, *, port: int) -> argparse.ArgumentParser:
    """The arguments every side-by-side script shares: task, splits, model, endpoint, output."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b")
    parser.add_argument("--n-train", type=int, default=20)
    parser.add_argument("--n-val", type=int, default=15)
    parser.add_argument("--n-test", type=int, default=50)
    parser.add_argument("--task-max-tokens", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--port", type=int, default=port)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--output", type=Path, default=None, help="write the rows here (JSON)")
    parser.add_argument("--smoke", action="store_true", help="SmolLM2 and a tiny budget")
    return parser


def ensure_venv(name: str, requirements: list[str]) -> Path:
    """``.bench-venvs/<name>`` with ``requirements`` installed; its python executable."""
    venv = VENVS / name
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    wanted = "\n".join(requirements)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if not marker.exists() or marker.read_text() != wanted:
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *requirements], check=True)
        marker.write_text(wanted)
    return python


def run_peer(python: Path, script: Path, spec: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Run a peer script in its venv: it reads ``spec`` as JSON and writes its result as JSON."""
    spec_path = Path(spec["workdir"]) / f"{script.stem}-spec.json"
    out_path = Path(spec["workdir"]) / f"{script.stem}-result.json"
    spec_path.write_text(json.dumps(spec))
    subprocess.run(
        [str(python), str(script), str(spec_path), str(out_path)], check=True, timeout=timeout_s
    )
    result: dict[str, Any] = json.loads(out_path.read_text())
    return result


def peer_examples(dataset: Dataset, split: str) -> list[dict[str, Any]]:
    """A split as plain JSON rows for peer scripts: id, input fields, expected output."""
    return [
        {"id": e.id, "input": e.input, "expected": e.expected}
        for e in dataset.split(split)  # type: ignore[arg-type]
    ]


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def markdown_table(rows: list[RowReport]) -> str:
    """The rows side by side: scores, metric calls, LM calls and tokens by role, time."""
    roles = sorted({role for row in rows for role in row.lm if row.lm[role].calls})
    header = [
        "run",
        "test (seed → best)",
        "val (seed → best)",
        "metric calls",
        *[f"{role} calls / tokens in+out" for role in roles],
        "wall time",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [
            row.name,
            f"{_pct(row.baseline_test)} → {_pct(row.best_test)}",
            f"{_pct(row.baseline_val)} → {_pct(row.best_val)}",
            str(row.metric_calls),
        ]
        for role in roles:
            stats = row.lm.get(role, RoleStats())
            cells.append(f"{stats.calls} / {stats.prompt_tokens:,}+{stats.completion_tokens:,}")
        cells.append(f"{row.wall_time_s / 60:.1f} min")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run(coro: Any) -> Any:
    """``asyncio.run`` for the scripts."""
    return asyncio.run(coro)


class Server:
    """``emery serve`` in a subprocess: one OpenAI-compatible endpoint for every row."""

    def __init__(self, model: str, port: int, log: Path) -> None:
        self.model = model
        self.port = port
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> Server:
        import urllib.request

        emery = Path(sys.executable).with_name("emery")
        handle = self.log.open("wb")
        self.process = subprocess.Popen(
            [str(emery), "serve", "--model", self.model, "--port", str(self.port)],
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"emery serve exited; see {self.log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2):
                    return self
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"emery serve did not answer within 120 s; see {self.log}")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
