"""The /dashboard page in a real headless Chromium (Debian's package, driven by Playwright).

Never runs `playwright install`: it launches /usr/bin/chromium (`.ci/run` installs it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio

from .conftest import InProcessServer
from .conftest import test_settings as settings_for
from .forecast_helpers import db_now
from .helpers import Api, tasks_of

playwright_api = pytest.importorskip("playwright.async_api")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
OUTPUT = Path(__file__).resolve().parent.parent / "test-output"
WAIT_MS = 20_000

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is not installed"),
]


@pytest_asyncio.fixture
async def dash_server(database_url: str, tmp_path: Path) -> AsyncIterator[InProcessServer]:
    srv = InProcessServer(
        settings_for(database_url, tmp_path, forecast_interval=0.3, forecast_poll=0.2)
    )
    await srv.start()
    yield srv
    await srv.stop()


async def test_dashboard_progress_and_at_risk(
    dash_server: InProcessServer, db: asyncpg.Connection, tmp_path: Path
) -> None:
    async with Api(dash_server.url) as api:
        customer = await api.create_customer()
        expert = await api.create_expert(["grading"])
        now = await db_now(db)
        # Four tasks due in an hour; nobody holds `review`: the deadline job flags it at risk
        # (the forecast measures pace from the work, so the fast grading alone would be fine).
        pid = (
            await api.create_project(
                customer["token"],
                tasks_of("grading", 2) + tasks_of("review", 2),
                name="Essays <b>batch</b>",
                deadline=(now + timedelta(hours=1)).isoformat(),
            )
        )["project"]["id"]

        async with playwright_api.async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = await browser.new_page(viewport={"width": 1100, "height": 700})
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                # Polling every 10 minutes: within this test only the subscription can update.
                await page.goto(f"{dash_server.url}/dashboard?poll=600000")
                await page.fill("#token", customer["token"])
                await page.click("#auth button[type=submit]")

                card = f'[data-project="{pid}"]'
                bar = f"{card} > [role=progressbar]"
                await page.wait_for_selector(card, timeout=WAIT_MS)
                assert await page.get_attribute(bar, "aria-valuenow") == "0"
                # The page is subscribed over graphql-transport-ws (token in connection_init).
                await page.wait_for_selector('#live[data-mode="live"]', timeout=WAIT_MS)
                # The name is shown as text, never as markup.
                assert await page.locator(f"{card} h2").inner_text() != ""
                assert await page.locator(f"{card} h2 b").count() == 0

                for _ in range(2):
                    claim = await api.claim(expert["token"])
                    assert claim is not None
                    await api.submit(expert["token"], claim["assignmentId"], {"grade": 3})
                # The bar moves: pushed by the forecastUpdated subscription.
                await page.wait_for_selector(f'{bar}[aria-valuenow="50"]', timeout=WAIT_MS)
                await page.wait_for_selector(f"{card} [data-testid=at-risk]", timeout=WAIT_MS)
                numbers = await page.locator(f"{card} [data-testid=numbers]").inner_text()
                assert numbers.startswith("2 of 4 done")
                # The reason, per skill, in words: nobody can do `review`.
                review = await page.locator(f'{card} [data-skill="review"]').inner_text()
                assert "no present expert holds `review`" in review, review
                # At risk is the only badge: never "on track" next to it.
                assert await page.locator(f"{card} [data-testid=on-track]").count() == 0

                # The token survives a reload (localStorage).
                await page.reload()
                await page.wait_for_selector(f'{bar}[aria-valuenow="50"]', timeout=WAIT_MS)
                shot = tmp_path / "dashboard.png"
                await page.screenshot(path=str(shot), full_page=True)
                OUTPUT.mkdir(exist_ok=True)
                shutil.copy(shot, OUTPUT / "dashboard.png")
                assert errors == []
            finally:
                await browser.close()
