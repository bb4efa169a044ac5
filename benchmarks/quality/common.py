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
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field

from emery.algorithms import StepRecord, build_algorithm, run_search
from emery.algorithms.context import build_search_context
from emery.config.loading import load_config
from emery.config.resolve import reference_candidates, resolve_dataset, resolve_system
from emery.config.schema import JobConfig
from emery.core.models import Candidate, Dataset, Demo, Lineage, Split
from emery.data.tasks import builtin_task
from emery.evaluation.budget import BudgetConfig
from emery.evaluation.eval_result import EvalResult
from emery.evaluation.evaluator import Evaluator
from emery.evaluation.stats import ScoreSummary
from emery.lm import LMConfig, ResponseCache, UsageMeter, build_lm
from emery.lm.base import LM
from emery.systems.base import System
from emery.systems.prompt_program import PromptProgram, StageConfig
from emery.systems.templates import placeholders, render
from emery.verifiers.base import Verifier
from emery.verifiers.config import VerifierConfig, build_verifier

ROOT = Path(__file__).resolve().parents[2]
VENVS = ROOT / ".bench-venvs"
SPLITS: tuple[Split, ...] = ("train", "val", "test")


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

    def verifier_config(self) -> VerifierConfig:
        return builtin_task(self.task).verifier

    def verifier(self) -> Verifier:
        return build_verifier(self.verifier_config())

    def references(self) -> dict[str, Candidate]:
        return {}


@dataclass(frozen=True)
class ConfigTask:
    """A job config's file dataset, seed program, verifier and ``[references.NAME]``, resolved
    as ``emery train`` resolves them (the same rows); ``n_*`` given here override the config's."""

    path: Path
    n_train: int | None = None
    n_val: int | None = None
    n_test: int | None = None

    @cached_property
    def config(self) -> JobConfig:
        config = load_config(self.path)
        sizes = {"n_train": self.n_train, "n_val": self.n_val, "n_test": self.n_test}
        given = {key: value for key, value in sizes.items() if value is not None}
        return config.model_copy(update={"dataset": config.dataset.model_copy(update=given)})

    @cached_property
    def _dataset(self) -> Dataset:
        return resolve_dataset(self.config, base_dir=self.path.resolve().parent)

    def dataset(self) -> Dataset:
        return self._dataset

    def system(self) -> PromptProgram:
        system = resolve_system(self.config)
        if not isinstance(system, PromptProgram):
            raise SystemExit(f"{self.path}: the peer scripts take prompt_program systems only")
        return system

    def verifier_config(self) -> VerifierConfig:
        if self.config.verifier is not None:
            return self.config.verifier
        return VerifierConfig.model_validate(self.dataset().verifier or {})

    def verifier(self) -> Verifier:
        return build_verifier(self.verifier_config())

    def references(self) -> dict[str, Candidate]:
        return reference_candidates(self.config, self.system(), self.dataset())


class Task(Protocol):
    """What a row needs of its task: a built-in ``TaskSpec`` or a real ``ConfigTask``."""

    def dataset(self) -> Dataset: ...
    def system(self) -> PromptProgram: ...
    def verifier_config(self) -> VerifierConfig: ...
    def verifier(self) -> Verifier: ...
    def references(self) -> dict[str, Candidate]: ...


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
    """The records of an emery run, for scripts that want more than the row: ``tests`` holds
    the per-example test results of the seed, the references and the best."""

    report: RowReport
    records: list[StepRecord] = field(default_factory=list)
    candidates: dict[str, Candidate] = field(default_factory=dict)
    tests: dict[str, EvalResult] = field(default_factory=dict)


async def split_result(
    system: System,
    verifier: Verifier,
    lm: LM,
    candidate: Candidate,
    dataset: Dataset,
    split: str,
    concurrency: int,
) -> EvalResult:
    """A candidate scored on one split, example by example (uncharged)."""
    evaluator = Evaluator(system, verifier, lm, concurrency=concurrency)
    examples = dataset.split(split)  # type: ignore[arg-type]
    return await evaluator.evaluate(candidate, examples, split)  # type: ignore[arg-type]


