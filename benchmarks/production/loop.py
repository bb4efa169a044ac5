"""The production loop as a benchmark: an application served through ``emery server``'s
prompt route answers a stream of real questions, a scripted user gives thumbs on a share of
them, emery builds a dataset from the traces, searches, publishes, and the application's
next stretch of traffic is scored against the gold answers before (the old version, asked
on the side) and after (the new version, live); then a second round warm-started from the
first job. One process, one temporary SQLite store, one model for everything. The
application (``--app``: the SVAMP math helper or the CLINC intent router) is a strategy
object of ``apps.py``.

    .venv/bin/python benchmarks/production/loop.py --out prod.json          # local model
    .venv/bin/python benchmarks/production/loop.py --app clinc --out clinc.json
    .venv/bin/python benchmarks/production/loop.py --model fake             # seconds

See README.md beside this file for the phases, the figures and a recorded run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import secrets
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apps import APPS, Application, Question
from fastapi.testclient import TestClient
from gate import review

import emery
from emery.algorithms.evidence import paired
from emery.config import parse_config
from emery.config.resolve import JobInputs
from emery.core.models import Demo, Example
from emery.evaluation.label_agreement import LabelAgreement, label_agreement
from emery.evaluation.stats import ScoreSummary, summarize
from emery.jobs import create_job, run_job
from emery.lm import LMConfig, UsageMeter, build_lm
from emery.lm.base import LM
from emery.lm.config import build_base_lm
from emery.reports import published
from emery.server.api import create_server_app
from emery.server.launcher import ThreadLauncher
from emery.store import SQLiteStore, Store
from emery.tracing import conventions as sc
from emery.verifiers.config import VerifierConfig, build_verifier
from emery.verifiers.feedback_score import feedback_of

HERE = Path(__file__).resolve().parent
JUDGE_MAX_TOKENS = 160
"""The rubric judge's reply cap at least (a JSON verdict's, as ``judge_agreement.py`` gives
it); the task's cap when that is larger."""
SPLIT_SHARES = (0.5, 0.5, 0.0)
"""Train (oldest half) and val (newest half) by time; the next stretch is the test."""


# -- the models ------------------------------------------------------------------------


@dataclass
class Models:
    """The application's model (behind the proxy) and what each job's roles use."""

    app: LM
    job_roles: dict[str, LM]
    judge: LM
    name: str


def models_for(
    app: Application,
    name: str,
    questions: Sequence[Question],
    max_tokens: int,
    concurrency: int,
    threads: int | None = None,
) -> Models:
    """The local model (one instance shared by the proxy and the jobs), or the scripted
    ones for ``fake``."""
    if name == "fake":
        sys.path.insert(0, str(HERE))
        import scripted

        task, writer = scripted.task_lm(app, questions), scripted.writer_lm(app)
        fake_judge = scripted.judge_lm(app, questions)
        roles: dict[str, LM] = {"task": task, "proposer": writer, "reflection": writer}
        return Models(task, {**roles, "judge": fake_judge}, fake_judge, name)
    base = build_base_lm(LMConfig(model=name, n_parallel=concurrency, n_threads=threads))
    judge = build_lm(
        LMConfig(model=name, max_tokens=max(max_tokens, JUDGE_MAX_TOKENS)),
        role="judge",
        meter=UsageMeter(),
        cache=None,
        base=base,
    )
    return Models(base, {"task": base}, judge, name)


# -- the application and its user ------------------------------------------------------


@dataclass(frozen=True)
class Call:
    question: Question
    trace_id: str
    reply: str
    score: float
    """1.0 when the user reads the reply as right against gold (``Application.correct``)."""


def ask(
    client: TestClient,
    app: Application,
    question: Question,
    *,
    service: str,
    max_tokens: int,
    version: int | None,
    prompt: str | None = None,
) -> Call:
    """One application call through the prompt route (the application's prompt, or
    ``prompt``), in a trace of its own."""
    trace_id = secrets.token_hex(16)
    headers = {
        "X-Emery-Service": service,
        "traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01",
    }
    body = {
        "model": "app",
        "messages": [{"role": "user", "content": app.message(question)}],
        "temperature": 0,
        "max_tokens": max_tokens,
    }
    params = {"version": version} if version is not None else {}
    route = f"/prompts/{prompt or app.name}/v1/chat/completions"
    reply = client.post(route, json=body, headers=headers, params=params)
    if reply.status_code != 200:
        raise SystemExit(f"error: the prompt route answered {reply.status_code}: {reply.text}")
    text = reply.json()["choices"][0]["message"]["content"] or ""
    return Call(question, trace_id, text, app.correct(text, question.gold))


