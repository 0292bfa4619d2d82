"""The expert's side of /work in headless Chromium: skip and can't answer (and the hour's
allowance running out), the claim released when the tab closes, instructions rendered
safely (nothing executes, nothing loads from elsewhere), the My work panel, and a customer's
or admin's token told that the page is for experts. Screenshots go to test-output/."""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from ..helpers import ADMIN_TOKEN, Api, InProcessServer, settings_for, tasks_of, wait_for
from .test_dashboard import CHROMIUM, CHROMIUM_ARGS, OUTPUT, WAIT_MS

playwright_api = pytest.importorskip("playwright.async_api")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is not installed"),
]

# a 1x1 PNG
PIXEL = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
        "0000000d49444154789c6360f8cf00000301010018dd8db00000000049454e44ae426082"
    )
).decode()


@asynccontextmanager
async def browser_page(server_url: str) -> AsyncIterator[tuple[Any, list[str], list[str]]]:
    """A page whose requests to anything but the server are aborted and recorded."""
    async with playwright_api.async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context(viewport={"width": 1000, "height": 800})
            elsewhere: list[str] = []
            errors: list[str] = []

            async def route(r: Any) -> None:
                url = r.request.url
                if url.startswith(server_url) or url.startswith("data:"):
                    await r.continue_()
                else:
                    elsewhere.append(url)
                    await r.abort()

            await context.route("**/*", route)
            page = await context.new_page()
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page, elsewhere, errors
        finally:
            await browser.close()


async def sign_in(page: Any, server_url: str, token: str) -> None:
    await page.goto(f"{server_url}/work")
    await page.fill("#token", token)
    await page.click("#auth button[type=submit]")


async def open_count(api: Api, token: str, project_id: str) -> int:
    return (await api.progress(token, project_id))["open"]


def shot(name: str) -> str:
    OUTPUT.mkdir(exist_ok=True)
    return str(OUTPUT / name)


async def test_skip_and_cant_answer_take_the_next_task_until_the_hour_runs_out(
    database_url: str, tmp_path: Path, db: asyncpg.Connection
) -> None:
    srv = InProcessServer(settings_for(database_url, tmp_path, releases_per_hour=2))
    await srv.start()
    try:
        async with Api(srv.url) as api, browser_page(srv.url) as (page, elsewhere, errors):
            customer = await api.create_customer()
            expert = await api.create_expert(["vision"])
            tasks = [{"skill": "vision", "payload": f"item {i}"} for i in range(3)]
            await api.create_project(customer["token"], tasks)
            await sign_in(page, srv.url, expert["token"])
            await page.locator("#payload", has_text="item 0").wait_for(timeout=WAIT_MS)
            assert "Skips left this hour: 2" in (await page.text_content("#releases") or "")

            await page.click("#skip")
            await page.locator("#payload", has_text="item 1").wait_for(timeout=WAIT_MS)
            assert "Skipped" in (await page.text_content("#notice") or "")
            assert "Skips left this hour: 1" in (await page.text_content("#releases") or "")
            await page.click("#cannot-answer")
            await page.locator("#payload", has_text="item 2").wait_for(timeout=WAIT_MS)
            reasons = await db.fetch(
                "SELECT i.payload, r.reason FROM item_releases r JOIN items i ON i.id = r.item_id"
                " ORDER BY r.released_at"
            )
            assert [r["reason"] for r in reasons] == ["SKIP", "CANNOT_ANSWER"]
            assert await db.fetchval("SELECT count(*) FROM tasks WHERE status = 'open'") == 2

            # The hour's allowance is used: the refusal says when the next one is allowed,
            # and the task stays.
            await page.click("#skip")
            await page.locator("#notice", has_text="used this hour's skips").wait_for(
                timeout=WAIT_MS
            )
            assert "next one is allowed at" in (await page.text_content("#notice") or "")
            assert "No skips left this hour; the next one at" in (
                await page.text_content("#releases") or ""
            )
            assert await page.is_visible("#task")
            assert "item 2" in (await page.text_content("#payload") or "")
            await page.screenshot(path=shot("workbench-skips-used.png"), full_page=True)
            assert elsewhere == [] and errors == []
    finally:
        await srv.stop()


async def test_closing_the_tab_releases_the_claim(
    server: InProcessServer, db: asyncpg.Connection
) -> None:
    async with Api(server.url) as api, browser_page(server.url) as (page, _, errors):
        customer = await api.create_customer()
        expert = await api.create_expert(["vision"])
        created = await api.create_project(
            customer["token"], [{"skill": "vision", "payload": "held"}]
        )
        pid = created["project"]["id"]
        await sign_in(page, server.url, expert["token"])
        await page.locator("#payload", has_text="held").wait_for(timeout=WAIT_MS)
        assert await open_count(api, customer["token"], pid) == 0
        await page.close(run_before_unload=True)
        await wait_for(
            lambda: open_count(api, customer["token"], pid), "the task open again", timeout=30
        )
        assert await db.fetchval("SELECT reason FROM item_releases") == "SKIP"
        assert errors == []


