"""GEPA with ``proposals_per_step`` k = 1, 2, 4, 8 (and, with ``--failure-shares``, several
``failure_share`` settings) at one metric-call budget, on the mock
OpenAI-compatible endpoint (``mock_endpoint.py``: fixed latency, answers whose quality
depends on the instruction's phrases, a proposer that appends a phrase).

For each k and seed: GEPA runs to its budget (``--budget`` metric calls), then the seed and
the best candidate are scored on test (not charged). Printed per k (means over seeds):
metric calls spent, wall seconds, best val, test lift (best - seed), and lift per 100
metric calls and per wall second, with the ratios to the first variant; with more than one
failure share, also each share's lift and best val minus the first share's, paired by seed
(mean, 95% t interval); with ``--select RULE``, also the winner a job with ``objectives =
["score", "tokens"]`` and ``select = RULE`` takes, beside the best, with their tokens per
example. See README.md.

    .venv/bin/python benchmarks/efficiency/run.py                 # about two minutes
    .venv/bin/python benchmarks/efficiency/run.py --seeds 1 --budget 150   # a quick look
    .venv/bin/python benchmarks/efficiency/run.py --ks 1 --failure-shares none,0.5,1.0
    .venv/bin/python benchmarks/efficiency/run.py --ks 1 --select cheapest_within:0.02 \
        --instruction "Answer the question. Think about the problem." --prune-share 0.3 \
        --accept improvement_or_equal
    .venv/bin/python benchmarks/efficiency/run.py --ks 1 --select cheapest_within:0.02 \
        --instruction "Answer the question. Think about the problem." --prune-share 0.3 \
        --cost-search
    .venv/bin/python benchmarks/efficiency/run.py --model local/smollm2-135m --seeds 1

``--peer gepa`` also runs gepa 0.1.4 (``gepa_peer.py`` in ``.bench-venvs/gepa``) on the
same task, data, budget and seeds, at each ``--peer-proposals`` (1: its default; n: its
parallel proposals, ``IndependentSampling(n)``; nb: also with an adapter
``batch_evaluate``), its best scored on test as emery's is. ``--algorithm mipro`` runs
MIPRO with k as ``trials_per_step``, ``--algorithm apo`` APO with k as its
``proposals_per_step``. On the mock, a last table says where each variant's
wall time went (``mock_endpoint.waves``: round trips waited on, and the time with no
request in flight, split into the search's own work between calls and the handling of
requests), the connections the mock saw opened and the process's CPU per request.
``--store`` records the rollouts in a SQLite store as a job does, ``--lm-concurrency``
sets the models' ``[lm.<role>] concurrency`` (64 here, 8 in a job by default), and ``--client
bare`` replaces the ``openai`` SDK by a bare aiohttp session to show what the SDK's own
work per call costs (a diagnostic: emery always uses the SDK).

    .venv/bin/python benchmarks/efficiency/run.py --ks 1,4 --seeds 3 --budget 500 \
        --peer gepa --peer-proposals 1,4,4b
    .venv/bin/python benchmarks/efficiency/run.py --algorithm mipro --ks 1,4 --seeds 3 \
        --budget 500

``--task noisy`` serves the mock's noisier task (``mock_endpoint.NOISY``: smaller effects,
decoys that help on a quarter of the questions and hurt on average, 15% flips); ``--set
NAME=VALUE`` sets any GEPA setting. ``spend.py`` says where GEPA's metric calls go.

``--model`` runs the same comparison on SVAMP (``../shared/datasets/svamp.jsonl``, the
first ``--train/--val/--test`` rows) with a local model as task and reflection model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bare_client import BareLM
from mock_endpoint import BackgroundServer, LogEntry, sums, waves

from emery.algorithms import build_algorithm, run_search
from emery.algorithms.base import AlgorithmState, SearchContext
from emery.algorithms.context import build_search_context
from emery.algorithms.gepa.settings import GepaSettings
from emery.core.models import Dataset
from emery.data.loaders import load_dataset
from emery.evaluation.budget import BudgetConfig
from emery.evaluation.front import choose
from emery.evaluation.objectives import cost_per_example
from emery.evaluation.selection import parse_select
from emery.jobs.winner import val_pool
from emery.lm.base import LM, Completion
from emery.lm.config import LMConfig, build_base_lm
from emery.lm.openai_compat import OpenAICompatibleLM
from emery.lm.wrapper import LMWrapper
from emery.store.backends import open_store
from emery.systems.parsers import ParserConfig
from emery.systems.prompt_program import (
    MessageTemplate,
    PromptProgram,
    PromptProgramConfig,
    StageConfig,
)
from emery.tracing.store_recorder import StoreRecorder
from emery.verifiers.config import VerifierConfig, build_verifier

KS = (1, 2, 4, 8)
SETTINGS: dict[str, Callable[[int, float | None], dict[str, Any]]] = {
    "gepa": lambda k, share: {"proposals_per_step": k, "failure_share": share},
    "mipro": lambda k, _share: {"trials_per_step": k, "search_layouts": False},
    "apo": lambda k, _share: {"proposals_per_step": k},
}
"""Each ``--algorithm``'s settings for a variant: k is GEPA's and APO's
``proposals_per_step`` or MIPRO's ``trials_per_step`` (MIPRO and APO have no failure
share). MIPRO does not search layouts here: the mock reads the last message as the
question and the ones before as the instruction, so an instruction placed after the
question or a restating stage is not modelled (it answered such prompts as if they had no
phrase). APO's critique and edit requests go to the mock's proposer, whose replies are not
modelled on APO's prompts: for APO this is a timing benchmark, not one of quality."""
OBJECTIVES = ("score", "tokens")
"""The ``[job] objectives`` of ``--select`` and ``--cost-search``."""
ANSWER = r"Answer:\s*\$?(-?[\d,]*\.?\d+)"
SVAMP = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "svamp.jsonl"
GEPA_PYTHON = Path(__file__).resolve().parents[2] / ".bench-venvs" / "gepa" / "bin" / "python"
GEPA_PEER = Path(__file__).resolve().parent / "gepa_peer.py"


