"""The /work page's layouts in headless Chromium (Debian's, via Playwright): a GRADE rubric,
PAIRWISE candidates side by side in the drawn order with the answer stored as a / b, a REVIEW
document delivered by link beside its form, and the review-task view (accept / reject /
correct). Screenshots in test-output/."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from ..helpers import Api, InProcessServer
from .test_dashboard import CHROMIUM, CHROMIUM_ARGS, OUTPUT, WAIT_MS

playwright_api = pytest.importorskip("playwright.async_api")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is not installed"),
]

GRADE = {
    "type": "object",
    "properties": {
        "accuracy": {"type": "integer", "minimum": 1, "maximum": 5},
        "tone": {"enum": ["poor", "ok", "good"]},
        "comment": {"type": "string"},
    },
    "required": ["accuracy", "tone"],
}
PAIRWISE = {
    "type": "object",
    "properties": {"winner": {"enum": ["a", "b", "tie"]}, "reason": {"type": "string"}},
    "required": ["winner"],
}
REVIEW = {
    "type": "object",
    "properties": {
        "verdict": {"enum": ["compliant", "not compliant"]},
        "notes": {"type": "string"},
    },
    "required": ["verdict"],
}


class Page:
    """One browser page on /work, signed in as an expert; fails on any page error."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    async def start(self, url: str, token: str) -> None:
        await self.page.goto(f"{url}/work")
        await self.page.fill("#token", token)
        await self.page.click("#auth button[type=submit]")
        await self.page.wait_for_selector("#task:not([hidden])", timeout=WAIT_MS)

    async def shot(self, name: str) -> None:
        OUTPUT.mkdir(exist_ok=True)
        await self.page.screenshot(path=str(OUTPUT / name), full_page=True)

    async def submitted(self) -> None:
        await self.page.wait_for_selector("#receipt:not([hidden])", timeout=WAIT_MS)
        assert self.errors == []


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    async with playwright_api.async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            await b.close()


async def _page(browser: Any) -> Page:
    return Page(await browser.new_page(viewport={"width": 1100, "height": 800}))


async def _answer(db: asyncpg.Connection, project_id: str) -> Any:
    rows = await db.fetch(
        "SELECT answer, candidates_swapped FROM assignments"
        " WHERE project_id = $1 AND status = 'submitted'",
        project_id,
    )
    assert len(rows) == 1
    return rows[0]


async def test_grade_rubric(server: InProcessServer, browser: Any, db: asyncpg.Connection) -> None:
    async with Api(server.url) as api:
        customer = await api.create_customer()
        expert = await api.create_expert(["essays"])
        pid = (
            await api.create_project(
                customer["token"],
                [{"skill": "essays", "payload": {"text": "The mitochondria is the powerhouse."}}],
                layout="GRADE", answerSchema=GRADE,
            )
        )["project"]["id"]  # fmt: skip
        p = await _page(browser)
        await p.start(server.url, expert["token"])
        assert await p.page.get_attribute("#task", "data-layout") == "GRADE"
        scale = p.page.locator("[data-field=accuracy].criterion .choices button")
        assert await scale.all_text_contents() == ["1", "2", "3", "4", "5"]
        tone = p.page.locator("[data-field=tone] .choices button")
        assert await tone.all_text_contents() == ["poor", "ok", "good"]
        await p.page.click("[data-field=accuracy] button:text('4')")
        await p.page.click("[data-field=tone] button:text('good')")
        await p.page.fill("#field-comment", "clear, one slip")
        await p.shot("workbench-grade.png")
        await p.page.click("#submit")
        await p.submitted()
        row = await _answer(db, pid)
        assert json.loads(row["answer"]) == {
            "accuracy": 4,
            "tone": "good",
            "comment": "clear, one slip",
        }


async def test_pairwise_side_by_side(
    server: InProcessServer, browser: Any, db: asyncpg.Connection
) -> None:
    async with Api(server.url) as api:
        customer = await api.create_customer()
        expert = await api.create_expert(["judge"])
        payload = {"first": "Answer A: Paris.", "second": "Answer B: Lyon."}
        pid = (
            await api.create_project(
                customer["token"], [{"skill": "judge", "payload": payload}],
                layout="PAIRWISE", answerSchema=PAIRWISE, candidateKeys=["first", "second"],
            )
        )["project"]["id"]  # fmt: skip
        p = await _page(browser)
        await p.start(server.url, expert["token"])
        panes = p.page.locator("#candidates .candidate")
        assert await panes.count() == 2
        left = await panes.nth(0).get_attribute("data-candidate")
        shown = await p.page.locator("#candidates .candidate-body").all_text_contents()
        expected = [payload["first"], payload["second"]]
        assert shown == (expected if left == "a" else expected[::-1])
        buttons = await p.page.locator("[data-field=winner] .choices button").all_text_contents()
        assert buttons == ["Left is better", "A tie", "Right is better"]
        await p.page.click("[data-field=winner] button:text('Left is better')")
        await p.page.fill("#field-reason", "the capital is Paris")
        await p.shot("workbench-pairwise.png")
        await p.page.click("#submit")
        await p.submitted()
        row = await _answer(db, pid)
        # the left pane's candidate, whichever it was; the order recorded on the assignment
        assert json.loads(row["answer"])["winner"] == left
        assert row["candidates_swapped"] == (left == "b")