def serve(
    client: TestClient,
    app: Application,
    questions: Sequence[Question],
    *,
    concurrency: int,
    max_tokens: int,
    shadow: bool = False,
    version: int | None = None,
    prompt: str | None = None,
) -> list[Call]:
    """The application's traffic, ``concurrency`` calls at a time, in arrival order (with
    ``shadow``, the calls that ask a version, or another ``prompt``, on the side, under a
    service of their own)."""
    service = app.shadow if shadow else app.name

    def one(question: Question) -> Call:
        return ask(
            client,
            app,
            question,
            service=service,
            max_tokens=max_tokens,
            version=version,
            prompt=prompt,
        )

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        return list(pool.map(one, questions))


def give_feedback(client: TestClient, calls: Sequence[Call], share: float, seed: int) -> int:
    """The scripted user: a thumb (up when the reply is right) on ``share`` of the calls,
    by trace id. Returns how many got one."""
    chosen = random.Random(seed).sample(range(len(calls)), round(share * len(calls)))
    for index in sorted(chosen):
        call = calls[index]
        body = {"trace_id": call.trace_id, "thumb": "up" if call.score == 1.0 else "down"}
        answer = client.post("/api/feedback", json=body)
        if answer.status_code != 201:
            raise SystemExit(f"error: feedback answered {answer.status_code}: {answer.text}")
    return len(chosen)


# -- emery's side: dataset, search, publish ----------------------------------------------


def stage(
    app: Application, instruction: str, max_tokens: int, demos: Sequence[Demo] = ()
) -> dict[str, Any]:
    """The application's call as a prompt program stage, read as the application reads a
    reply (``Application.reply_parser``): a reply it cannot read fails and scores 0."""
    return {
        "name": app.stage,
        "instruction": instruction,
        "messages": [{"role": "user", "template": app.template}],
        "max_tokens": max_tokens,
        "parser": app.reply_parser,
        "demos": [demo.model_dump(mode="json") for demo in demos],
    }


ALGORITHM_SETTINGS: dict[str, dict[str, Any]] = {
    # the prompt route serves a version's instruction and demos (``PublishedPrompt.chat``)
    # but not a layout's answer stage, a second call: MIPRO searches instructions and demo
    # sets (bootstrapped from the traces and thumbs-up replies), not layouts, whose every
    # choice beyond the seed's has that stage. Three instruction choices (at most four
    # proposer calls) and no dataset summary (the small model's described the task
    # wrongly): twelve proposer calls of up to 256 tokens took 744 s of a 300 s search on
    # a loaded machine and left no time for a trial. GEPA's edit operators are off (they
    # include the answer stage).
    "mipro": {
        "search_layouts": False,
        "num_instructions": 3,
        "use_dataset_summary": False,
        "proposer_max_tokens": 160,
    },
    "gepa": {"operator_fallback": False, "operator_every": 0},
}
VERIFIERS = ("feedback", "rubric")


@dataclass
class Settings:
    app: Application
    model: str
    algorithm: str
    verifier: str
    budget: int
    search_wall_s: int
    max_tokens: int
    concurrency: int
    seed: int
    judge_scoring: str = "logprobs"


def run_config(
    store: Store, models: Models, config: dict[str, Any], workdir: Path
) -> tuple[str, dict[str, Any]]:
    """Create and run a job in this process; its id and result."""
    job = create_job(
        store,
        parse_config(config),
        given=config,
        base_dir=workdir,
        inputs=JobInputs(lms=models.job_roles),
    )
    record = run_job(store, job.id, inputs=JobInputs(lms=models.job_roles))
    if record.state != "succeeded":
        raise SystemExit(f"error: job {job.id} {record.state}: {record.error}")
    return job.id, record.result or {}


