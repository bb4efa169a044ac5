"""The dashboard in headless Chromium (Debian's ``chromium``, driven by Playwright): follow
a running scripted job live, pause and resume it with the buttons, open a candidate's diff
and a rollout's trace; the workers view, and a training job's curves. Screenshots go
to ``$EMERY_TEST_ARTIFACTS`` (default: tmp_path)."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import cost_front_support
import jobs_support as js
import pytest
from server_support import PLAN_SUMMARY, job_config, plan_event

from emery.core.events import event
from emery.proxy.serving import BackgroundServer
from emery.server.api import create_server_app
from emery.server.launcher import ThreadLauncher
from emery.store import MemoryStore
from emery.store.records import NewJob, WorkerRecord

CHROMIUM = Path("/usr/bin/chromium")
VAL = 8  # val examples of job_config's dataset
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("random_search_algorithm"),
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install chromium)"
    ),
]
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="needs playwright: pip install 'emery[server-test]'"
)


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("EMERY_TEST_ARTIFACTS") or tmp_path) / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[MemoryStore, str]]:
    store = MemoryStore()
    launcher = ThreadLauncher()
    app = create_server_app(store, launcher=launcher, base_dir=tmp_path, allow_code=True)
    with BackgroundServer(app) as server:
        yield store, server.url
        for job in store.list_jobs(limit=None).items:
            if not job.terminal:
                store.set_requested_action(job.id, "cancel", only_state="running")
        launcher.join(30)


@pytest.fixture
def held_models() -> Iterator[js.CallGate]:
    """The scripted models' gate, open again after the test whatever happened."""
    try:
        yield js.GATE
    finally:
        js.GATE.open()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for the module's tests (each gets a fresh context)."""
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(60_000)
    yield tab
    context.close()


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def test_follow_steer_and_inspect_a_running_job(
    live: tuple[MemoryStore, str],
    page: Any,
    artifacts: Path,
    tmp_path: Path,
    held_models: js.CallGate,
) -> None:
    store, url = live
    held_models.hold()  # the job runs but makes no progress until the test lets it
    job_id = post(f"{url}/api/jobs", {"config": job_config(tmp_path, iterations=40)})["id"]
    page.goto(url + "/")
    page.wait_for_selector(f"tr[data-job='{job_id}']")
    page.screenshot(path=str(artifacts / "jobs.png"))
    row = f"tr[data-job='{job_id}']"
    page.evaluate("window.stillHere = true")
    calls = page.locator(f"{row} td:nth-child(7)").inner_text()
    held_models.allow(VAL)  # the baseline's val calls; the job then waits again
    page.wait_for_function(  # the row follows the job's SSE stream without a reload
        "([row, calls]) => document.querySelector(row).cells[6].innerText !== calls",
        arg=[row, calls],
    )
    assert page.evaluate("window.stillHere") is True
    page.click(row)
    page.wait_for_selector("#chart svg")
    page.wait_for_selector("#pause:not([disabled])")
    page.click("#pause")  # cancels the held model call: no race with the job's end
    page.wait_for_selector("h1 [data-state='paused']")
    assert store.get_job(job_id).state == "paused"
    held_models.open()  # the rest runs at once
    page.click("#resume")
    page.wait_for_selector("h1 [data-state='succeeded']", timeout=120_000)
    kinds = [e.kind for e in store.list_events(job_id)]
    assert "paused" in kinds
    assert "resumed" in kinds
    evaluated = [
        e
        for e in store.list_events(job_id)
        if e.kind.endswith("_evaluated") and e.data["split"] != "test"
    ]
    chart = page.locator("#chart")
    assert chart.get_attribute("data-points") == str(len(evaluated))
    assert page.locator("#chart circle.point.val").count() >= 2
    assert page.locator("#chart path.best-line").is_visible()
    page.screenshot(path=str(artifacts / "job.png"), full_page=True)

    child = next(c for c in store.job_candidates(job_id) if c.lineage.parents)
    page.click(f"tr[data-candidate='{child.id}']")
    diff = page.locator("#diff")
    diff.wait_for()
    assert "+++ candidate/" in diff.inner_text()
    texts = page.locator("#candidate pre.component").all_inner_texts()
    assert texts == [child.components[name] for name in child.components]
    assert page.locator("#evaluations tr[data-rollout]").count() > 0
    page.screenshot(path=str(artifacts / "candidate.png"), full_page=True)

    page.locator("#evaluations tr[data-rollout]").first.click()
    page.wait_for_selector("#trace [data-span='emery.rollout']")
    page.locator("#trace .span", has_text="chat ").first.click()
    assert "Answer:" in page.locator("#reply").inner_text()
    assert page.locator("#messages").is_visible()
    page.screenshot(path=str(artifacts / "rollout.png"), full_page=True)
    assert sorted(p.name for p in artifacts.iterdir()) == [
        "candidate.png",
        "job.png",
        "jobs.png",
        "rollout.png",
    ]


