"""A benchmark that looks like a user: every development set and built-in task, each at
several metric-call budgets and search seeds, the algorithms' defaults, the splits the
defaults choose from the budget (no hand-set ``n_val``), the seed and the expert prompt
scored on the same test examples in the same run, and a verdict on the targets.

    .venv/bin/python benchmarks/quality/suite.py --out suite.jsonl            # hours
    .venv/bin/python benchmarks/quality/suite.py --sets svamp --budgets 100 --seeds 0 \\
        --algorithms mipro --out /tmp/smoke.jsonl                            # one row
    .venv/bin/python benchmarks/quality/suite.py --resume --out suite.jsonl   # go on
    .venv/bin/python benchmarks/quality/suite.py --table --out suite.jsonl    # print only

A set is ``svamp``, ``clinc``, ``restaurant8k``, ``humaneval`` (``real/<name>.toml``), a
built-in task (``word_problems``) or a job config's path. Every row is appended to ``--out``
(one JSON object a line) as it finishes. ``--peers`` adds gepa 0.1.4 and DSPy MIPROv2 at 200
calls (``--peers dspy`` one of them; ``gepa_vs_library.py``/``mipro_vs_dspy.py``'s
machinery, behind one ``emery proxy``); on ``humaneval`` they read and run the replies' code
with emery's own ``verifiers/code_run.py`` (``peers/scoring.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import FrameType
from typing import Any

from common import ConfigTask, ModelSpec, RowReport, Server, results_on_test, run_emery
from suite_table import (
    CHECK_BUDGET,
    HEADER,
    Key,
    SuiteRow,
    TrialRow,
    append_row,
    channels_markdown,
    compared,
    load_for_table,
    markdown,
    read_rows,
    row_markdown,
    verdict_markdown,
)

from emery.algorithms.mipro import MiproState
from emery.algorithms.search_loop import StepRecord
from emery.config.loading import load_config
from emery.config.schema import DatasetConfig, JobConfig
from emery.core.errors import EmeryError
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate
from emery.data.tasks import builtin_task
from emery.evaluation.eval_result import EvalResult

HERE = Path(__file__).resolve().parent
DEVELOPMENT_SETS = ("svamp", "clinc", "restaurant8k", "humaneval")
DEFAULT_SETS = (*DEVELOPMENT_SETS, "word_problems")
PEERS = ("gepa 0.1.4", "dspy MIPROv2")


@dataclass(frozen=True)
class SuiteTask(ConfigTask):
    """A set at one budget: a job config's (or a built-in task's) rows, seed, verifier and
    references, the budget as its metric calls and ``n_val`` unset, so ``resolve_dataset``
    sizes val from the budget as ``emery train`` would; train and test as configured."""

    metric_calls: int = CHECK_BUDGET
    builtin: str | None = None

    @cached_property
    def config(self) -> JobConfig:
        base = (
            JobConfig(dataset=DatasetConfig(task=self.builtin))
            if self.builtin is not None
            else load_config(self.path)
        )
        budget = base.job.budget.model_copy(update={"metric_calls": self.metric_calls})
        return base.model_copy(
            update={
                "job": base.job.model_copy(update={"budget": budget}),
                "dataset": base.dataset.model_copy(update={"n_val": None}),
            }
        )


def set_task(name: str, budget: int) -> SuiteTask:
    """The set ``name`` (a development set, a built-in task or a config path) at ``budget``."""
    if name in DEVELOPMENT_SETS:
        return SuiteTask(HERE / "real" / f"{name}.toml", metric_calls=budget)
    if name.endswith(".toml"):
        if not Path(name).is_file():
            raise SystemExit(f"error: set {name!r}: no such config file")
        return SuiteTask(Path(name), metric_calls=budget)
    try:
        builtin_task(name)
    except (KeyError, ValueError, EmeryError):
        known = ", ".join(DEFAULT_SETS)
        raise SystemExit(
            f"error: unknown set {name!r} (one of {known}, a built-in task, or a .toml config)"
        ) from None
    return SuiteTask(Path(name), metric_calls=budget, builtin=name)


def set_label(name: str) -> str:
    return Path(name).stem if name.endswith(".toml") else name


def _ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        message = f"not a comma-separated list of integers: {text!r}"
        raise argparse.ArgumentTypeError(message) from None
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"need non-negative integers: {text!r}")
    return values


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=_names, default=list(DEFAULT_SETS))
    parser.add_argument("--budgets", type=_ints, default=[100, 200, 400])
    parser.add_argument("--seeds", type=_ints, default=[0, 1, 2])
    parser.add_argument("--algorithms", type=_names, default=["gepa", "mipro", "apo"])
    parser.add_argument(
        "--peers",
        nargs="*",
        choices=[peer.split()[0] for peer in PEERS],
        default=None,
        help=f"peers at {CHECK_BUDGET} calls: gepa, dspy (both when none is named)",
    )
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b")
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible endpoint")
    parser.add_argument("--task-max-tokens", type=int, default=256)
    parser.add_argument("--reflection-max-tokens", type=int, default=400)
    parser.add_argument("--wall-time", type=float, default=None, help="cap per search, s")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument(
        "--threads", type=int, default=None, help="llama.cpp threads (default: every core)"
    )
    parser.add_argument("--port", type=int, default=8433, help="emery proxy for --peers")
    parser.add_argument("--out", type=Path, default=Path("suite-results.jsonl"))
    parser.add_argument("--resume", action="store_true", help="skip rows already in --out")
    parser.add_argument("--table", action="store_true", help="print --out's table, run nothing")
    args = parser.parse_args(argv)
    unknown = set(args.algorithms) - {"gepa", "mipro", "apo", "baseline"}
    if unknown:
        parser.error(f"unknown algorithm {sorted(unknown)[0]!r} (gepa, mipro, apo)")
    return args


def chosen_peers(args: argparse.Namespace) -> tuple[str, ...]:
    """The peers ``--peers`` names (by first word), every peer when it names none."""
    if args.peers is None:
        return ()
    return tuple(peer for peer in PEERS if not args.peers or peer.split()[0] in args.peers)


def planned(args: argparse.Namespace) -> Iterator[Key]:
    """Every row the arguments ask for, in the order the suite runs them."""
    for set_name in args.sets:
        for budget in args.budgets:
            for seed in args.seeds:
                for algorithm in args.algorithms:
                    yield (set_label(set_name), budget, seed, algorithm)
                if budget == CHECK_BUDGET:
                    for peer in chosen_peers(args):
                        yield (set_label(set_name), budget, seed, peer)


def _aligned(result: EvalResult, ids: Sequence[str]) -> list[float]:
    by_id = {r.example_id: r.score for r in result.results}
    return [by_id[i] for i in ids]


def _known(row: SuiteRow) -> dict[str, EvalResult]:
    """A done row's seed and expert test scores as results the next row can reuse."""
    return {
        name: EvalResult(
            candidate_id=name,
            split="test",
            results=[
                ExampleResult(candidate_id=name, example_id=i, split="test", score=s)
                for i, s in zip(row.test_ids, row.scores[name], strict=True)
            ],
        )
        for name in ("seed", "expert")
        if name in row.scores
    }