def first_version(
    store: Store, models: Models, settings: Settings, workdir: Path, dataset: Path
) -> str:
    """v1's job: the seed prompt tried on four rows of the file's val split (a baseline)."""
    app = settings.app
    config = {
        "job": {"algorithm": "baseline", "name": "v1", "seed": settings.seed},
        "dataset": {"path": str(dataset), "n_train": 1, "n_val": 4, "n_test": 0},
        "system": {
            "kind": "prompt_program",
            "stages": [{**stage(app, app.seed, settings.max_tokens), **app.seed_stage}],
        },
        "lm": {"task": {"model": lm_name(settings.model)}},
        "verifier": app.gold_verifier,
        "runtime": {"workdir": str(workdir / "v1"), "concurrency": settings.concurrency},
    }
    job_id, _ = run_config(store, models, config, workdir)
    return job_id


def lm_name(model: str) -> str:
    """The config's model name (the jobs get the objects themselves)."""
    return "python/scripted:task_lm" if model == "fake" else model


def search_config(
    settings: Settings,
    dataset: Path,
    served: published.PublishedPrompt,
    workdir: Path,
    warm_start: str | None,
) -> dict[str, Any]:
    """A search from the served version (its instruction and demos) on the traces."""
    job: dict[str, Any] = {
        "algorithm": settings.algorithm,
        "seed": settings.seed,
        "budget": {"metric_calls": settings.budget, "wall_time_s": settings.search_wall_s},
    }
    if warm_start is not None:
        job["warm_start"] = warm_start
    model = lm_name(settings.model)
    return {
        "job": job,
        "dataset": {"path": str(dataset)},
        "system": {
            "kind": "prompt_program",
            "stages": [
                stage(
                    settings.app,
                    served.text(settings.app.stage),
                    settings.max_tokens,
                    served.demos.get(settings.app.stage, ()),
                )
            ],
        },
        "lm": {
            "task": {"model": model},
            "proposer": {"model": model, "temperature": 0.7, "max_tokens": 200},
            "reflection": {"model": model, "max_tokens": 300},
        },
        "verifier": verifier_config(settings.app, settings.verifier, settings.judge_scoring),
        "runtime": {"workdir": str(workdir), "concurrency": settings.concurrency},
        "algorithm": {settings.algorithm: ALGORITHM_SETTINGS[settings.algorithm]},
    }


def traces_of(
    store: Store, app: Application, version: int, *, labeled_only: bool
) -> emery.TraceDataset:
    """The calls ``version`` answered as a dataset: the template's fields recovered from
    each user message, the recorded reply as ``expected``, the thumb as the label."""
    return emery.dataset_from_traces(
        app.template,
        store=store,
        service=app.name,
        attributes={sc.PROMPT_NAME: app.name, sc.PROMPT_VERSION: str(version)},
        fractions=SPLIT_SHARES,
        labeled_only=labeled_only,
    )


def verifier_config(app: Application, name: str, judge_scoring: str) -> dict[str, Any]:
    """The search's ``[verifier]``: the feedback score, or a rubric judge on the
    application's criterion that scores as ``judge_scoring`` says."""
    if name == "feedback":
        return {"kind": "feedback"}
    criteria = [{"name": "correct", "description": app.rubric}]
    return {"kind": "rubric", "criteria": criteria, "scoring": judge_scoring}


def judge_agreement(
    models: Models, app: Application, examples: list[Example], judge_scoring: str
) -> dict[str, Any]:
    """The rubric judge's rank agreement with the feedback on the labeled recorded
    replies (``label_agreement``, as a job's report measures it), whatever verifier the
    search used; the judge scores as ``judge_scoring`` says (``json`` or ``logprobs``)."""
    config = VerifierConfig.model_validate(verifier_config(app, "rubric", judge_scoring))
    verifier = build_verifier(config, models.judge)
    found = asyncio.run(label_agreement(verifier, examples))
    return found.model_dump() if found is not None else {}


# -- scoring and the report --------------------------------------------------------------


@dataclass
class Clock:
    """Wall seconds per phase."""

    phases: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = round(time.perf_counter() - start, 1)
            print(f"  {name}: {self.phases[name]:.1f} s", flush=True)


def summary(scores: Sequence[float]) -> dict[str, Any]:
    found: ScoreSummary = summarize(scores)
    return found.model_dump(include={"mean", "low", "high", "n"})