async def run_emery(
    name: str,
    algorithm: str,
    settings: dict[str, Any],
    task: Task,
    model: ModelSpec,
    *,
    metric_calls: int,
    wall_time_s: float | None = None,
    seed: int = 0,
    concurrency: int = 4,
    on_step: Any = None,
    known_tests: Mapping[str, EvalResult] | None = None,
) -> EmeryRun:
    """Run one emery algorithm to its end, then score the seed, the references (if any) and
    the best on test (``known_tests``: results of the seed and references already scored on
    this test split, reused instead of scored again)."""
    dataset, system, verifier = task.dataset(), task.system(), task.verifier()
    meter = UsageMeter()
    lms = model.lms(meter, ("task", "reflection", "proposer"))
    ctx = build_search_context(
        system=system,
        dataset=dataset,
        verifier=verifier,
        lms=lms,
        budget=BudgetConfig(metric_calls=metric_calls, wall_time_s=wall_time_s),
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
    best = ctx.candidates[state.best_candidate_id]
    report = RowReport(
        name=name,
        baseline_val=state.baseline_val_score,
        best_val=state.best_val_score,
        metric_calls=ctx.budget.usage.metric_calls,
        lm=usage,
        wall_time_s=wall,
        stop_reason=outcome.reason,
        best_components=dict(best.components),
    )
    tests = await results_on_test(task, model, best, concurrency, known_tests)
    report = with_tests(report, {name: result.summary() for name, result in tests.items()})
    return EmeryRun(report=report, records=records, candidates=dict(ctx.candidates), tests=tests)


def comparison_parser(description: str, *, port: int) -> argparse.ArgumentParser:
    """The arguments every side-by-side script shares: task, splits, model, endpoint, output."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="a real job config (real/clinc.toml): its rows, seed, verifier, budget, references",
    )
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b")
    parser.add_argument("--n-train", type=int, default=None, help="default 20 (or the config's)")
    parser.add_argument("--n-val", type=int, default=None, help="default 15 (or the config's)")
    parser.add_argument("--n-test", type=int, default=None, help="default 50 (or the config's)")
    parser.add_argument(
        "--wall-time", type=float, default=None, help="search cap, s (default: the config's)"
    )
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


PEER_FIELD = "message"
"""The peers' one input field when the stage's user turn is more than one ``{field}``."""


def peer_examples(dataset: Dataset, split: str, stage: StageConfig) -> list[dict[str, Any]]:
    """A split as plain JSON rows for peer scripts: id, the one input a peer sends as the
    user turn (``input_field``'s name), the example's own fields and the expected output."""
    name, template = input_field(stage), stage.messages[0].template
    return [
        {
            "id": e.id,
            "input": {name: render(template, e.input)},
            "fields": e.input,
            "expected": e.expected,
        }
        for e in dataset.split(split)  # type: ignore[arg-type]
    ]


def task_from(args: argparse.Namespace, metric_calls: int | None = None) -> Task:
    """``--config``'s real task, else the built-in word problems. Afterwards ``args.n_*``
    hold the sizes used, and an unset ``args.metric_calls``/``wall_time`` the config's
    budget (else ``metric_calls``)."""
    task: Task
    if args.config is not None:
        task = ConfigTask(args.config, args.n_train, args.n_val, args.n_test)
        budget = task.config.job.budget
        metric_calls = budget.metric_calls or metric_calls
        if args.wall_time is None:
            args.wall_time = budget.wall_time_s
    else:
        given = zip((args.n_train, args.n_val, args.n_test), (20, 15, 50), strict=True)
        n_train, n_val, n_test = (default if n is None else n for n, default in given)
        task = TaskSpec(n_train=n_train, n_val=n_val, n_test=n_test)
    if getattr(args, "metric_calls", 0) is None:
        args.metric_calls = metric_calls
    dataset = task.dataset()
    args.n_train, args.n_val, args.n_test = (len(dataset.split(s)) for s in SPLITS)
    return task


def input_field(stage: StageConfig) -> str:
    """The name of the one input a peer sends as the user turn: the field when the stage's
    one user turn is just ``{field}``, else ``PEER_FIELD``, holding the turn as emery renders
    it (so a peer's task model reads the same user turn as emery's)."""
    messages = stage.messages
    if len(messages) != 1 or messages[0].role != "user":
        raise SystemExit(f"stage {stage.name!r}: a peer needs a stage with one user turn")
    fields = placeholders(messages[0].template)
    if len(fields) == 1 and messages[0].template.strip() == f"{{{next(iter(fields))}}}":
        return fields.pop()
    return PEER_FIELD


def peer_spec(task: Task, model: ModelSpec, workdir: Path) -> dict[str, Any]:
    """What every peer script reads about the task: the seed program's one stage as plain
    data (its instruction with the placeholders filled, as emery renders it: a peer's prompt
    is one text), its parser, the verifier, the train/val/test rows and the endpoint."""
    dataset, stages = task.dataset(), task.system().config.stages
    if len(stages) != 1:
        raise SystemExit("the peer scripts take one-stage programs only")
    stage = stages[0]
    seeds = {render(stage.instruction, e.input) for split in SPLITS for e in dataset.split(split)}
    if len(seeds) != 1:
        raise SystemExit(f"stage {stage.name!r}: the seed renders differently per example")
    return {
        "workdir": str(workdir),
        "base_url": model.base_url,
        "model": model.model,
        "component": stage.name,
        "seed_instruction": seeds.pop(),
        "input_field": input_field(stage),
        "parser": stage.parser.model_dump(),
        "verifier": task.verifier_config().model_dump(),
        "task_max_tokens": stage.max_tokens or model.task_max_tokens,
        **{split: peer_examples(dataset, split, stage) for split in SPLITS},
    }


def transplant(
    task: Task, components: dict[str, str], demos: dict[str, tuple[Demo, ...]] | None = None
) -> Candidate:
    """A peer's winner as an emery candidate: the seed with the peer's texts (``{name}`` in
    them escaped, so they render as written) and demos."""
    literal = {name: re.sub(r"\{([A-Za-z_]\w*)\}", r"{{\1}}", t) for name, t in components.items()}
    seed = task.system().seed_candidate()
    return Candidate(
        components={**seed.components, **literal},
        demos=demos or {},
        lineage=Lineage(operation="manual", details={"source": "peer"}),
    )


async def results_on_test(
    task: Task,
    model: ModelSpec,
    best: Candidate,
    concurrency: int,
    known: Mapping[str, EvalResult] | None = None,
) -> dict[str, EvalResult]:
    """The seed, each ``[references.NAME]`` and ``best`` on test, example by example, by
    emery's evaluator; a name in ``known`` (not ``best``) takes its result from there."""
    system, verifier, dataset = task.system(), task.verifier(), task.dataset()
    lm = model.lms(UsageMeter(), ("task",))["task"]
    candidates = {"seed": system.seed_candidate(), **task.references(), "best": best}
    reused = {k: v for k, v in (known or {}).items() if k in candidates and k != "best"}
    return {
        name: reused.get(name)
        or await split_result(system, verifier, lm, candidate, dataset, "test", concurrency)
        for name, candidate in candidates.items()
    }


async def test_scores(
    task: Task, model: ModelSpec, best: Candidate, concurrency: int
) -> dict[str, ScoreSummary]:
    """The seed, each ``[references.NAME]`` and ``best`` on test, by emery's evaluator."""
    results = await results_on_test(task, model, best, concurrency)
    return {name: result.summary() for name, result in results.items()}


def with_tests(row: RowReport, tests: dict[str, ScoreSummary]) -> RowReport:
    """``row`` with its test scores: seed and best means, every summary in ``extra``."""
    extra = {**row.extra, "test": {name: s.model_dump() for name, s in tests.items()}}
    return row.model_copy(
        update={
            "baseline_test": tests["seed"].mean,
            "best_test": tests["best"].mean,
            "extra": extra,
        }
    )


def real_markdown(rows: list[RowReport]) -> str:
    """Rows in ``real_data.py``'s table: test with n and intervals (seed, references, best),
    the lifts, val, metric calls, LM calls by role and wall time."""
    from real_data import HEADER, row_markdown

    lines = [HEADER]
    for row in rows:
        tests = row.extra.get("test", {})
        result = {
            "baseline_test": tests.get("seed"),
            "best_test": tests.get("best"),
            "references_test": {k: v for k, v in tests.items() if k not in ("seed", "best")},
            "baseline_val": row.baseline_val,
            "best_val": row.best_val,
            "budget": {"metric_calls": row.metric_calls},
            "usage": {role: stats.model_dump() for role, stats in row.lm.items()},
            "wall_s": row.wall_time_s,
        }
        lines.append(row_markdown(row.name, result))
    return "\n".join(lines)


def print_report(
    args: argparse.Namespace, rows: list[RowReport], setup: str, workdir: Path
) -> None:
    """A side-by-side script's output: the setup line, the table (``real_data.py``'s for a
    ``--config`` task), each row's stop reason and winning texts; the rows to ``--output``."""
    task = args.config or "word_problems"
    sizes = f"train/val/test {args.n_train}/{args.n_val}/{args.n_test}"
    print(f"\n{task}, {args.model} {setup}; {sizes}\n")
    print(real_markdown(rows) if args.config else markdown_table(rows))
    for row in rows:
        print(f"\n{row.name}: stopped: {row.stop_reason}; demos: {row.extra.get('demos', 0)}")
        for name, text in row.best_components.items():
            print(f"{row.name} — winning {name}:\n{text}")
    if args.output is not None:
        args.output.write_text(json.dumps([row.model_dump() for row in rows], indent=2))
    print(f"\n(work files in {workdir}; the repository is {ROOT})")


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
    """``emery proxy`` in a subprocess: one OpenAI-compatible endpoint for every row."""

    def __init__(self, model: str, port: int, log: Path, threads: int | None = None) -> None:
        self.model = model
        self.port = port
        self.log = log
        self.threads = threads
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> Server:
        import urllib.request

        emery = Path(sys.executable).with_name("emery")
        handle = self.log.open("wb")
        threads = ["--threads", str(self.threads)] if self.threads else []
        self.process = subprocess.Popen(
            [str(emery), "proxy", "--model", self.model, "--port", str(self.port), *threads],
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"emery proxy exited; see {self.log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2):
                    return self
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"emery proxy did not answer within 120 s; see {self.log}")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