def program(instruction: str = "Answer the question.") -> PromptProgram:
    """One stage: the instruction, the question, the number after 'Answer:'."""
    return PromptProgram(
        PromptProgramConfig(
            name="solve",
            stages=[
                StageConfig(
                    name="solve",
                    instruction=instruction,
                    messages=[MessageTemplate(template="{question}")],
                    parser=ParserConfig(kind="regex", pattern=ANSWER),
                )
            ],
        )
    )


def svamp(n_train: int, n_val: int, n_test: int) -> Dataset:
    """The first rows of each split of ``../shared/datasets/svamp.jsonl``."""
    data = load_dataset(SVAMP)
    return data.model_copy(
        update={"train": data.train[:n_train], "val": data.val[:n_val], "test": data.test[:n_test]}
    )


class CallClock(LMWrapper):
    """Logs each call's model, start and end (``time.monotonic``) as the search sees them,
    in the mock log's shape, so ``waves`` over it gives the time with no LM call open: the
    search's own work between calls. The rest of the mock's idle time is spent handling
    requests (the HTTP client, the connection, the mock's own parsing and encoding)."""

    def __init__(self, inner: LM, log: list[LogEntry]) -> None:
        super().__init__(inner)
        self.log = log

    async def _call(self, messages: Sequence[Any], params: dict[str, Any]) -> Completion:
        started = time.monotonic()
        try:
            return await self.inner.complete(messages, **params)
        finally:
            self.log.append((self.model, started, time.monotonic(), ""))


class Setup(NamedTuple):
    """What one run searches with: the data, the program and the two models."""

    dataset: Dataset
    system: PromptProgram
    task: LM
    reflection: LM
    log: Callable[[], list[LogEntry]] | None = None
    """The mock's request log (``mock_endpoint.waves``), None on a local model."""
    calls: list[LogEntry] | None = None
    """The models' calls as the search saw them (``CallClock``), None on a local model."""


