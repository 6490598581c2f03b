"""The pages of ``skillstream serve`` in a real headless Chromium (Debian's, which
``scripts/setup.sh test`` installs), driven by Playwright: every page loads without a console
error, the search box finds memories, a memory's timeline shows every event, and the sign-in
form lets a browser in. Screenshots of the main pages are written to
``build/test-artifacts/pages/`` (or ``$SKILLSTREAM_TEST_ARTIFACTS/pages``)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import skillstream
from tests.server.conftest import FULL, Served, retry, sql

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def artifacts() -> Path:
    base = os.environ.get("SKILLSTREAM_TEST_ARTIFACTS")
    folder = (Path(base) if base else ROOT / "build" / "test-artifacts") / "pages"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail("no Chromium: scripts/setup.sh test installs Debian's chromium package")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, served: Served):
    """A browser tab that sends the full token, recording console errors and failed loads."""
    context = browser.new_context(
        extra_http_headers={"Authorization": f"Bearer {FULL}"},
        viewport={"width": 1280, "height": 900},
    )
    tab = context.new_page()
    tab.errors = []
    tab.on("console", lambda m: m.type == "error" and tab.errors.append(m.text))
    tab.on("pageerror", lambda e: tab.errors.append(str(e)))
    tab.on("requestfailed", lambda r: tab.errors.append(f"failed: {r.url}"))
    yield tab
    context.close()


def busiest(served: Served) -> str:
    """The memory with the most lifecycle events."""
    rows = sql(
        served.home,
        "select memory_id from memory_events group by 1 order by count(*) desc, 1 limit 1",
    )
    return str(rows[0]["memory_id"])


def visit(page, served: Served, path: str, shot: str | None = None):
    response = page.goto(served.base + path)
    assert response is not None and response.status == 200, (path, response and response.status)
    page.wait_for_load_state("load")
    assert page.errors == [], (path, page.errors)
    if shot:
        page.screenshot(path=str(artifacts() / f"{shot}.png"), full_page=True)
    return response


def test_every_page_loads_without_a_console_error(page, served: Served):
    memory_id = busiest(served)
    for path, shot in [
        ("/", "owners"),
        ("/owners/maya", "owner-memories"),
        ("/owners/maya?status=archived", None),
        (f"/memories/{memory_id}", "memory-history"),
        ("/contradictions", None),
        ("/contradictions?all=true", "contradictions"),
        ("/charts", "charts"),
        ("/skills?all=true", "task-skills"),
        ("/skills/omar/deploy-flask-app", "task-skill"),
        ("/memory-skills", "memory-skills"),
    ]:
        visit(page, served, path, shot)
    # nothing was fetched from another host
    assert all(served.base in u or u.startswith("data:") for u in _loaded(page, served))


def _loaded(page, served: Served) -> list[str]:
    return page.evaluate("performance.getEntriesByType('resource').map(e => e.name)")


def test_the_search_box_finds_memories(page, served: Served):
    visit(page, served, "/owners/maya")
    page.fill("input[name=q]", "trip to Lisbon")
    page.click("button[type=submit]")
    page.wait_for_load_state("load")
    rows = page.locator("#memories tr.memory")
    assert rows.count() >= 1
    assert "Lisbon" in rows.first.inner_text()
    assert "hits for" in page.inner_text("main")
    page.screenshot(path=str(artifacts() / "search.png"), full_page=True)
    assert page.errors == []


def test_the_timeline_shows_every_event_of_a_memory(page, served: Served):
    memory_id = busiest(served)
    events = retry(lambda: skillstream.open(served.home).history(memory_id).to_pylist())
    assert len(events) >= 2
    visit(page, served, f"/memories/{memory_id}")
    items = page.locator("#timeline li.event")
    assert items.count() == len(events)
    for item, event in zip(items.all(), events, strict=True):
        assert item.inner_text().startswith(event["event"])


def test_a_task_skill_is_rendered_from_its_skill_md(page, served: Served):
    visit(page, served, "/skills/omar/deploy-flask-app")
    rendered = page.locator("#skill-md")
    assert rendered.locator("h2").count() >= 1  # markdown headings became HTML headings
    assert rendered.locator("script").count() == 0
    assert page.locator("#versions tr").count() >= 2


def test_a_browser_signs_in_with_a_token(browser, served: Served):
    context = browser.new_context()
    tab = context.new_page()
    tab.goto(served.base + "/charts")
    assert tab.url.startswith(served.base + "/login")
    tab.fill("input[name=token]", "wrong")
    tab.click("button[type=submit]")
    assert "unknown token" in tab.inner_text("main")
    tab.fill("input[name=token]", FULL)
    tab.click("button[type=submit]")
    tab.wait_for_load_state("load")
    assert tab.url == served.base + "/charts"
    assert tab.locator("svg.chart").count() >= 2
    context.close()