def test_the_job_page_shows_the_plan_live(
    live: tuple[MemoryStore, str], page: Any, artifacts: Path
) -> None:
    store, url = live
    store.create_job(NewJob(id="j-planned01", name="planned", algorithm="mipro", config={}))
    page.goto(f"{url}/#/jobs/j-planned01")
    assert "No plan recorded: mipro runs until" in page.locator("#plan").inner_text()
    store.append_events("j-planned01", [plan_event()])  # arrives over the job's SSE stream
    summary = page.locator("#plan .summary")
    summary.wait_for()
    assert summary.inner_text() == PLAN_SUMMARY
    total = page.locator("#plan table.figures tr", has_text="metric_calls.total")
    assert total.is_visible()
    assert total.locator("td").all_inner_texts() == ["metric_calls.total", "130"]
    assert page.locator("#plan .notes li").all_inner_texts() == [
        "trials raised to spend the budget"
    ]
    page.screenshot(path=str(artifacts / "plan.png"), full_page=True)
    store.transition("j-planned01", "cancelled", reason="test over")


def test_the_job_page_shows_the_cost_front(
    live: tuple[MemoryStore, str], page: Any, artifacts: Path, tmp_path: Path
) -> None:
    store, url = live
    with ThreadPoolExecutor(1) as pool:  # Playwright's loop runs in this thread
        done = pool.submit(
            cost_front_support.run_job_in,
            store,
            tmp_path,
            objectives=["score", "tokens"],
            select="cheapest_within:0.02",
        ).result()
    ids = cost_front_support.ids_by_text(store, done)
    page.goto(f"{url}/#/jobs/{done}")
    chosen = page.locator(f"#front tr[data-front='{ids[cost_front_support.SHORT]}']")
    chosen.wait_for()
    assert chosen.locator("td").nth(5).inner_text() == "chosen"
    best = page.locator(f"#front tr[data-front='{ids[cost_front_support.LONG]}']")
    assert best.locator("td").nth(5).inner_text() == "best score, not on the front"
    page.screenshot(path=str(artifacts / "front.png"), full_page=True)


def test_the_workers_view_lists_the_runners(
    live: tuple[MemoryStore, str], page: Any, artifacts: Path
) -> None:
    store, url = live
    store.create_job(NewJob(id="j-queued001", name="queued", algorithm="baseline", config={}))
    store.register_worker(
        WorkerRecord(id="box:41:aa", host="box", pid=41, metadata={"concurrency": 4})
    )
    store.register_worker(WorkerRecord(id="box:42:bb", host="box", pid=42))
    store.worker_heartbeat("box:41:aa", status="busy", job_id="j-queued001")
    page.goto(url + "/")
    page.click("#workers-link")
    busy = page.locator("#workers tr[data-worker='box:41:aa']")
    busy.wait_for()
    cells = busy.locator("td").all_inner_texts()
    assert cells[1:4] == ["busy", "box", "4"]
    assert cells[7] == "j-queued001"
    assert page.locator("#workers tr[data-worker]").count() == 2
    store.worker_heartbeat("box:42:bb", status="stopped")  # the view refreshes by itself
    page.wait_for_function(
        "() => document.querySelector(\"tr[data-worker='box:42:bb']\").cells[1].innerText"
        " === 'stopped'"
    )
    page.screenshot(path=str(artifacts / "workers.png"), full_page=True)
    busy.locator("a").click()
    page.wait_for_selector("h1 [data-state]")
    assert "j-queued001" in page.url