def mock_setup(
    base_url: str,
    instruction: str = "Answer the question.",
    log: Callable[[], list[LogEntry]] | None = None,
    client: str = "sdk",
    lm_concurrency: int = 64,
) -> Setup:
    """The mock's task and proposer models: emery's ``OpenAICompatibleLM`` (``client =
    "sdk"``, at most ``lm_concurrency`` calls in flight each, as ``[lm.<role>] concurrency``) or
    the diagnostic ``BareLM`` (``"bare"``: no SDK, no limit), each behind a ``CallClock``."""
    calls: list[LogEntry] = []

    def model(name: str) -> LM:
        if client == "bare":
            return BareLM(name, base_url)
        return OpenAICompatibleLM(name, base_url=base_url, concurrency=lm_concurrency)

    return Setup(
        sums(),
        program(instruction),
        CallClock(model("mock-task"), calls),
        CallClock(model("mock-proposer"), calls),
        log,
        calls,
    )


def local_setup(args: argparse.Namespace) -> Setup:
    lm = build_base_lm(LMConfig(model=args.model, max_tokens=256, n_parallel=8))
    return Setup(
        svamp(args.train, args.val, args.test),
        program("Solve the word problem. End with a line 'Answer: <number>'."),
        lm,
        lm,
    )


async def one_run(
    setup: Setup,
    k: int,
    seed: int,
    budget: int,
    concurrency: int,
    failure_share: float | None,
    select: str | None = None,
    extra: dict[str, Any] | None = None,
    cost_search: bool = False,
    algorithm_name: str = "gepa",
    store: bool = False,
) -> dict[str, Any]:
    dataset = setup.dataset
    lms = {"task": setup.task, "reflection": setup.reflection}
    if algorithm_name == "mipro":  # MIPRO's proposer and summaries: the mock's proposer
        lms = {"task": setup.task, "proposer": setup.reflection}
    workdir = tempfile.TemporaryDirectory() if store else None
    recorder = None
    if workdir is not None:  # rollouts, attempts and spans written as a job writes them
        recorder = StoreRecorder(open_store(Path(workdir.name) / "emery.db"))
    ctx = build_search_context(
        system=setup.system,
        dataset=dataset,
        verifier=build_verifier(VerifierConfig(kind="numeric")),
        lms=lms,
        budget=BudgetConfig(metric_calls=budget),
        seed=seed,
        concurrency=concurrency,
        recorder=recorder,
    )
    if cost_search:  # the search knows the job's objectives and rule, as the engine tells it
        ctx.objectives = OBJECTIVES
        ctx.select = parse_select(select or "best_score", OBJECTIVES)
    settings = SETTINGS[algorithm_name](k, failure_share)
    algorithm = build_algorithm(algorithm_name, settings | (extra or {}))
    started, clock, cpu = time.perf_counter(), time.monotonic(), time.process_time()
    outcome = await run_search(algorithm, ctx)
    wall, ended = time.perf_counter() - started, time.monotonic()
    cpu = time.process_time() - cpu
    profile = waves(setup.log(), clock, ended) if setup.log is not None else {}
    if profile and setup.calls is not None:
        profile["between_calls_s"] = waves(setup.calls, clock, ended)["idle_s"]
        profile["cpu_s"] = cpu  # the benchmark's process: emery and its HTTP client
    state = outcome.state
    best = ctx.candidates[state.best_candidate_id]
    seed_candidate = ctx.candidates[state.seed_candidate_id]
    test = {}
    for name, candidate in (("seed", seed_candidate), ("best", best)):
        result = await ctx.evaluations.evaluate(candidate, dataset.test, "test", charge=False)
        test[name] = result.mean
    chosen = await cost_winner(ctx, state, select) if select else {}
    if workdir is not None:
        ctx.evaluations.evaluator.tracing.flush()
        workdir.cleanup()
    return (
        chosen
        | profile
        | {
            "k": k,
            "failure_share": failure_share,
            "seed": seed,
            "metric_calls": ctx.budget.usage.metric_calls,
            "wall_s": wall,
            "steps": ctx.budget.usage.iterations,
            "iterations": getattr(state, "iteration", None),
            "best_val": state.best_val_score,
            "test_seed": test["seed"],
            "test_best": test["best"],
            "lift": test["best"] - test["seed"],
            "reason": outcome.reason,
            "cost_search": cost_search,
        }
    )


