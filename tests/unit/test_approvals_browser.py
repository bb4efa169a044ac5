"""The dashboard's approvals card in headless Chromium: a running job with ``[job] approve =
"best"`` waits; the card shows the candidate beside the best (scores with intervals, diff,
sample outputs) and a person rejects one candidate with a reason and approves the next.
Screenshots go to ``$EMERY_TEST_ARTIFACTS`` (default: tmp_path)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest
from test_server_browser import ARGS, CHROMIUM, VAL, artifacts, live, post

from emery.store import MemoryStore

__all__ = ["artifacts", "live"]

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

REASON = "drop the filler words"


@pytest.fixture
def page() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        context = chromium.new_context(viewport={"width": 1400, "height": 1000})
        tab = context.new_page()
        tab.set_default_timeout(60_000)
        yield tab
        chromium.close()


def test_reject_then_approve_from_the_dashboard(
    live: tuple[MemoryStore, str], page: Any, artifacts: Path, tmp_path: Path
) -> None:
    store, url = live
    config = js.search_config(tmp_path / ".emery", iterations=8)
    config["job"]["approve"] = "best"
    job_id = post(f"{url}/api/jobs", {"config": config})["id"]
    page.goto(f"{url}/")
    badge = page.locator(f"tr[data-job='{job_id}'] [data-waiting]")
    badge.wait_for()  # the jobs page follows the job's events
    assert badge.inner_text() == "waiting for approval (1)"
    page.goto(f"{url}/#/jobs/{job_id}")

    first = page.locator("#approvals .approval").first
    first.wait_for()
    (pending,) = store.list_approvals(job_id, status="pending")
    assert first.get_attribute("data-approval") == pending.id
    assert first.locator(".candidate-score").inner_text().endswith(f"n={VAL}")
    assert "[" in first.locator(".current-score").inner_text()  # the interval
    assert "+++ candidate/" in first.locator("pre.diff").inner_text()
    assert first.locator(".samples tr[data-example]").count() > 0
    page.screenshot(path=str(artifacts / "approval.png"), full_page=True)
    first.locator("input.reason").fill(REASON)
    first.locator("button.reject").click()

    second = page.locator(f"#approvals .approval:not([data-approval='{pending.id}'])")
    second.wait_for(timeout=120_000)  # the job applied the rejection and went on
    rejected = store.get_approval(pending.id)
    assert (rejected.status, rejected.reason) == ("rejected", REASON)
    chosen = second.get_attribute("data-approval")
    second.locator("button.approve").click()
    page.wait_for_selector(f"#approvals tr[data-approval='{chosen}']")
    for _ in range(1200):  # approve any later ones until the job ends (2 minutes at most)
        if (job := store.get_job(job_id)).terminal:
            break
        for later in store.list_approvals(job_id, status="pending"):
            post(f"{url}/api/approvals/{later.id}", {"action": "approve"})
        page.wait_for_timeout(100)
    assert job.state == "succeeded", job.error
    approved = store.get_approval(chosen or "")
    assert (approved.status, approved.applied) == ("approved", True)
    assert job.best_candidate_id != rejected.candidate_id
    page.screenshot(path=str(artifacts / "approvals.png"), full_page=True)