def test_the_job_page_draws_training_curves_live(
    live: tuple[MemoryStore, str], page: Any, artifacts: Path
) -> None:
    store, url = live
    store.create_job(NewJob(id="j-training1", name="sft", algorithm="sft", config={}))
    store.transition("j-training1", "queued")
    store.transition("j-training1", "running")
    page.goto(f"{url}/#/jobs/j-training1")
    page.wait_for_selector("#chart svg")
    assert page.locator("#training").is_hidden()  # no curve yet
    store.append_events(
        "j-training1",
        [event("train_loss", step=step, loss=loss) for step, loss in ((1, 2.0), (2, 1.4), (3, 0.9))]
        + [event("train_reward", step=1, reward=0.2, kl=0.01)],
    )
    training = page.locator("#training")
    page.wait_for_function("() => document.querySelector('#training').dataset.steps === '3'")
    assert training.get_attribute("data-series") == "train_loss,train_reward"
    assert page.locator("#training path.curve.train_loss").is_visible()
    assert "KL 0.0100" in training.inner_text()
    page.screenshot(path=str(artifacts / "training.png"), full_page=True)
    store.transition("j-training1", "cancelled", reason="test over")


def test_the_prompts_view_shows_each_versions_live_scores(
    live: tuple[MemoryStore, str], page: Any, artifacts: Path
) -> None:
    from emery.core.spans import SpanRecord
    from emery.reports.published import RESOURCE_PREFIX, PublishedPrompt
    from emery.reports.served import VERSION_ATTRIBUTE
    from emery.reports.shadow import SCORE_ATTRIBUTE, SHADOW_OF_ATTRIBUTE
    from emery.tracing.chat_record import at

    store, url = live
    version = PublishedPrompt(
        name="bot", components={"answer": "Answer."}, job_id="j-1", job_name="x", candidate_id="c"
    )
    for _ in range(2):
        content = version.model_dump(mode="json", exclude={"version", "published_at"})
        store.put_resource(RESOURCE_PREFIX + "bot", content, kind="prompt", job_id="j-1")
    now = at(1_700_000_000_000_000_000)

    def span(trace: str, name: str, parent: str | None = None, **attributes: Any) -> SpanRecord:
        span_id = f"{trace}-{name[:3]}"
        return SpanRecord(
            trace_id=trace, span_id=span_id, parent_id=parent, name=name, start_time=now,
            end_time=now, attributes=attributes,
        )  # fmt: skip

    spans = []
    for i, (served, shadow) in enumerate([(1.0, 1.0), (1.0, 0.0), (0.0, 0.0), (1.0, 0.0)]):
        shadow_of = {VERSION_ATTRIBUTE: 2, SHADOW_OF_ATTRIBUTE: f"s{i}"}
        spans += [
            span(f"s{i}", "run bot", **{VERSION_ATTRIBUTE: 1, "emery.output": "7"}),
            span(f"s{i}", "score bot", f"s{i}-run", **{SCORE_ATTRIBUTE: served}),
            span(f"h{i}", "run bot", **shadow_of, **{"emery.output": "7" if i == 0 else "8"}),
            span(f"h{i}", "score bot", f"h{i}-run", **{SCORE_ATTRIBUTE: shadow}),
        ]
    store.add_spans(spans)
    page.goto(url + "/")
    page.click("#prompts-link")
    page.locator("#prompts tr[data-prompt='bot']").click()
    served_row = page.locator("#versions tr[data-version='1']")
    served_row.wait_for()
    cells = served_row.locator("td").all_inner_texts()
    assert cells[:4] == ["1", "4", "0", "0"]
    assert cells[5] == "4"
    assert cells[6].startswith("75.0% [")
    shadow = page.locator("#versions tr[data-version='2-shadow'] td").all_inner_texts()
    assert shadow[0] == "2 (shadow)"
    assert shadow[7].startswith("-50.0 [")
    assert shadow[7].endswith("points, n=4")
    assert shadow[8] == "25.0%"
    page.screenshot(path=str(artifacts / "prompt-scores.png"), full_page=True)