def peer_spec(
    setup: Setup, base_url: str, seed: int, budget: int, peer: str, args: Any
) -> dict[str, Any]:
    """What ``gepa_peer.py`` reads: the same endpoint, models, seed instruction, data, parser,
    verifier, budget and seed as emery's rows, and emery's GEPA defaults (minibatch of 3,
    merges on, at most 5)."""
    stage = setup.system.config.stages[0]
    defaults = GepaSettings()

    def examples(split: str) -> list[dict[str, Any]]:
        return [{"input": e.input, "expected": e.expected} for e in setup.dataset.split(split)]

    return {
        "base_url": base_url,
        "model": "mock-task",
        "reflection_model": "mock-proposer",
        "component": stage.name,
        "seed_instruction": stage.instruction,
        "input_field": "question",
        "parser": stage.parser.model_dump(),
        "verifier": VerifierConfig(kind="numeric").model_dump(),
        "task_max_tokens": 256,
        "reflection_max_tokens": 1024,
        "train": examples("train"),
        "val": examples("val"),
        "metric_calls": budget,
        "seed": seed,
        "minibatch_size": defaults.minibatch_size,
        "use_merge": defaults.use_merge,
        "max_merges": defaults.max_merges,
        "proposals": int(peer.rstrip("b")),
        "batch_evaluate": peer.endswith("b"),
        "concurrency": args.concurrency,
    }


async def peer_run(
    setup: Setup, base_url: str, peer: str, seed: int, budget: int, args: Any
) -> dict[str, Any]:
    """gepa 0.1.4 in its own venv (``gepa_peer.py``) on the same task, data, budget and
    seed; its best instruction and the seed scored on test by emery's evaluator, as emery's
    rows are."""
    with tempfile.TemporaryDirectory() as workdir:
        spec = peer_spec(setup, base_url, seed, budget, peer, args) | {"workdir": workdir}
        spec_path, out_path = Path(workdir, "spec.json"), Path(workdir, "out.json")
        spec_path.write_text(json.dumps(spec))
        started, clock = time.perf_counter(), time.monotonic()
        done = await asyncio.to_thread(
            subprocess.run,
            [str(GEPA_PYTHON), str(GEPA_PEER), str(spec_path), str(out_path)],
            capture_output=True,
            text=True,
        )
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"error: gepa_peer.py failed: {done.stderr.strip()[-2000:]}")
        out = json.loads(out_path.read_text())
    profile = waves(setup.log(), clock, time.monotonic()) if setup.log is not None else {}
    if profile:  # the process's start (imports) is not the search's wall time
        profile["idle_s"] = out["wall_time_s"] - profile["busy_s"]
    ctx = build_search_context(
        system=setup.system,
        dataset=setup.dataset,
        verifier=build_verifier(VerifierConfig(kind="numeric")),
        lms={"task": setup.task, "reflection": setup.reflection},
        seed=seed,
        concurrency=args.concurrency,
    )
    best = program(out["best_instruction"]).seed_candidate()
    test = {}
    for name, candidate in (("seed", setup.system.seed_candidate()), ("best", best)):
        result = await ctx.evaluations.evaluate(candidate, setup.dataset.test, "test", charge=False)
        test[name] = result.mean
    reflections = out["lm"].get("reflection", {}).get("calls", 0)
    return profile | {
        "k": peer_label(peer),
        "failure_share": None,
        "seed": seed,
        "metric_calls": out["metric_calls"],
        "wall_s": out["wall_time_s"],
        "process_s": elapsed,
        "steps": reflections / spec["proposals"],
        "reflection_calls": reflections,
        "task_calls": out["lm"].get("task", {}).get("calls", 0),
        "candidates": out["candidates"],
        "best_val": out["best_val"],
        "best_instruction": out["best_instruction"],
        "test_seed": test["seed"],
        "test_best": test["best"],
        "lift": test["best"] - test["seed"],
        "reason": "metric_calls",
        "cost_search": False,
    }


