"""Review as work: under on_review with expertReview, each answer's review is a task for
experts holding review:<skill>, claimed, leased and submitted like any task; the verdict
decides the answer, a correction becomes the label, the reviewer is paid per review. Checked
through the API, with the ledger read in the database."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from taskroute.db.pool import Database, create_pool
from taskroute.resolvers.jobs import auto_approval

from ..helpers import Api, GraphQLError, claim_mutation

SCHEMA = {
    "type": "object",
    "properties": {"label": {"enum": ["cat", "dog", "bird"]}},
    "required": ["label"],
}
CLAIM = claim_mutation("id skill payload answerSchema layout reviewOf { answer }")
REVIEW = """query($a: ID!) { assignmentReview(assignmentId: $a) {
  status reason reviewedBy } }"""
APPROVE = """mutation($ids: [ID!]!) { approveAssignments(assignmentIds: $ids) {
  assignmentId status changed } }"""
REJECT = """mutation($ids: [ID!]!, $r: String!) {
  rejectAssignments(assignmentIds: $ids, reason: $r) { assignmentId status changed } }"""
RESULTS = """query($p: ID!) { itemResults(projectId: $p) { edges { node {
  externalId answer method } } } }"""
SUBMIT = """mutation($a: ID!, $x: JSON!) { submit(assignmentId: $a, answer: $x) {
  payCents payStatus } }"""


async def _project(api: Api, customer: str, n: int, **extra: Any) -> str:
    tasks = [
        {"skill": "animals", "payload": {"text": f"photo {i}"}, "externalId": f"x{i}"}
        for i in range(n)
    ]
    fields: dict[str, Any] = {
        "answerSchema": SCHEMA,
        "payCents": 10,
        "paymentPolicy": "on_review",
        "expertReview": True,
        "reviewPayCents": 3,
        **extra,
    }
    return str((await api.create_project(customer, tasks, **fields))["project"]["id"])


async def _claim(api: Api, token: str) -> dict[str, Any] | None:
    data = await api.gql(CLAIM, {"s": None}, token)
    return data["claimNextTask"]


async def _answer_all(api: Api, token: str, label: str) -> dict[str, str]:
    """Answers every open task of the expert's skills; {payload text: assignment id}."""
    done = {}
    while (c := await _claim(api, token)) is not None:
        got = await api.gql(SUBMIT, {"a": c["assignmentId"], "x": {"label": label}}, token)
        assert got["submit"]["payStatus"] == "pending_review"
        done[c["task"]["payload"]["text"]] = c["assignmentId"]
    return done


async def _lines(db: asyncpg.Connection, assignment_id: str) -> int:
    return int(
        await db.fetchval("SELECT count(*) FROM payouts WHERE assignment_id = $1", assignment_id)
    )