def mipro_trials(records: Sequence[StepRecord]) -> list[TrialRow]:
    """A MIPRO run's trials with where each choice came from (none for other algorithms)."""
    state = records[-1].state if records else None
    if not isinstance(state, MiproState):
        return []
    return [
        TrialRow(
            number=trial.number,
            kind=trial.kind,
            params=trial.params,
            choices=choice_sources(state, trial.params),
            score=trial.score,
            n=trial.n,
        )
        for trial in state.trials
    ]


def choice_sources(state: MiproState, params: dict[str, int]) -> dict[str, str]:
    """Each parameter of ``params`` and the source of its chosen value."""
    out = {}
    for name, index in params.items():
        stage, _, kind = name.rpartition(".")
        if kind == "instruction":
            choice = state.instructions[stage][index]
            tip = f".{choice.tip}" if choice.source == "operator" and choice.tip else ""
            out[name] = f"instruction.{choice.source}{tip}"
        elif kind == "demos":
            out[name] = f"demos.{state.demo_sets[stage][index].kind}"
        elif kind == "layout":
            out[name] = f"layout.{state.layouts[stage][index].source}"
    return out


def split_sizes(task: SuiteTask) -> dict[str, int]:
    dataset = task.dataset()
    return {split: len(dataset.split(split)) for split in ("train", "val", "test")}


def suite_row(
    key: Key, task: SuiteTask, report: RowReport, tests: dict[str, EvalResult], model: str
) -> SuiteRow:
    """A finished run as a suite row: per-example test scores aligned on the test ids and
    the winner's paired evidence against the seed and the expert."""
    dataset = task.dataset()
    ids = [e.id for e in dataset.test]
    names: list[str] = [name for name in ("seed", "expert", "best") if name in tests]
    scores = {name: _aligned(tests[name], ids) for name in names}
    vs_seed, vs_expert = compared(scores)
    set_name, budget, seed, algorithm = key
    return SuiteRow(
        set=set_name,
        budget=budget,
        seed=seed,
        algorithm=algorithm,
        peer=algorithm.startswith(PEERS),
        model=model,
        sizes=split_sizes(task),
        test_ids=ids,
        scores=scores,
        vs_seed=vs_seed,
        vs_expert=vs_expert,
        metric_calls=report.metric_calls,
        lm_calls={role: stats.calls for role, stats in report.lm.items()},
        wall_time_s=report.wall_time_s,
        stop_reason=report.stop_reason,
        best_components=report.best_components,
    )