def compare(before: Sequence[Call], after: Sequence[Call]) -> dict[str, Any]:
    """Both versions on the same stretch against gold, and the paired difference."""
    first, second = [c.score for c in after], [c.score for c in before]
    evidence = paired(first, second)
    return {
        "before": summary(second),
        "after": summary(first),
        "difference": evidence.model_dump(include={"n", "difference", "low", "high", "verdict"}),
    }


def pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def cell(found: dict[str, Any]) -> str:
    return f"{pct(found['mean'])} ({pct(found['low'])}–{pct(found['high'])})"


COLUMNS = (
    "round",
    "data: file lines (served by: right by gold)",
    "labeled, thumbs up",
    "rubric judge vs feedback",
    "search val: seed → best",
    "metric calls",
    "next stretch: file lines",
    "served",
    "gate: proposed − served on val [95% paired]",
    "proposed",
    "proposed − served, points [95% paired]",
    "wall",
)


def agreement_cell(found: dict[str, Any]) -> str:
    if found.get("rho") is not None:
        return f"Spearman rho {found['rho']:+.2f} (n = {found['n']})"
    return str(found.get("note") or "—")


def difference_cell(found: dict[str, Any]) -> str:
    low, high = 100 * found["low"], 100 * found["high"]
    return f"{100 * found['difference']:+.1f} [{low:+.1f}, {high:+.1f}] ({found['verdict']})"


def gate_cell(found: dict[str, Any]) -> str:
    low, high = found["low"], found["high"]
    figures = f"{found['difference']:+.3f} [{low:+.3f}, {high:+.3f}], n = {found['n']}"
    return f"{figures}: {found['decision']}"


def row_cells(r: dict[str, Any]) -> list[str]:
    share = r["labeled"] / max(1, r["examples"])
    return [
        str(r["round"]),
        f"{r['data_rows']} (v{r['served_version']}: {pct(r['data_right']['mean'])} right)",
        f"{r['labeled']} of {r['examples']} ({pct(share)}), {r['thumbs_up']} up",
        agreement_cell(r["judge"]),
        f"{r['val_seed']:.3f} → {r['val_best']:.3f}",
        str(r["metric_calls"]),
        f"{r['stretch_rows']} (n = {r['score']['difference']['n']})",
        f"v{r['served_version']} {cell(r['score']['before'])}",
        gate_cell(r["gate"]),
        f"{r['proposed']} {cell(r['score']['after'])}",
        difference_cell(r["score"]["difference"]),
        f"{sum(r['wall_s'].values()) / 60:.1f} min",
    ]