async def test_the_whole_flow(api: Api, db: asyncpg.Connection) -> None:
    customer = (await api.create_customer())["token"]
    pid = await _project(api, customer, 3)
    worker = await api.create_expert(["animals"], name="worker")
    reviewer = await api.create_expert(["review:animals"], name="reviewer")
    answers = await _answer_all(api, worker["token"], "dog")
    assert len(answers) == 3

    verdicts = {
        "photo 0": {"verdict": "accept"},
        "photo 1": {"verdict": "reject", "reason": "that is a cat"},
        "photo 2": {"verdict": "correct", "correction": {"label": "bird"}, "reason": "a wren"},
    }
    reviews = {}
    for _ in range(3):
        c = await _claim(api, reviewer["token"])
        assert c is not None
        t = c["task"]
        # the original answer and payload, the project's schema for a correction, REST too
        assert t["skill"] == "review:animals" and t["layout"] == "GENERIC"
        assert t["reviewOf"] == {"answer": {"label": "dog"}}
        assert t["answerSchema"] == SCHEMA
        rest = await api.rest("POST", "/v1/tasks/next", reviewer["token"], json={})
        assert rest.json()["task"]["review_of"]["answer"] == {"label": "dog"}
        assert rest.json()["task"]["layout"] == "GENERIC"
        text = t["payload"]["text"]
        if text == "photo 1":  # refused reviews: nothing is written, the lease stays
            for bad, field in [
                ({"verdict": "reject"}, "answer.reason"),
                ({"verdict": "maybe"}, "answer.verdict"),
                ({"verdict": "correct", "correction": {"label": "fish"}}, "answer.correction"),
            ]:
                r = await api.rest(
                    "POST", f"/v1/assignments/{c['assignmentId']}/submit", reviewer["token"],
                    json={"answer": bad},
                )  # fmt: skip
                assert r.status_code == 422 and r.json()["error"]["code"] == "BAD_INPUT", r.text
                assert r.json()["error"]["details"]["field"].startswith(field), r.json()
        got = await api.gql(
            SUBMIT, {"a": c["assignmentId"], "x": verdicts[text]}, reviewer["token"]
        )
        assert got["submit"] == {"payCents": 3, "payStatus": "paid"}
        reviews[text] = c["assignmentId"]
    assert await _claim(api, reviewer["token"]) is None

    states = {
        text: (await api.gql(REVIEW, {"a": aid}, customer))["assignmentReview"]
        for text, aid in answers.items()
    }
    assert states["photo 0"] == {
        "status": "accepted", "reason": "accepted by a reviewer", "reviewedBy": "expert-review"
    }  # fmt: skip
    assert states["photo 1"]["status"] == "rejected"
    assert states["photo 1"]["reason"] == "that is a cat"
    assert states["photo 2"]["status"] == "rejected"  # corrected = rejected (payCorrected off)
    assert states["photo 2"]["reason"] == "corrected by a reviewer: a wren"
    # The ledger: the accepted answer once, each review once (per review assignment).
    assert [await _lines(db, answers[t]) for t in ("photo 0", "photo 1", "photo 2")] == [1, 0, 0]
    for aid in reviews.values():
        assert await _lines(db, aid) == 1
    paid = await db.fetch(
        "SELECT expert_id::text, sum(amount_cents)::int AS s FROM payouts GROUP BY 1"
    )
    assert {r["expert_id"]: r["s"] for r in paid} == {worker["id"]: 10, reviewer["id"]: 9}
    # The correction is the label.
    results = (await api.gql(RESULTS, {"p": pid}, customer))["itemResults"]["edges"]
    by_item = {e["node"]["externalId"]: e["node"] for e in results}
    assert by_item["x2"]["answer"] == {"label": "bird"} and by_item["x2"]["method"] == "corrected"
    assert by_item["x0"]["answer"] == {"label": "dog"} and by_item["x0"]["method"] == "majority"
    # The customer's review list shows the answers, not the reviews.
    listed = await api.gql(
        "query($p: ID!) { assignmentReviews(projectId: $p) { edges { node { assignmentId } } } }",
        {"p": pid},
        customer,
    )
    shown = {e["node"]["assignmentId"] for e in listed["assignmentReviews"]["edges"]}
    assert shown == set(answers.values())
    status = await db.fetchval("SELECT status FROM projects WHERE id = $1", pid)
    assert status == "completed"


