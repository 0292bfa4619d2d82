"""The /dashboard page in a real headless Chromium (Debian's package, driven by Playwright).

Never runs `playwright install`: it launches /usr/bin/chromium (`.ci/run` installs it).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from ..forecast_helpers import db_now
from ..helpers import Api, InProcessServer, settings_for, tasks_of

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
OUTPUT = Path(__file__).resolve().parents[2] / "test-output"
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
                assert numbers.startswith("2 of 4 items · 2 of 4 answers"), numbers
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


async def _deadline_placement(page: Any, svg: str) -> tuple[float, float, float]:
    """(x of the deadline line, where the chart's own scale puts the deadline, x of the last
    history point), read from what is drawn."""
    return tuple(
        await page.eval_on_selector(
            svg,
            """(s) => {
                const [l, , r] = s.dataset.plot.split(" ").map(Number);
                const t0 = Number(s.dataset.t0), t1 = Number(s.dataset.t1);
                const line = s.querySelector("[data-testid=deadline-line]");
                const at = Number(line.dataset.at);
                const pts = s.querySelector("[data-testid=burndown-history]")
                  .getAttribute("points").trim().split(" ");
                return [Number(line.getAttribute("x1")), l + (at - t0) / (t1 - t0) * (r - l),
                        Number(pts[pts.length - 1].split(",")[0])];
            }""",
        )
    )


async def test_dashboard_draws_burndown_throughput_badges_and_alerts(
    dash_server: InProcessServer, db: asyncpg.Connection, tmp_path: Path
) -> None:
    async with Api(dash_server.url) as api:
        customer = await api.create_customer()
        tagger = await api.create_expert(["tagging"], name="tagger")
        writer = await api.create_expert(["essay"], name="writer")
        now = await db_now(db)
        soon = (now + timedelta(hours=1)).isoformat()
        tok = customer["token"]
        # Unknown: someone present holds `tagging` (seen asking for work before the project
        # existed, so the deadline job never judged it unheld), but nothing was measured yet.
        assert await api.claim(tagger["token"]) is None
        unknown = (
            await api.create_project(
                tok,
                tasks_of("tagging", 3),
                name="Unknown pace",
                deadline=(now + timedelta(hours=2)).isoformat(),
            )
        )["project"]["id"]
        # At risk: nobody holds `review`; the deadline job records an alert.
        risky = (
            await api.create_project(
                tok,
                tasks_of("grading", 2) + tasks_of("review", 2),
                name="Needs reviewers",
                deadline=soon,
            )
        )["project"]["id"]

        async with playwright_api.async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = await browser.new_page(viewport={"width": 1100, "height": 900})
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                requests: list[str] = []
                page.on("request", lambda req: requests.append(req.url))
                await page.goto(f"{dash_server.url}/dashboard?poll=400")
                await page.fill("#token", tok)
                await page.click("#auth button[type=submit]")

                u = f'[data-project="{unknown}"]'
                badge = page.locator(f"{u} [data-testid=unknown]")
                await badge.wait_for(timeout=WAIT_MS)
                assert await badge.inner_text() == "forecast unknown"
                assert await page.locator(f"{u} [data-testid=on-track]").count() == 0
                assert "forecast unknown" in await page.inner_text(f"{u} [data-testid=forecast]")

                r = f'[data-project="{risky}"]'
                await page.wait_for_selector(f"{r} [data-testid=alert] time", timeout=WAIT_MS)
                assert await page.inner_text(f"{r} [data-testid=at-risk]") == "at risk"
                # The alert is listed with its time: the very instant the API recorded.
                alerts = (
                    await api.gql(
                        "query($p: ID!) { project(id: $p) { alertHistory(first: 1)"
                        " { edges { node { createdAt message } } } } }",
                        {"p": risky},
                        tok,
                    )
                )["project"]["alertHistory"]["edges"]
                alerts = [e["node"] for e in alerts]
                item = page.locator(f"{r} [data-testid=alert]").first
                assert (
                    await item.locator("time").get_attribute("datetime") == alerts[0]["createdAt"]
                )
                assert (await item.locator("time").inner_text()).strip() != ""
                assert alerts[0]["message"] in await item.inner_text()
                # Throughput per skill: nothing on `review`, and the pace it needs is marked.
                review = f'{r} [data-testid=throughput] [data-throughput-skill="review"]'
                assert await page.get_attribute(f"{review} [data-testid=rate]", "width") == "0"
                assert await page.locator(f"{review} [data-testid=needed]").count() == 1
                # 2 reviews left, about an hour to go: about 2 an hour are needed.
                assert re.search(r"0\.0/h · needs 2\.\d/h", await page.text_content(review) or "")
                assert (
                    await page.locator(
                        f'{r} [data-testid=throughput] [data-throughput-skill="grading"]'
                    ).count()
                    == 1
                )
                # The burn-down: 4 remaining so far, the deadline an hour ahead of now.
                svg = f"{r} [data-testid=burndown]"
                x_line, x_expected, x_now = await _deadline_placement(page, svg)
                assert abs(x_line - x_expected) < 0.2 and x_line > x_now

                # Done: one answer in, then the forecast and its range are drawn ...
                done = (
                    await api.create_project(
                        tok, tasks_of("essay", 2), name="Essays", deadline=soon
                    )
                )["project"]["id"]
                d = f'[data-project="{done}"]'
                # A project created after the page loaded shows on the next load.
                await page.reload()
                await page.wait_for_selector(d, timeout=WAIT_MS)
                claim = await api.claim(writer["token"])
                assert claim is not None
                await api.submit(writer["token"], claim["assignmentId"], {"grade": 5})
                # attached, not visible: a range that tight may have no area at this scale
                await page.wait_for_selector(
                    f"{d} [data-testid=forecast-range]", state="attached", timeout=WAIT_MS
                )
                range_points = await page.get_attribute(
                    f"{d} [data-testid=forecast-range]", "points"
                )
                assert range_points is not None and len(range_points.split()) == 3
                assert await page.locator(f"{d} [data-testid=forecast-line]").count() == 1
                # ... and the last answer completes it: a "completed" badge, the history down
                # to zero (the chart's baseline), no forecast left, the deadline after it.
                claim = await api.claim(writer["token"])
                assert claim is not None
                await api.submit(writer["token"], claim["assignmentId"], {"grade": 4})
                # completed projects are folded away behind a toggle
                toggle = page.locator("#toggle-completed")
                await toggle.wait_for(timeout=WAIT_MS)
                assert await toggle.inner_text() == "Show 1 completed"
                assert await page.locator(f"#projects {d}").count() == 0
                await toggle.click()
                completed = page.locator(f"#completed {d} [data-testid=completed]")
                await completed.wait_for(timeout=WAIT_MS)
                assert await completed.inner_text() == "completed"
                assert await page.get_attribute(d, "data-status") == "completed"
                assert "completed" in await page.inner_text(f"{d} [data-testid=forecast]")
                assert await page.locator(f"{d} [data-testid=forecast-range]").count() == 0
                svg = f"{d} [data-testid=burndown]"
                points = (
                    await page.get_attribute(f"{svg} [data-testid=burndown-history]", "points")
                    or ""
                ).split()
                plot = (await page.get_attribute(svg, "data-plot") or "").split()
                top, baseline = float(plot[1]), float(plot[3])
                vmax = float(await page.get_attribute(svg, "data-vmax") or "0")
                history = (
                    await api.gql(
                        "query($p: ID!) { project(id: $p) {"
                        " remainingHistory(first: 120) { edges { node { remaining finished } } }"
                        " } }",
                        {"p": done},
                        tok,
                    )
                )["project"]["remainingHistory"]["edges"]
                # One vertex per point of the API's history, at its height on the chart's
                # scale, after a first one at the whole scope (2 essays).
                nodes = [e["node"] for e in history]
                values = [nodes[0]["remaining"] + nodes[0]["finished"]]
                values += [n["remaining"] for n in nodes]
                expected = [round(top + (1 - v / vmax) * (baseline - top), 1) for v in values]
                assert [float(p.split(",")[1]) for p in points] == expected
                assert values[0] == 2 and expected[0] == top and expected[-1] == baseline
                x_line, x_expected, x_done = await _deadline_placement(page, svg)
                assert abs(x_line - x_expected) < 0.2 and x_line > x_done

                shot = tmp_path / "dashboard-charts.png"
                await page.screenshot(path=str(shot), full_page=True)
                OUTPUT.mkdir(exist_ok=True)
                shutil.copy(shot, OUTPUT / "dashboard-charts.png")
                # Everything the page loaded came from this server (no CDN).
                assert all(u.startswith(dash_server.url) for u in requests), requests
                assert errors == []
            finally:
                await browser.close()


async def _order(page: Any) -> list[str]:
    return list(
        await page.eval_on_selector_all(
            "#projects > [data-project]", "(cards) => cards.map((c) => c.dataset.project)"
        )
    )


async def test_dashboard_counts_items_not_slots_and_puts_what_needs_a_look_first(
    dash_server: InProcessServer, db: asyncpg.Connection, tmp_path: Path
) -> None:
    async with Api(dash_server.url) as api:
        customer = await api.create_customer()
        tok = customer["token"]
        pairs = [await api.create_expert(["pairs"], name=f"judge {i}") for i in range(2)]
        quick = await api.create_expert(["quick"], name="quick")
        writer = await api.create_expert(["essay"], name="writer")
        # present before the projects exist: `essay` is held, its pace merely unmeasured
        assert await api.claim(writer["token"]) is None
        now = await db_now(db)

        def due(hours: int) -> str:
            return (now + timedelta(hours=hours)).isoformat()

        # 3 items x 2 answers: one judge answers all three, the other one of them -> one item
        # resolved, four answers of six
        judged = (await api.create_project(tok, tasks_of("pairs", 3), name="Pairs", redundancy=2))[
            "project"
        ]["id"]
        later = (
            await api.create_project(tok, tasks_of("essay", 1), name="Later", deadline=due(3))
        )["project"]["id"]
        sooner = (
            await api.create_project(tok, tasks_of("essay", 1), name="Sooner", deadline=due(1))
        )["project"]["id"]
        # the latest deadline, but nobody holds `review`: at risk, so first
        risky = (
            await api.create_project(tok, tasks_of("review", 2), name="Risky", deadline=due(5))
        )["project"]["id"]
        done = (await api.create_project(tok, tasks_of("quick", 1), name="Done"))["project"]["id"]
        for expert, n in ((pairs[0], 3), (pairs[1], 1), (quick, 1)):
            for _ in range(n):
                claim = await api.claim(expert["token"])
                assert claim is not None
                await api.submit(expert["token"], claim["assignmentId"], {"better": "a"})

        async with playwright_api.async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = await browser.new_page(viewport={"width": 1100, "height": 900})
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                await page.goto(f"{dash_server.url}/dashboard?poll=400")
                await page.fill("#token", tok)
                await page.click("#auth button[type=submit]")
                await page.wait_for_selector(
                    f'[data-project="{risky}"] [data-testid=at-risk]', timeout=WAIT_MS
                )

                card = f'[data-project="{judged}"]'
                numbers = await page.inner_text(f"{card} [data-testid=numbers]")
                assert numbers.startswith("1 of 3 items · 4 of 6 answers"), numbers
                assert (
                    await page.get_attribute(f"{card} > [role=progressbar]", "aria-valuenow")
                    == "33"
                )
                # at risk first, then the nearest deadline, then no deadline; completed folded
                assert await _order(page) == [risky, sooner, later, judged]
                assert await page.locator(f'[data-project="{done}"]').count() == 0
                toggle = page.locator("#toggle-completed")
                assert await toggle.inner_text() == "Show 1 completed"
                await toggle.click()
                await page.wait_for_selector(f'#completed [data-project="{done}"]', timeout=WAIT_MS)
                assert await toggle.get_attribute("aria-expanded") == "true"
                assert await _order(page) == [risky, sooner, later, judged]

                shot = tmp_path / "dashboard-order.png"
                await page.screenshot(path=str(shot), full_page=True)
                OUTPUT.mkdir(exist_ok=True)
                shutil.copy(shot, OUTPUT / "dashboard-order.png")
                await toggle.click()
                await page.wait_for_selector(f'[data-project="{done}"]', state="detached")
                assert errors == []
            finally:
                await browser.close()