def table(rounds: Sequence[dict[str, Any]]) -> str:
    """One row per round (markdown)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    lines += ["| " + " | ".join(row_cells(r)) + " |" for r in rounds]
    return "\n".join(lines)


# -- the loop ------------------------------------------------------------------------------


def run_round(
    number: int,
    client: TestClient,
    store: Store,
    models: Models,
    settings: Settings,
    *,
    traffic: list[Call],
    served: int,
    stretch: list[Question],
    warm_start: str | None,
    share: float,
    workdir: Path,
) -> tuple[dict[str, Any], str, list[Call]]:
    """Dataset from the calls ``served`` answered, search, publish, the next stretch live
    and asked of the old version on the side. The round's figures, its job, the new
    traffic (with its feedback sent)."""
    clock = Clock()
    app = settings.app
    print(f"round {number}: data from {len(traffic)} calls served by v{served}", flush=True)
    with clock.phase("dataset"):
        built = traces_of(store, app, served, labeled_only=False)
        labeled = built.summary.with_feedback
        matched = built.summary.matched
        path = workdir / f"traces-{number}.jsonl"
        (
            traces_of(store, app, served, labeled_only=True)
            if settings.verifier == "feedback"
            else built
        ).write(path)
        for line in built.summary.lines():
            print(f"  {line}", flush=True)
    thumbs = [f for _, e in built if (f := feedback_of(e)) is not None]
    right = summary([c.score for c in traffic])
    ups = sum(1 for f in thumbs if f >= 1.0)
    print(f"  right by gold: {cell(right)} of {len(traffic)}; thumbs {ups} up of {len(thumbs)}")
    with clock.phase("judge agreement"):
        examples = [example for _, example in built]
        judge = judge_agreement(models, app, examples, settings.judge_scoring)
    print(f"  rubric judge vs feedback: {agreement_cell(judge)}", flush=True)
    version = published.show(store, app.name, served)
    instruction = version.text(app.stage)
    with clock.phase("search"):
        config = search_config(settings, path, version, workdir / f"round-{number}", warm_start)
        job_id, result = run_config(store, models, config, workdir)
    labels = result.get("labels") or {}
    warm = [e.data for e in store.list_events(job_id, kinds=["warm_start.scored"])]
    label_line = LabelAgreement.model_validate(labels).line() if labels else "—"
    print(f"  {label_line}", flush=True)
    with clock.phase("review and publish"):
        decision = review(store, job_id, app.name, served)
        # the approval published it under the application's name; a rejected one goes
        # under a side name the application never asks: the next stretch asks it there
        if decision.publish:
            new = published.show(store, app.name)
        else:
            new = published.publish(store, job_id, app.proposed)
        if set(new.components) != {app.stage}:
            raise SystemExit(f"error: v{new.version} is not one stage's text: {new.components}")
    proposed = f"v{new.version}" if decision.publish else "proposed"
    serving = new.version if decision.publish else served
    print(f"  {decision.reason}", flush=True)
    shown = len(new.demos.get(app.stage, ()))
    print(f"  {proposed}: {new.text(app.stage)!r} with {shown} demos", flush=True)
    concurrency, max_tokens = settings.concurrency, settings.max_tokens
    with clock.phase(f"next stretch, live (v{serving})"):
        live = serve(client, app, stretch, concurrency=concurrency, max_tokens=max_tokens)
    with clock.phase("next stretch, on the side"):
        side = serve(
            client,
            app,
            stretch,
            concurrency=concurrency,
            max_tokens=max_tokens,
            shadow=True,
            version=served if decision.publish else new.version,
            prompt=None if decision.publish else app.proposed,
        )
    with clock.phase("feedback"):
        give_feedback(client, live, share, settings.seed + number)
    before, after = (side, live) if decision.publish else (live, side)
    score = compare(before, after)
    print(
        f"  next stretch: v{served} {cell(score['before'])}, {proposed} {cell(score['after'])},"
        f" difference {difference_cell(score['difference'])}",
        flush=True,
    )
    figures = {
        "round": number,
        "served_version": served,
        "published_version": serving,
        "proposed": proposed,
        "gate": decision.as_dict(),
        "instruction_before": instruction,
        "instruction_after": new.text(app.stage),
        "demos_before": len(version.demos.get(app.stage, ())),
        "demos_after": shown,
        "data_rows": rows_label(c.question for c in traffic),
        "matched": matched,
        "examples": sum(built.summary.splits.values()),
        "labeled": labeled,
        "thumbs_up": ups,
        "data_right": right,
        "dataset_summary": built.summary.lines(),
        "judge": judge,
        "job": job_id,
        "warm_start": warm_start,
        "warm_rescored": [
            {k: w.get(k) for k in ("candidate_id", "earlier_score", "score", "n")} for w in warm
        ],
        "label_line": label_line,
        "labels": labels,
        "val_seed": result.get("baseline_val") or 0.0,
        "val_best": result.get("best_val") or 0.0,
        "metric_calls": (result.get("budget") or {}).get("metric_calls"),
        "lm_calls": {role: u.get("calls") for role, u in (result.get("usage") or {}).items()},
        "stop_reason": result.get("stop_reason"),
        "stretch_rows": rows_label(stretch),
        "score": score,
        "wall_s": clock.phases,
    }
    # the served version's calls: the next round's data (all of them, when it was kept)
    return figures, job_id, live if decision.publish else [*traffic, *live]


def rows_label(questions: Iterator[Question] | Sequence[Question]) -> str:
    rows = [q.row for q in questions]
    return f"{min(rows)}-{max(rows)}" if rows else "none"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default="local/qwen2.5-coder-0.5b", help="or local/smollm2-135m, or fake"
    )
    parser.add_argument(
        "--app",
        default="svamp",
        choices=sorted(APPS),
        help="the application served: the SVAMP math helper or the CLINC15 intent router",
    )
    parser.add_argument(
        "--dataset",
        type=Path,
        default=None,
        help="JSONL rows in the app's shape (default: svamp.jsonl or clinc15.jsonl in"
        " ../shared/datasets: input.question and a numeric expected, or input.query,"
        " input.labels and a label)",
    )
    parser.add_argument("--split", default="test", help="the rows' split the traffic is drawn from")
    parser.add_argument(
        "--offset",
        type=int,
        default=None,
        help="first row of the split, in file order (default: 300 for svamp, 120 for clinc:"
        " past the test rows the quality benchmarks use)",
    )
    parser.add_argument(
        "--traffic", type=int, default=60, help="questions served by v1 before round 1"
    )
    parser.add_argument("--stretch", type=int, default=40, help="questions in each next stretch")
    parser.add_argument("--rounds", type=int, default=2, choices=(1, 2))
    parser.add_argument("--feedback-share", type=float, default=0.3)
    parser.add_argument("--algorithm", default="mipro", choices=sorted(ALGORITHM_SETTINGS))
    parser.add_argument("--verifier", default="feedback", choices=sorted(VERIFIERS))
    parser.add_argument(
        "--judge-scoring",
        default="logprobs",
        choices=("json", "logprobs"),
        help="how the rubric judge scores: its JSON verdict, or its probability of Yes",
    )
    parser.add_argument("--budget", type=int, default=60, help="metric calls per search")
    parser.add_argument("--search-wall-s", type=int, default=900, help="wall-time cap per search")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="reply cap of the application's calls (default: 320 for svamp, whose seed's"
        " replies run 110-270 tokens; 24 for clinc, as the quality config)",
    )
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument(
        "--threads", type=int, default=None, help="llama.cpp threads (default: every core)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the figures as JSON")
    args = parser.parse_args(argv)
    if not 0.0 < args.feedback_share <= 1.0:
        parser.error("--feedback-share must be in (0, 1]")
    app = APPS[args.app]
    args.dataset = app.dataset if args.dataset is None else args.dataset
    args.offset = app.offset if args.offset is None else args.offset
    args.max_tokens = app.max_tokens if args.max_tokens is None else args.max_tokens
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    app = APPS[args.app]
    start = time.perf_counter()
    needed = args.traffic + args.rounds * args.stretch
    questions = app.load(args.dataset, args.split, args.offset, needed)
    settings = Settings(
        app=app,
        model=args.model,
        algorithm=args.algorithm,
        verifier=args.verifier,
        budget=args.budget,
        search_wall_s=args.search_wall_s,
        max_tokens=args.max_tokens,
        concurrency=args.concurrency,
        seed=args.seed,
        judge_scoring=args.judge_scoring,
    )
    models = models_for(app, args.model, questions, args.max_tokens, args.concurrency, args.threads)
    stretches = [questions[: args.traffic]] + [
        questions[args.traffic + i * args.stretch : args.traffic + (i + 1) * args.stretch]
        for i in range(args.rounds)
    ]
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="emery-prodbench-") as tmp:
        workdir = Path(tmp)
        store = SQLiteStore(workdir / "emery.db")
        clock = Clock()
        with clock.phase("v1"):
            v1 = published.publish(
                store, first_version(store, models, settings, workdir, args.dataset), app.name
            )
        server = create_server_app(
            store, default_lm=models.app, launcher=ThreadLauncher(), base_dir=workdir
        )
        with TestClient(server) as client:
            with clock.phase("traffic, v1"):
                traffic = serve(
                    client,
                    app,
                    stretches[0],
                    concurrency=args.concurrency,
                    max_tokens=args.max_tokens,
                )
                give_feedback(client, traffic, args.feedback_share, args.seed)
            served, warm = v1.version, None
            for number in range(1, args.rounds + 1):
                figures, warm, traffic = run_round(
                    number,
                    client,
                    store,
                    models,
                    settings,
                    traffic=traffic,
                    served=served,
                    stretch=stretches[number],
                    warm_start=warm,
                    share=args.feedback_share,
                    workdir=workdir,
                )
                rounds.append(figures)
                served = figures["published_version"]
    report: dict[str, Any] = {
        "settings": {**vars(args), "dataset": str(args.dataset), "out": str(args.out)},
        "application": {"name": app.name, "seed": app.seed, "template": app.template},
        "traffic_rows": rows_label(stretches[0]),
        "setup_wall_s": clock.phases,
        "rounds": rounds,
        "wall_s": round(time.perf_counter() - start, 1),
    }
    print(table(rounds))
    print(f"wall time: {report['wall_s'] / 60:.1f} min")
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
        print(f"wrote {args.out}")
    return report


if __name__ == "__main__":
    main()