class Suite:
    """Runs the planned rows that ``--out`` does not hold yet, appending each as it ends."""

    def __init__(self, args: argparse.Namespace, done: Sequence[SuiteRow]) -> None:
        self.args = args
        self.done = {row.key for row in done}
        self.rows = list(done)
        self.model = ModelSpec(
            model=args.model,
            base_url=args.base_url,
            task_max_tokens=args.task_max_tokens,
            reflection_max_tokens=args.reflection_max_tokens,
            n_threads=args.threads,
        )
        self.known: dict[tuple[str, tuple[str, ...]], dict[str, EvalResult]] = {}
        for row in done:
            if not row.peer and not row.error:
                self.known.setdefault((row.set, tuple(row.test_ids)), _known(row))
        self.stack = ExitStack()
        self.workdir = Path(tempfile.mkdtemp(prefix="emery-suite-"))
        self._peer_model: ModelSpec | None = None

    def run(self, on_row: Callable[[SuiteRow], None]) -> None:
        with self.stack:
            for key in planned(self.args):
                if key in self.done:
                    continue
                set_name = next(s for s in self.args.sets if set_label(s) == key[0])
                started = time.strftime("%H:%M:%S")
                print(f"{started} running {'/'.join(map(str, key))}", file=sys.stderr, flush=True)
                task = set_task(set_name, key[1])
                rows = self.peer_rows(key, task) if key[3] in PEERS else [self.emery_row(key, task)]
                for row in rows:
                    append_row(self.args.out, row)
                    self.rows.append(row)
                    self.done.add(row.key)
                    on_row(row)

    def known_tests(self, set_name: str, task: SuiteTask) -> dict[str, EvalResult]:
        ids = tuple(e.id for e in task.dataset().test)
        return self.known.setdefault((set_name, ids), {})

    @staticmethod
    def remember(known: dict[str, EvalResult], tests: dict[str, EvalResult]) -> None:
        """Keep the seed's and the expert's first test results for the set's next rows."""
        for name in ("seed", "expert"):
            if name in tests:
                known.setdefault(name, tests[name])

    def emery_row(self, key: Key, task: SuiteTask) -> SuiteRow:
        set_name, budget, seed, algorithm = key
        known = self.known_tests(set_name, task)
        emery_run = asyncio.run(
            run_emery(
                f"emery {algorithm}",
                algorithm,
                {},
                task,
                self.model,
                metric_calls=budget,
                wall_time_s=self.args.wall_time,
                seed=seed,
                concurrency=self.args.concurrency,
                known_tests=known,
            )
        )
        self.remember(known, emery_run.tests)
        row = suite_row(key, task, emery_run.report, emery_run.tests, self.model.model)
        row.trials = mipro_trials(emery_run.records)
        row.winner_checks = [
            dict(event.data)
            for record in emery_run.records
            for event in record.events
            if event.kind.endswith(".winner_checked")
        ]
        return row

    def peer_model(self) -> ModelSpec:
        """The endpoint the peers call: ``--base-url``, else one ``emery proxy`` of the model."""
        if self._peer_model is None:
            base_url = self.args.base_url
            if base_url is None:
                log = self.workdir / "server.log"
                server = Server(self.args.model, self.args.port, log, self.args.threads)
                base_url = self.stack.enter_context(server).base_url
            self._peer_model = ModelSpec(
                model=self.args.model,
                base_url=base_url,
                task_max_tokens=self.args.task_max_tokens,
                reflection_max_tokens=self.args.reflection_max_tokens,
            )
        return self._peer_model

    def peer_rows(self, key: Key, task: SuiteTask) -> list[SuiteRow]:
        """A peer's run behind the endpoint, its winner scored on test in-process beside the
        emery rows' seed and expert (DSPy's own reading of its test is a second row)."""
        import gepa_vs_library
        import mipro_vs_dspy

        set_name, budget, seed, peer = key
        sizes = split_sizes(task)
        workdir = Path(tempfile.mkdtemp(prefix=f"{peer.split()[0]}-", dir=self.workdir))
        common: dict[str, Any] = {"seed": seed, "concurrency": self.args.concurrency}
        common["wall_time"] = self.args.wall_time  # the peer's search cap, as emery's
        try:
            if peer == "gepa 0.1.4":
                args = argparse.Namespace(
                    metric_calls=budget,
                    reflection_max_tokens=self.args.reflection_max_tokens,
                    **common,
                )
                report, best = gepa_vs_library.library_winner(
                    args, task, self.peer_model(), workdir
                )
                found: dict[str, Any] = {}
            else:
                args = dspy_plan(budget, sizes, task, self.args.reflection_max_tokens, common)
                report, best, found = mipro_vs_dspy.dspy_winner(
                    args, task, self.peer_model(), workdir
                )
        except Exception as error:  # a peer that breaks is a row that says so
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            return [
                SuiteRow(
                    set=set_name,
                    budget=budget,
                    seed=seed,
                    algorithm=peer,
                    peer=True,
                    model=self.model.model,
                    error=reason[:200],
                )
            ]
        return self.scored_peer(key, task, report, best, found)

    def scored_peer(
        self, key: Key, task: SuiteTask, report: RowReport, best: Candidate, found: dict[str, Any]
    ) -> list[SuiteRow]:
        known = self.known_tests(key[0], task)
        tests = asyncio.run(results_on_test(task, self.model, best, self.args.concurrency, known))
        self.remember(known, tests)
        rows = [suite_row(key, task, report, tests, self.model.model)]
        if "best_test_dspy" in found:
            own = {"seed": found["seed_test_dspy"], "best": found["best_test_dspy"]}
            vs_seed, _ = compared(own)
            rows.append(
                rows[0].model_copy(
                    update={
                        "algorithm": f"{key[3]} (DSPy's reading)",
                        "scores": own,
                        "vs_seed": vs_seed,
                        "vs_expert": None,
                    }
                )
            )
        return rows