async def test_review_document_by_link(
    server: InProcessServer, browser: Any, db: asyncpg.Connection
) -> None:
    document = "\n\n".join(f"Clause {i}. " + "The supplier shall deliver. " * 40 for i in range(60))
    async with Api(server.url) as api:
        customer = await api.create_customer()
        expert = await api.create_expert(["legal"])
        pid = (
            await api.create_project(
                customer["token"], [{"skill": "legal", "payload": {"document": document}}],
                layout="REVIEW", answerSchema=REVIEW,
            )
        )["project"]["id"]  # fmt: skip
        p = await _page(browser)
        requests: list[str] = []
        p.page.on("request", lambda req: requests.append(req.url))
        await p.start(server.url, expert["token"])
        doc = p.page.locator("#document")
        await doc.wait_for(state="visible", timeout=WAIT_MS)
        await p.page.locator("#document", has_text="Clause 59.").wait_for(timeout=WAIT_MS)
        assert any("/v1/payloads/" in r or "payload" in r.split("/v1/")[-1] for r in requests)
        # scrollable, beside the form
        tall = await doc.evaluate("(el) => el.scrollHeight > el.clientHeight")
        assert tall
        doc_box, form_box = await doc.bounding_box(), await p.page.locator("#answer").bounding_box()
        assert doc_box and form_box and form_box["x"] > doc_box["x"] + doc_box["width"] - 1
        await p.page.click("[data-field=verdict] button:text('compliant')")
        await p.shot("workbench-review-layout.png")
        await p.page.click("#submit")
        await p.submitted()
        row = await _answer(db, pid)
        assert json.loads(row["answer"]) == {"verdict": "compliant"}


async def test_review_task_view(
    server: InProcessServer, browser: Any, db: asyncpg.Connection
) -> None:
    async with Api(server.url) as api:
        customer = await api.create_customer()
        worker = await api.create_expert(["essays"], name="worker")
        reviewer = await api.create_expert(["review:essays"], name="reviewer")
        pid = (
            await api.create_project(
                customer["token"],
                [{"skill": "essays", "payload": {"text": "An essay on tides."}}],
                layout="GRADE", answerSchema=GRADE, paymentPolicy="on_review",
                expertReview=True, reviewPayCents=5,
            )
        )["project"]["id"]  # fmt: skip
        claim = await api.claim(worker["token"])
        assert claim is not None
        original = await api.submit(
            worker["token"], claim["assignmentId"], {"accuracy": 2, "tone": "ok"}
        )
        p = await _page(browser)
        await p.start(server.url, reviewer["token"])
        assert "accuracy" in (await p.page.text_content("#review-answer") or "")
        assert await p.page.is_visible("#verdict")
        assert not await p.page.is_visible("#fields")  # the correction form waits for "Correct"
        # rejecting without a reason is refused on the page
        await p.page.click("#verdict button[data-verdict=reject]")
        await p.page.click("#submit")
        await p.page.locator("#answer-error", has_text="reason").wait_for(timeout=WAIT_MS)
        # a correction: the rubric form appears holding the answer under review; the reviewer
        # changes what is wrong and the corrected answer becomes the label
        await p.page.click("#verdict button[data-verdict=correct]")
        assert await p.page.is_visible("#fields")
        chosen = await p.page.locator("#fields .choices button.chosen").all_text_contents()
        assert chosen == ["2", "ok"]
        assert await p.page.input_value("[data-field=comment] textarea") == ""
        await p.page.click("[data-field=accuracy] button:text('5')")
        await p.page.fill("#review-reason", "the argument holds")
        await p.shot("workbench-review-task.png")
        await p.page.click("#submit")
        await p.submitted()
        assert "paid 5 cents" in (await p.page.text_content("#receipt") or "")
        label = await db.fetchval(
            "SELECT answer FROM item_results WHERE project_id = $1 AND method = 'corrected'", pid
        )
        assert json.loads(label) == {"accuracy": 5, "tone": "ok"}
        state = await db.fetchval(
            "SELECT review_status FROM assignments WHERE id = $1", original["assignmentId"]
        )
        assert state == "rejected"