async def cost_winner(ctx: SearchContext, state: AlgorithmState, select: str) -> dict[str, Any]:
    """The winner ``select`` picks over score and tokens among the candidates scored on val
    (``jobs/winner.py``, as a job's finishing does), beside the search's best: each one's
    val score, test score and mean tokens per example on val and on test."""
    objectives = OBJECTIVES
    pool = val_pool(ctx)
    best = next(s for s in pool if s.candidate_id == state.best_candidate_id)
    front = choose(pool, best, objectives, parse_select(select, objectives))
    row: dict[str, Any] = {"select": select, "front_size": len(front.front)}
    for name, candidate_id in (("best", front.best_score_id), ("winner", front.winner_id)):
        member = front.member(candidate_id)
        assert member is not None
        test = await ctx.evaluations.evaluate(
            ctx.candidates[candidate_id], ctx.dataset.test, "test", charge=False
        )
        row |= {
            f"{name}_val": member.score,
            f"{name}_val_tokens": member.cost.tokens,
            f"{name}_test": test.mean,
            f"{name}_test_tokens": cost_per_example(test.results).tokens,
        }
    row["saving_test"] = 1 - row["winner_test_tokens"] / row["best_test_tokens"]
    row["test_diff"] = row["winner_test"] - row["best_test"]
    return row


def cost_table(runs: list[dict[str, Any]]) -> str:
    """Per run with a ``select`` rule: the search's best and the rule's winner, their val
    and test scores and tokens per example, the winner's saving on test tokens."""
    lines = [
        "| k | seed | select | front | best val | winner val | best test | winner test"
        " | test diff | best tokens/ex (test) | winner tokens/ex (test) | saving |",
        "|" + " --- |" * 12,
    ]
    for r in runs:
        if "select" not in r:
            continue
        lines.append(
            f"| {r['k']} | {r['seed']} | {r['select']} | {r['front_size']} | {r['best_val']:.3f}"
            f" | {r['winner_val']:.3f} | {r['best_test']:.3f} | {r['winner_test']:.3f}"
            f" | {100 * r['test_diff']:+.1f} pts | {r['best_test_tokens']:.0f}"
            f" | {r['winner_test_tokens']:.0f} | {r['saving_test']:.0%} |"
        )
    return "\n".join(lines)


Variant = tuple[int | str, float | None]


def variant(run: dict[str, Any]) -> Variant:
    return run["k"], run.get("failure_share")


def summarize(
    runs: list[dict[str, Any]], variants: Sequence[Variant] = tuple((k, None) for k in KS)
) -> list[dict[str, Any]]:
    rows = []
    for k, share in variants:
        mine = [r for r in runs if variant(r) == (k, share)]
        if not mine:
            continue

        def mean(key: str, rows_: list[dict[str, Any]] = mine) -> float:
            return statistics.fmean(r[key] for r in rows_)

        rows.append(
            {
                "k": k,
                "failure_share": share,
                "runs": len(mine),
                "metric_calls": mean("metric_calls"),
                "wall_s": mean("wall_s"),
                "steps": mean("steps"),
                "best_val": mean("best_val"),
                "lift": mean("lift"),
                "lift_sd": statistics.stdev(r["lift"] for r in mine) if len(mine) > 1 else 0.0,
                "lift_per_100_calls": 100 * mean("lift") / mean("metric_calls"),
                "lift_per_s": mean("lift") / mean("wall_s"),
            }
        )
    base = rows[0]
    for row in rows:
        row["wall_ratio"] = row["wall_s"] / base["wall_s"]
        row["lift_ratio"] = row["lift"] / base["lift"] if base["lift"] else float("nan")
        row["lift_per_s_ratio"] = (
            row["lift_per_s"] / base["lift_per_s"] if base["lift_per_s"] else float("nan")
        )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| k | failure share | runs | metric calls | steps | wall s | wall / first | best val"
        " | test lift (sd) | lift / first | lift per 100 calls | lift per s | lift per s / first |"
    )
    lines = [head, "|" + " --- |" * 13]
    for r in rows:
        share = "None" if r["failure_share"] is None else f"{r['failure_share']:g}"
        lines.append(
            f"| {r['k']} | {share} | {r['runs']} | {r['metric_calls']:.0f} | {r['steps']:.1f}"
            f" | {r['wall_s']:.1f} | {r['wall_ratio']:.2f} | {r['best_val']:.3f}"
            f" | {r['lift']:+.3f} ({r['lift_sd']:.3f}) | {r['lift_ratio']:.2f}"
            f" | {r['lift_per_100_calls']:+.3f} | {r['lift_per_s']:+.4f}"
            f" | {r['lift_per_s_ratio']:.2f} |"
        )
    return "\n".join(lines)


