"""GraphiQL (/graphql), the REST reference (/docs/api) and the home page (/) in a real headless
Chromium, with every request to anything but the server blocked: they must work offline, from
the package's own assets."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from ..helpers import ADMIN_TOKEN, InProcessServer, settings_for
from .test_dashboard import CHROMIUM, CHROMIUM_ARGS, OUTPUT, WAIT_MS

playwright_api = pytest.importorskip("playwright.async_api")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is not installed"),
]


@pytest_asyncio.fixture
async def site(database_url: str, tmp_path: Path) -> AsyncIterator[InProcessServer]:
    srv = InProcessServer(settings_for(database_url, tmp_path))
    await srv.start()
    yield srv
    await srv.stop()


class Offline:
    """A page whose requests may reach only `origin`; the others are aborted and recorded."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.blocked: list[str] = []
        self.errors: list[str] = []

    async def open(self, browser: Any) -> Any:
        page = await browser.new_page(viewport={"width": 1200, "height": 800})

        async def route(r: Any) -> None:
            url = r.request.url
            if url.startswith(self.origin + "/") or url.startswith(("data:", "blob:")):
                await r.continue_()
            else:
                self.blocked.append(url)
                await r.abort()

        await page.route("**/*", route)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        return page


async def _shot(page: Any, tmp_path: Path, name: str) -> None:
    shot = tmp_path / name
    await page.screenshot(path=str(shot), full_page=False)
    OUTPUT.mkdir(exist_ok=True)
    shutil.copy(shot, OUTPUT / name)


async def test_graphiql_runs_a_query_offline(site: InProcessServer, tmp_path: Path) -> None:
    offline = Offline(site.url)
    async with playwright_api.async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await offline.open(browser)
            # the token, as GraphiQL keeps the Headers tab (shouldPersistHeaders)
            headers = json.dumps({"Authorization": f"Bearer {ADMIN_TOKEN}"})
            await page.add_init_script(
                f"localStorage.setItem('graphiql:headers', {json.dumps(headers)})"
            )
            await page.goto(f"{site.url}/graphql")
            button = page.locator(".graphiql-execute-button")
            await button.wait_for(timeout=WAIT_MS)
            await button.click()
            result = page.locator(".result-window")
            await result.get_by_text('"__typename": "Query"').wait_for(timeout=WAIT_MS)
            await _shot(page, tmp_path, "graphiql.png")
            assert offline.blocked == []
            assert offline.errors == []
        finally:
            await browser.close()


async def test_rest_reference_and_home_render_offline(
    site: InProcessServer, tmp_path: Path
) -> None:
    offline = Offline(site.url)
    async with playwright_api.async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await offline.open(browser)
            await page.goto(f"{site.url}/docs/api")
            await page.get_by_text("/v1/assignments/{id}/submit").wait_for(timeout=WAIT_MS)
            await page.get_by_text("taskroute REST API").first.wait_for(timeout=WAIT_MS)
            await _shot(page, tmp_path, "rest-reference.png")

            await page.goto(site.url + "/")
            links = await page.eval_on_selector_all("a", "as => as.map(a => a.pathname)")
            assert {"/work", "/dashboard", "/graphql", "/docs/api"} <= set(links)
            await page.click("text=REST API reference")
            await page.get_by_text("/v1/tasks/next").wait_for(timeout=WAIT_MS)
            assert offline.blocked == []
            assert offline.errors == []
        finally:
            await browser.close()
