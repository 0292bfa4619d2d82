"""The /work page in headless Chromium (Debian's, via Playwright; never `playwright install`):
claim, a form from the answer schema, a refused answer shown by its field, the receipt, the
idle wait, and a wake-up by the taskAvailable subscription (the page never polls)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ..helpers import Api, InProcessServer
from .test_dashboard import CHROMIUM, CHROMIUM_ARGS, OUTPUT, WAIT_MS

playwright_api = pytest.importorskip("playwright.async_api")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is not installed"),
]

SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"enum": ["cat", "dog"]},
        "note": {"type": "string"},
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
    },
    "required": ["label", "score"],
}


async def test_label_in_the_browser(server: InProcessServer, tmp_path: Path) -> None:
    async with Api(server.url) as api:
        customer = await api.create_customer()
        expert = await api.create_expert(["vision"])
        await api.create_project(
            customer["token"],
            [{"skill": "vision", "payload": {"text": "a photo of a sleeping dog"}}],
            answerSchema=SCHEMA,
            payCents=12,
        )
        async with playwright_api.async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = await browser.new_page(viewport={"width": 1000, "height": 760})
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                requests: list[str] = []
                page.on("request", lambda req: requests.append(req.url))
                await page.goto(f"{server.url}/work")
                await page.fill("#token", expert["token"])
                await page.click("#auth button[type=submit]")

                # The payload as text, enum buttons, a text area and a number field.
                await page.wait_for_selector("#task:not([hidden])", timeout=WAIT_MS)
                assert await page.text_content("#payload") == "a photo of a sleeping dog"
                choices = page.locator("[data-field=label] .choices button")
                buttons = await choices.all_text_contents()
                assert buttons == ["cat", "dog"]
                assert await page.locator("[data-field=note] textarea").count() == 1
                assert await page.get_attribute("#field-score", "type") == "number"
                assert "left" in (await page.text_content("#countdown") or "")

                # A score the schema refuses: shown next to that field, the task stays.
                await page.click("[data-field=label] button:text('dog')")
                await page.fill("#field-note", "curled up")
                await page.fill("#field-score", "9")
                await page.click("#submit")
                score_error = page.locator("[data-field=score] .error")
                await score_error.wait_for(state="visible", timeout=WAIT_MS)
                assert "maximum of 5" in (await score_error.text_content() or "")
                assert await page.is_visible("#task")

                # A right answer: the receipt, then nothing to do.
                await page.fill("#field-score", "4")
                await page.click("#submit")
                await page.wait_for_selector("#receipt:not([hidden])", timeout=WAIT_MS)
                assert "paid 12 cents" in (await page.text_content("#receipt") or "")
                # (locator waits: the page's CSP forbids the eval behind wait_for_function)
                idle = page.locator("#status", has_text="Nothing to do")
                await idle.wait_for(timeout=WAIT_MS)
                claims_before = sum(r.endswith("/v1/tasks/next") for r in requests)

                # New work: the subscription wakes the page, which claims it.
                await api.create_project(
                    customer["token"],
                    [{"skill": "vision", "payload": "https://example.org/img/42.png"}],
                )
                link = page.locator("#payload a", has_text="example.org/img/42.png")
                await link.wait_for(timeout=WAIT_MS)  # a URL payload is a link
                # No schema: a JSON editor.
                assert await page.locator("[data-field='$'] textarea.json").count() == 1
                assert sum(r.endswith("/v1/tasks/next") for r in requests) == claims_before + 1
                OUTPUT.mkdir(exist_ok=True)
                await page.screenshot(path=str(OUTPUT / "workbench.png"), full_page=True)
                assert errors == []
            finally:
                await browser.close()