def profile_table(runs: list[dict[str, Any]], variants: Sequence[Variant], latency_s: float) -> str:
    """Per variant (means over seeds), where the wall time went on the mock
    (``mock_endpoint.waves``): requests, waves and those with a proposer call, the time
    with a request in flight (busy) as seconds and as round trips one after the other
    (busy / latency), those per step, and the rest (idle); for emery's runs the idle time
    split into the time with no LM call open (between calls: the search's own work,
    ``CallClock``) and the time spent handling requests (a call open, no request in the
    mock's handler: the HTTP client, the connection, the mock's parsing and encoding),
    and the benchmark process's CPU per request during the search (emery and its HTTP
    client); and the connections the mock saw opened (``connects``)."""
    lines = [
        "| k | requests | waves | proposer waves | busy s | round trips | round trips per step"
        " | idle s | idle share | between calls s | handling requests s | connects"
        " | CPU ms per request | wall s |",
        "|" + " --- |" * 14,
    ]
    for v in variants:
        mine = [r for r in runs if variant(r) == v and "waves" in r]
        if not mine:
            continue

        def mean(key: str, rows_: list[dict[str, Any]] = mine) -> float:
            return statistics.fmean(r[key] for r in rows_)

        trips = mean("busy_s") / latency_s
        split = all("between_calls_s" in r for r in mine)
        between = f"{mean('between_calls_s'):.2f}" if split else "-"
        handling = f"{mean('idle_s') - mean('between_calls_s'):.2f}" if split else "-"
        per_request = f"{1000 * mean('cpu_s') / mean('requests'):.2f}" if split else "-"
        per_step = f"{trips / mean('steps'):.1f}" if mean("steps") else "-"  # no step made
        lines.append(
            f"| {v[0]} | {mean('requests'):.0f} | {mean('waves'):.0f}"
            f" | {mean('proposer_waves'):.0f} | {mean('busy_s'):.2f} | {trips:.0f}"
            f" | {per_step} | {mean('idle_s'):.2f}"
            f" | {mean('idle_s') / mean('wall_s'):.0%} | {between} | {handling}"
            f" | {mean('connects'):.0f} | {per_request} | {mean('wall_s'):.2f} |"
        )
    return "\n".join(lines)


# two-sided 95% Student t quantiles by degrees of freedom (more seeds: about 2)
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}


def paired(runs: list[dict[str, Any]], variants: Sequence[Variant]) -> list[dict[str, Any]]:
    """Each variant's test lift and best val minus the first variant's, paired by seed:
    the mean difference and its 95% t interval over the seeds both ran."""
    first = {r["seed"]: r for r in runs if variant(r) == variants[0]}
    rows = []
    for other in variants[1:]:
        mine = {r["seed"]: r for r in runs if variant(r) == other}
        seeds = sorted(set(first) & set(mine))
        row: dict[str, Any] = {"k": other[0], "failure_share": other[1], "seeds": len(seeds)}
        for key in ("lift", "best_val"):
            diffs = [mine[s][key] - first[s][key] for s in seeds]
            centre = statistics.fmean(diffs) if diffs else float("nan")
            half = (
                T95.get(len(diffs) - 1, 2.0) * statistics.stdev(diffs) / len(diffs) ** 0.5
                if len(diffs) > 1
                else float("nan")
            )
            row[key] = (centre, centre - half, centre + half)
        rows.append(row)
    return rows