async def test_corrected_answers_paid_when_the_project_says_so(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = (await api.create_customer())["token"]
    await _project(api, customer, 1, payCorrected=True)
    worker = await api.create_expert(["animals"], name="worker")
    reviewer = await api.create_expert(["review:animals"], name="reviewer")
    answers = await _answer_all(api, worker["token"], "dog")
    c = await _claim(api, reviewer["token"])
    assert c is not None
    fix = {"verdict": "correct", "correction": {"label": "cat"}}
    await api.gql(SUBMIT, {"a": c["assignmentId"], "x": fix}, reviewer["token"])
    state = (await api.gql(REVIEW, {"a": answers["photo 0"]}, customer))["assignmentReview"]
    assert state["status"] == "accepted" and await _lines(db, answers["photo 0"]) == 1


async def test_a_reviewer_never_reviews_their_own_work(api: Api, db: asyncpg.Connection) -> None:
    """An expert holding both skills answers; the review of that answer is not theirs to
    take (the eligibility rule), while another reviewer gets it."""
    customer = (await api.create_customer())["token"]
    await _project(api, customer, 1)
    both = await api.create_expert(["animals", "review:animals"], name="both")
    answers = await _answer_all(api, both["token"], "dog")
    assert len(answers) == 1
    assert await db.fetchval("SELECT count(*) FROM tasks WHERE kind = 'review'") == 1
    assert await _claim(api, both["token"]) is None
    other = await api.create_expert(["review:animals"], name="other")
    c = await _claim(api, other["token"])
    assert c is not None and c["task"]["reviewOf"] == {"answer": {"label": "dog"}}


async def test_no_review_tasks_without_expert_review(api: Api, db: asyncpg.Connection) -> None:
    customer = (await api.create_customer())["token"]
    await _project(api, customer, 2, expertReview=False)
    worker = await api.create_expert(["animals"], name="worker")
    await _answer_all(api, worker["token"], "dog")
    assert await db.fetchval("SELECT count(*) FROM tasks WHERE kind = 'review'") == 0
    # and expert review needs answers that wait for review
    try:
        await _project(api, customer, 1, paymentPolicy="on_submit")
    except GraphQLError as exc:
        assert exc.code == "BAD_INPUT" and "on_review" in exc.errors[0]["message"]
    else:
        raise AssertionError("expertReview under on_submit was accepted")


async def test_the_customer_overrides(api: Api, db: asyncpg.Connection) -> None:
    """The customer's mutations act on the answer. An open review task is canceled; a claimed
    one is taken back unpaid (the reviewer's submit is LEASE_EXPIRED); a submitted review stays
    paid when the customer overrides its verdict."""
    customer = (await api.create_customer())["token"]
    pid = await _project(api, customer, 3)
    worker = await api.create_expert(["animals"], name="worker")
    reviewer = await api.create_expert(["review:animals"], name="reviewer")
    answers = await _answer_all(api, worker["token"], "dog")

    # A submitted review (reject), overridden by the customer within the window.
    c = await _claim(api, reviewer["token"])
    assert c is not None
    first = c["assignmentId"]
    reviewed = answers[c["task"]["payload"]["text"]]
    await api.gql(SUBMIT, {"a": first, "x": {"verdict": "reject", "reason": "no"}},
                  reviewer["token"])  # fmt: skip
    back = (await api.gql(APPROVE, {"ids": [reviewed]}, customer))["approveAssignments"]
    assert back[0]["status"] == "accepted" and back[0]["changed"]
    assert await _lines(db, reviewed) == 1 and await _lines(db, first) == 1

    # A claimed review: the customer rejects the answer first; the claim is taken back.
    c = await _claim(api, reviewer["token"])
    assert c is not None
    held = c["assignmentId"]
    other = answers[c["task"]["payload"]["text"]]
    await api.gql(REJECT, {"ids": [other], "r": "wrong"}, customer)
    r = await api.rest(
        "POST", f"/v1/assignments/{held}/submit", reviewer["token"],
        json={"answer": {"verdict": "accept"}},
    )  # fmt: skip
    assert r.status_code == 409 and r.json()["error"]["code"] == "LEASE_EXPIRED", r.text
    assert await _lines(db, held) == 0
    state = (await api.gql(REVIEW, {"a": other}, customer))["assignmentReview"]
    assert state["status"] == "rejected" and state["reviewedBy"].startswith("customer:")

    # An open review: the customer approves the answer; the task is canceled, nobody gets it.
    last = next(a for a in answers.values() if a not in (reviewed, other))
    await api.gql(APPROVE, {"ids": [last]}, customer)
    assert await _claim(api, reviewer["token"]) is None
    kinds = await db.fetch(
        "SELECT status, count(*) FROM tasks WHERE project_id = $1 AND kind = 'review' GROUP BY 1",
        pid,
    )
    assert dict(kinds) == {"done": 1, "canceled": 2}
    assert await db.fetchval("SELECT status FROM projects WHERE id = $1", pid) == "completed"


async def test_a_review_racing_auto_approval_pays_once(
    api: Api, db: asyncpg.Connection, database_url: str
) -> None:
    """Reviewers' accepting submits race auto-approval passes on answers that are due: each
    answer ends with exactly one payment line, each review with one."""
    customer = (await api.create_customer())["token"]
    n = 6
    pid = await _project(api, customer, n)
    worker = await api.create_expert(["animals"], name="worker")
    answers = await _answer_all(api, worker["token"], "dog")
    reviewers = [await api.create_expert(["review:animals"], name=f"r{i}") for i in range(n)]
    claims = [await _claim(api, r["token"]) for r in reviewers]
    assert all(c is not None for c in claims)
    # every answer is now due for auto-approval
    await db.execute(
        "UPDATE assignments SET submitted_at = submitted_at - interval '4 days'"
        " WHERE project_id = $1 AND review_status = 'submitted'",
        pid,
    )
    pool = await create_pool(database_url, min_size=1, max_size=4)
    try:
        job = Database(pool, timeout=10)

        async def auto() -> None:
            for _ in range(3):
                await auto_approval.auto_approve_once(job)

        async def review(token: str, aid: str) -> None:
            r = await api.rest(
                "POST", f"/v1/assignments/{aid}/submit", token,
                json={"answer": {"verdict": "accept"}},
            )  # fmt: skip
            # it either won (stored and paid) or auto-approval took the claim back first
            assert r.status_code in (200, 409), r.text

        pairs = zip(reviewers, claims, strict=True)
        await asyncio.gather(
            auto(), auto(), *(review(r["token"], c["assignmentId"]) for r, c in pairs)
        )
    finally:
        await pool.close()
    for aid in answers.values():
        assert (
            await db.fetchval("SELECT review_status FROM assignments WHERE id = $1", aid)
            == "accepted"
        )
        assert await _lines(db, aid) == 1, aid
    for c in claims:
        assert c is not None
        status = await db.fetchval(
            "SELECT status FROM assignments WHERE id = $1", c["assignmentId"]
        )
        assert await _lines(db, c["assignmentId"]) == (1 if status == "submitted" else 0)
    dup = await db.fetchval(
        "SELECT count(*) FROM (SELECT assignment_id FROM payouts GROUP BY 1 HAVING count(*) > 1) d"
    )
    assert dup == 0