def dspy_plan(
    budget: int,
    sizes: dict[str, int],
    task: SuiteTask,
    proposer_max_tokens: int,
    common: dict[str, Any],
) -> argparse.Namespace:
    """``mipro_vs_dspy.py``'s arguments with its defaults (6 candidates, minibatch 8, full
    val every 5 trials, 3 demos) and the most trials whose planned calls fit ``budget``
    (``matched_budget``); ``predict`` for a stage with short replies, else ``cot``."""
    import mipro_vs_dspy

    short = (task.system().config.stages[0].max_tokens or 256) < 128
    args = argparse.Namespace(
        num_candidates=6,
        minibatch_size=8,
        full_eval_every=5,
        max_demos=3,
        dspy_module="predict" if short else "cot",
        dspy_max_tokens=None,
        proposer_max_tokens=proposer_max_tokens,
        n_train=sizes["train"],
        n_val=sizes["val"],
        num_trials=1,
        **common,
    )
    while True:
        args.num_trials += 1
        if mipro_vs_dspy.matched_budget(args) > budget:
            args.num_trials -= 1
            return args


def verdict_sets(args: argparse.Namespace) -> list[str]:
    """The sets the targets are read on: the development sets among ``--sets``, else all
    of them (a built-in task or another config on its own is judged the same way)."""
    labels = [set_label(name) for name in args.sets]
    development = [label for label in labels if label in DEVELOPMENT_SETS]
    return development or labels


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> None:
    args = arguments(argv)
    for name in args.sets:  # an unknown set is an error before anything runs
        set_task(name, CHECK_BUDGET)
    if args.table:
        rows = load_for_table(args.out)
        print(markdown(rows, planned(args)))
        print()
        print(verdict_markdown(rows, verdict_sets(args)))
        if table := channels_markdown(rows):
            print(f"\nMIPRO's single changes against their base:\n\n{table}")
        return
    done = read_rows(args.out)
    if done and not args.resume:
        raise SystemExit(
            f"error: {args.out} already holds {len(done)} rows; pass --resume to go on with it"
            " or choose another --out"
        )
    logging.basicConfig(level=logging.ERROR)
    signal.signal(signal.SIGTERM, _exit_on_signal)
    started = time.perf_counter()
    suite = Suite(args, done)
    skipped = sum(key in suite.done for key in planned(args))
    print(f"{args.model}; rows to {args.out} ({skipped} already there)\n", flush=True)
    print(HEADER, flush=True)
    suite.run(lambda row: print(row_markdown(row), flush=True))
    print(f"\ntotal {(time.perf_counter() - started) / 60:.1f} min\n")
    print(markdown(suite.rows, planned(args)))
    print()
    print(verdict_markdown(suite.rows, verdict_sets(args)))


if __name__ == "__main__":
    main()