async def test_instructions_render_without_running_or_loading_anything(
    server: InProcessServer,
) -> None:
    markdown = (
        "# How to label\n\nLook for **cats**; see [the guide](https://example.org/guide).\n\n"
        "<script>fetch('https://evil.example/script')</script>\n\n"
        '<img src="x" onerror="fetch(\'https://evil.example/onerror\')">\n\n'
        "![remote](https://images.example/remote.png)\n\n"
        f"![inline](data:image/png;base64,{PIXEL})\n\n"
        "<a href=\"javascript:fetch('https://evil.example/js')\">click</a>\n\n"
        '<iframe src="https://evil.example/frame"></iframe>\n'
    )
    async with Api(server.url) as api, browser_page(server.url) as (page, elsewhere, errors):
        customer = await api.create_customer()
        expert = await api.create_expert(["vision"])
        created = await api.create_project(
            customer["token"], [{"skill": "vision", "payload": "a photo"}]
        )
        pid = created["project"]["id"]
        r = await api.rest(
            "PUT", f"/v1/projects/{pid}/instructions", customer["token"],
            json={"markdown": markdown},
        )  # fmt: skip
        assert r.status_code == 200
        await sign_in(page, server.url, expert["token"])
        body = page.locator("#instructions-body")
        await body.locator("h1", has_text="How to label").wait_for(timeout=WAIT_MS)
        assert await body.locator("strong", has_text="cats").count() == 1
        assert "(version 1)" in (await page.text_content("#instructions-version") or "")
        # nothing active survived, and only the data: image is an image
        for selector in ("script", "iframe", "[onerror]", "a[href^='javascript']"):
            assert await body.locator(selector).count() == 0, selector
        # images only from data: or this origin (src="x" is /work/x, here); the remote one
        # is replaced by a note
        sources = [await img.get_attribute("src") for img in await body.locator("img").all()]
        assert sources[0] == "x" and (sources[1] or "").startswith("data:image/png")
        assert len(sources) == 2
        assert await body.locator(".blocked-image").count() == 1
        await page.locator("#payload", has_text="a photo").click()
        await page.screenshot(path=shot("workbench-instructions.png"), full_page=True)
        assert elsewhere == [], elsewhere
        assert errors == []

        # A project allowing remote images shows them: the recorder sees that very request,
        # so an empty record above means nothing was asked for.
        await page.click("#skip")
        await page.locator("#status", has_text="Nothing to do").wait_for(timeout=WAIT_MS)
        # The vision task is added only after the instructions: the waiting page claims it at
        # once, and a claim carries the version current when it was made.
        other = await api.create_project(
            customer["token"], [{"skill": "audio", "payload": "not for this expert"}]
        )
        other_id = other["project"]["id"]
        await api.rest(
            "PUT", f"/v1/projects/{other_id}/instructions", customer["token"],
            json={"markdown": "![remote](https://images.example/ok.png)",
                  "allow_remote_images": True},
        )  # fmt: skip
        await api.gql(
            "mutation($p: ID!, $t: [TaskInput!]!) { addTasks(projectId: $p, tasks: $t) { added } }",
            {"p": other_id, "t": [{"skill": "vision", "payload": "another photo"}]},
            customer["token"],
        )
        await page.locator("#payload", has_text="another photo").wait_for(timeout=WAIT_MS)
        await wait_for(lambda: "https://images.example/ok.png" in elsewhere, "the remote image")


async def test_my_work_panel_shows_states_reasons_and_bonuses(server: InProcessServer) -> None:
    async with Api(server.url) as api, browser_page(server.url) as (page, elsewhere, errors):
        customer = await api.create_customer()
        expert = await api.create_expert(["vision"])
        created = await api.create_project(
            customer["token"], tasks_of("vision", 2), payCents=25, paymentPolicy="on_review"
        )
        done = []
        for i in range(2):
            claim = await api.claim(expert["token"])
            assert claim is not None
            await api.submit(expert["token"], claim["assignmentId"], {"label": i})
            done.append(claim["assignmentId"])
        await api.gql(
            "mutation($a: [ID!]!) { rejectAssignments(assignmentIds: $a,"
            ' reason: "blurry answer") { reviewedAt } }',
            {"a": [done[0]]},
            customer["token"],
        )
        await api.gql(
            "mutation($p: ID!, $e: ID!) { grantBonus(projectId: $p, expertId: $e,"
            ' amountCents: 150, reason: "weekend push", idempotencyKey: "w1") { id } }',
            {"p": created["project"]["id"], "e": expert["id"]},
            customer["token"],
        )
        await sign_in(page, server.url, expert["token"])
        await page.locator("#status", has_text="Nothing to do").wait_for(timeout=WAIT_MS)
        await page.click("#show-mywork")
        rejected = page.locator(f"#work-rows tr[data-assignment='{done[0]}']")
        await rejected.wait_for(timeout=WAIT_MS)
        assert "rejected" in (await rejected.text_content() or "")
        assert "blurry answer" in (await rejected.text_content() or "")
        pending = page.locator(f"#work-rows tr[data-assignment='{done[1]}']")
        assert "pending" in (await pending.text_content() or "")
        earnings = await page.text_content("#earnings") or ""
        assert "pending $0.25" in earnings and "rejected $0.25" in earnings
        assert "bonuses $1.50" in earnings
        assert "weekend push" in (await page.text_content("#bonus-lines") or "")
        await page.screenshot(path=shot("workbench-my-work.png"), full_page=True)
        assert elsewhere == [] and errors == []


async def test_a_customer_or_admin_token_is_told_the_page_is_for_experts(
    server: InProcessServer,
) -> None:
    async with Api(server.url) as api, browser_page(server.url) as (page, _, errors):
        customer = await api.create_customer()
        expert = await api.create_expert(["vision"])
        await api.create_project(customer["token"], [{"skill": "vision", "payload": "x"}])
        for token in (customer["token"], ADMIN_TOKEN):
            await sign_in(page, server.url, token)
            message = page.locator("#status", has_text="This page is for experts")
            await message.wait_for(timeout=WAIT_MS)
            assert "no longer yours" not in (await page.text_content("body") or "")
            assert await page.is_hidden("#task")
        await page.screenshot(path=shot("workbench-not-an-expert.png"), full_page=True)
        # the expert's token on the same page works
        await sign_in(page, server.url, expert["token"])
        await page.locator("#payload", has_text="x").wait_for(timeout=WAIT_MS)
        assert errors == []