def paired_table(rows: list[dict[str, Any]], first: Variant) -> str:
    base = "None" if first[1] is None else f"{first[1]:g}"
    lines = [
        f"| k | failure share | seeds | test lift - {base}'s (95% CI) | best val - {base}'s"
        " (95% CI) |",
        "|" + " --- |" * 5,
    ]
    for r in rows:
        share = "None" if r["failure_share"] is None else f"{r['failure_share']:g}"
        cells = [f"{c:+.3f} [{lo:+.3f}, {hi:+.3f}]" for c, lo, hi in (r["lift"], r["best_val"])]
        lines.append(f"| {r['k']} | {share} | {r['seeds']} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def shares(text: str) -> list[float | None]:
    """``none,0.5,1.0`` → [None, 0.5, 1.0]."""
    return [None if part.strip().lower() == "none" else float(part) for part in text.split(",")]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def variants(args: argparse.Namespace) -> list[Variant]:
    """(k, failure share) of every run of a seed, shares outermost."""
    return [(k, share) for share in args.failure_shares for k in args.ks]


def peer_label(peer: str) -> str:
    """``4`` → gepa-0.1.4 n=4; ``4b`` → gepa-0.1.4 n=4 batch_evaluate."""
    batch = " batch_evaluate" if peer.endswith("b") else ""
    return f"gepa-0.1.4 n={peer.rstrip('b')}{batch}"


def all_variants(args: argparse.Namespace) -> list[Variant]:
    """emery's variants, then gepa 0.1.4's (``--peer gepa``) at each ``--peer-proposals``."""
    peers: list[Variant] = [(peer_label(n), None) for n in args.peer_proposals]
    return variants(args) + (peers if args.peer == "gepa" else [])


def gepa_extra(args: argparse.Namespace) -> dict[str, Any] | None:
    """GEPA's settings given on the command line (``--accept``, ``--confidence``,
    ``--set``)."""
    extra = {"accept": args.accept, "confidence": args.confidence}
    extra |= dict(args.settings)
    return {key: value for key, value in extra.items() if value is not None} or None


async def main_async(
    args: argparse.Namespace, setup: Setup, base_url: str | None = None
) -> list[dict[str, Any]]:
    runs = []
    for seed in range(args.seeds):
        if args.peer == "gepa":
            assert base_url is not None, "--peer gepa runs on the mock endpoint only"
            for n in args.peer_proposals:
                run = await peer_run(setup, base_url, n, seed, args.budget, args)
                shown = {key: round(v, 3) if isinstance(v, float) else v for key, v in run.items()}
                print(json.dumps(shown), flush=True)
                runs.append(run)
        for k, share in variants(args):
            run = await one_run(
                setup,
                k,
                seed,
                args.budget,
                args.concurrency,
                share,
                args.select,
                gepa_extra(args),
                args.cost_search,
                args.algorithm,
                args.store,
            )
            shown = {key: round(v, 3) if isinstance(v, float) else v for key, v in run.items()}
            print(json.dumps(shown), flush=True)
            runs.append(run)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=400, help="metric calls per run")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per LM call")
    parser.add_argument("--concurrency", type=int, default=8, help="rollouts at once per batch")
    parser.add_argument("--out", type=Path, default=None, help="write the runs and rows as JSON")
    parser.add_argument("--ks", type=lambda text: [int(k) for k in text.split(",")], default=KS)
    parser.add_argument(
        "--failure-shares",
        type=shares,
        default=[None],
        help="GEPA failure_share values, comma-separated ('none' for None), each run at every k",
    )
    parser.add_argument(
        "--cost-search",
        action="store_true",
        help="tell the search the objectives (score, tokens) and the --select rule, as a job's"
        " engine does: GEPA then also keeps as-good, cheaper children, MIPRO's study aims for"
        " the rule",
    )
    parser.add_argument(
        "--accept", default=None, help="GEPA's accept setting (default: GEPA's own)"
    )
    parser.add_argument(
        "--confidence",
        type=float,
        default=None,
        help="GEPA's confidence (of the paired evidence that accepts a child; default GEPA's)",
    )
    parser.add_argument(
        "--set",
        type=lambda text: (text.partition("=")[0], json.loads(text.partition("=")[2])),
        action="append",
        default=[],
        dest="settings",
        help="NAME=VALUE: a GEPA setting (a JSON value), repeatable",
    )
    parser.add_argument(
        "--instruction",
        default="Answer the question.",
        help="the seed instruction on the mock endpoint",
    )
    parser.add_argument(
        "--task",
        choices=["default", "noisy"],
        default="default",
        help="the mock task's profile (mock_endpoint.TASKS; noisy: small effects, local"
        " decoys, 15%% flips)",
    )
    parser.add_argument(
        "--prune-share",
        type=float,
        default=0.0,
        help="the share of the mock proposer's replies that drop a phrase (default 0)",
    )
    parser.add_argument(
        "--select",
        default=None,
        help="a [job] select rule (e.g. cheapest_within:0.02): also pick its winner over"
        " score and tokens and print it beside the best (see README)",
    )
    parser.add_argument(
        "--model", default=None, help="a local model (local/<name>) on SVAMP instead of the mock"
    )
    parser.add_argument(
        "--algorithm",
        choices=sorted(SETTINGS),
        default="gepa",
        help="the search run at each k (mipro: k is trials_per_step)",
    )
    parser.add_argument(
        "--peer",
        choices=["gepa"],
        default=None,
        help="also run gepa 0.1.4 (.bench-venvs/gepa) on the mock's task, same data/budget/seeds",
    )
    parser.add_argument(
        "--peer-proposals",
        type=lambda text: [n.strip() for n in text.split(",")],
        default=["1", "4"],
        help="gepa's proposals per iteration (1: SingleMutationSampling, n:"
        " IndependentSampling(n); nb: also an adapter batch_evaluate that runs an"
        " iteration's batches at once)",
    )
    parser.add_argument(
        "--client",
        choices=["sdk", "bare"],
        default="sdk",
        help="the mock's model client: emery's (the openai SDK) or, as a diagnostic of the"
        " SDK's own work per call, a bare aiohttp session (bare_client.py)",
    )
    parser.add_argument(
        "--lm-concurrency",
        type=int,
        default=64,
        help="calls in flight at once per model ([lm.<role>] concurrency; its default is 8)",
    )
    parser.add_argument(
        "--store",
        action="store_true",
        help="record rollouts, attempts and spans in a SQLite store, as a job does (default: none)",
    )
    parser.add_argument("--train", type=int, default=60, help="--model: SVAMP train rows")
    parser.add_argument("--val", type=int, default=30, help="--model: SVAMP val rows")
    parser.add_argument("--test", type=int, default=100, help="--model: SVAMP test rows")
    args = parser.parse_args()
    if args.model is not None:
        runs = asyncio.run(main_async(args, local_setup(args)))
    else:
        with BackgroundServer(free_port(), args.latency, args.prune_share, args.task) as server:
            setup = mock_setup(
                server.base_url, args.instruction, server.log, args.client, args.lm_concurrency
            )
            runs = asyncio.run(main_async(args, setup, server.base_url))
    rows = summarize(runs, all_variants(args))
    print(table(rows))
    if any("waves" in run for run in runs):
        print(profile_table(runs, all_variants(args), args.latency))
    pairs = paired(runs, variants(args)) if len(variants(args)) > 1 else []
    if pairs:
        print(paired_table(pairs, variants(args)[0]))
    if args.select:
        print(cost_table(runs))
    if args.out is not None:
        saved = {
            "args": vars(args) | {"out": str(args.out)},
            "runs": runs,
            "rows": rows,
            "paired": pairs,
        }
        args.out.write_text(json.dumps(saved, indent=1))


if __name__ == "__main__":
    main()
