"""Issue 20: payment policies, reviews, auto-approval, and the ledger that follows them.

Invariants checked in the database after each scenario: exactly one payment line per accepted
assignment, none for a rejected or undecided one (unless reversed), balances = ledger sums."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from taskroute.db.pool import Database, create_pool
from taskroute.resolvers import acceptance

from .helpers import ADMIN_TOKEN, Api, tasks_of

SUBMIT = """mutation($a: ID!, $x: JSON!) { submit(assignmentId: $a, answer: $x) {
  payCents payStatus } }"""
REVIEW = """query($a: ID!) { assignmentReview(assignmentId: $a) {
  status reason reviewedBy overrideUntil } }"""
APPROVE = """mutation($ids: [ID!]!) { approveAssignments(assignmentIds: $ids) {
  assignmentId status changed note } }"""
REJECT = """mutation($ids: [ID!]!, $r: String!) {
  rejectAssignments(assignmentIds: $ids, reason: $r) {
  assignmentId status changed note } }"""
BALANCE = """query { expertBalance { payments paidCents reversedCents balanceCents
  pending pendingCents } }"""
TOTALS = """query($p: ID!) { projectPayoutTotals(projectId: $p) { payments paidCents
  netCents pending pendingCents } }"""


async def _ledger_invariants(db: asyncpg.Connection, project_id: str) -> None:
    rows = await db.fetch(
        "SELECT a.id, a.review_status, "
        " (SELECT count(*) FROM payouts p WHERE p.assignment_id = a.id) AS lines,"
        " (SELECT count(*) FROM payouts p JOIN payouts r ON r.reverses_id = p.id"
        "  WHERE p.assignment_id = a.id) AS reversed"
        " FROM assignments a WHERE a.project_id = $1 AND a.status = 'submitted'",
        project_id,
    )
    for r in rows:
        if r["review_status"] == "accepted":
            assert r["lines"] == 1, dict(r)
        else:
            assert r["lines"] == r["reversed"], dict(r)


async def _work(api: Api, token: str, answer: Any) -> list[tuple[str, dict[str, Any]]]:
    done = []
    while (claim := await api.claim(token)) is not None:
        got = await api.gql(SUBMIT, {"a": claim["assignmentId"], "x": answer}, token)
        done.append((claim["assignmentId"], got["submit"]))
    return done


async def test_on_acceptance_pays_agreeing_answers_only(api: Api, db: asyncpg.Connection) -> None:
    customer = (await api.create_customer())["token"]
    pid = (
        await api.create_project(
            customer,
            tasks_of("grading", 2),
            payCents=10,
            redundancy=3,
            paymentPolicy="on_acceptance",
        )
    )["project"]["id"]
    experts = [await api.create_expert(["grading"], name=f"e{i}") for i in range(3)]
    # e0 and e1 agree, e2 disagrees: both items resolve by majority (2/3 >= 0.6)
    first = await _work(api, experts[0]["token"], {"g": 1})
    assert [s["payStatus"] for _, s in first] == ["pending_resolution"] * 2
    bal = (await api.gql(BALANCE, {}, experts[0]["token"]))["expertBalance"]
    assert (bal["payments"], bal["pending"], bal["pendingCents"]) == (0, 2, 20)
    assert await db.fetchval("SELECT count(*) FROM payouts WHERE project_id = $1", pid) == 0
    await _work(api, experts[1]["token"], {"g": 1})
    wrong = await _work(api, experts[2]["token"], {"g": 2})
    review = (await api.gql(REVIEW, {"a": wrong[0][0]}, experts[2]["token"]))["assignmentReview"]
    assert review["status"] == "rejected" and review["reviewedBy"] == "quality"
    ok = (await api.gql(REVIEW, {"a": first[0][0]}, customer))["assignmentReview"]
    assert ok["status"] == "accepted"
    for e, want in zip(experts, (20, 20, 0), strict=True):
        bal = (await api.gql(BALANCE, {}, e["token"]))["expertBalance"]
        assert bal["balanceCents"] == bal["paidCents"] == want and bal["pending"] == 0
    totals = (await api.gql(TOTALS, {"p": pid}, customer))["projectPayoutTotals"]
    assert (totals["payments"], totals["netCents"], totals["pending"]) == (4, 40, 0)
    await _ledger_invariants(db, pid)


async def test_on_review_racing_approvals_override_auto(
    api: Api, db: asyncpg.Connection, database_url: str
) -> None:
    customer = (await api.create_customer())["token"]
    pid = (
        await api.create_project(
            customer, tasks_of("grading", 6), payCents=7, paymentPolicy="on_review"
        )
    )["project"]["id"]
    expert = await api.create_expert(["grading"])
    done = await _work(api, expert["token"], {"g": 1})
    assert {s["payStatus"] for _, s in done} == {"pending_review"}
    ids = [a for a, _ in done]

    # Racing approvals of the same batch from many clients (GraphQL and REST mixed).
    async def gql() -> None:
        await api.gql(APPROVE, {"ids": ids[:3]}, customer)

    async def rest() -> None:
        r = await api.rest(
            "POST", "/v1/assignments/approve", customer, json={"assignment_ids": ids[:3]}
        )
        assert r.status_code == 200, r.text

    await asyncio.gather(*(gql() if i % 2 else rest() for i in range(12)))
    assert (
        await db.fetchval(
            "SELECT count(*) FROM payouts WHERE project_id = $1 AND kind = 'payment'", pid
        )
        == 3
    )
    # Reject one (REST needs a reason), then override within the window.
    r = await api.rest(
        "POST", "/v1/assignments/reject", customer, json={"assignment_ids": [ids[3]]}
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "BAD_INPUT"
    rej = (await api.gql(REJECT, {"ids": [ids[3], ids[0]], "r": "blurry"}, customer))[
        "rejectAssignments"
    ]
    by_id = {x["assignmentId"]: x for x in rej}
    assert by_id[ids[3]]["status"] == "rejected" and by_id[ids[3]]["changed"]
    assert by_id[ids[0]]["status"] == "accepted" and not by_id[ids[0]]["changed"]
    seen = await api.rest("GET", f"/v1/assignments/{ids[3]}/review", expert["token"])
    assert seen.json()["status"] == "rejected" and seen.json()["reason"] == "blurry"
    await _ledger_invariants(db, pid)
    back = (await api.gql(APPROVE, {"ids": [ids[3]]}, customer))["approveAssignments"]
    assert back[0]["status"] == "accepted" and back[0]["changed"]
    # A rejection past its window stays.
    await api.gql(REJECT, {"ids": [ids[4]], "r": "no"}, customer)
    await db.execute(
        "UPDATE assignments SET reviewed_at = now() - interval '31 days' WHERE id = $1", ids[4]
    )
    late = (await api.gql(APPROVE, {"ids": [ids[4]]}, customer))["approveAssignments"]
    assert late[0]["status"] == "rejected" and late[0]["note"] == "the override window has closed"
    # Auto-approval: move the last one's submit past the delay, run the job once.
    await db.execute(
        "UPDATE assignments SET submitted_at = now() - interval '4 days' WHERE id = $1", ids[5]
    )
    # One run of the job (the server's own job may get there first: either way, once).
    pool = await create_pool(database_url, min_size=1, max_size=2)
    try:
        assert await acceptance.auto_approve_once(Database(pool, timeout=10)) in (0, 1)
    finally:
        await pool.close()
    auto = (await api.gql(REVIEW, {"a": ids[5]}, expert["token"]))["assignmentReview"]
    assert auto["status"] == "accepted" and auto["reviewedBy"] == "auto"
    bal = (await api.gql(BALANCE, {}, expert["token"]))["expertBalance"]
    assert (bal["payments"], bal["paidCents"], bal["pending"]) == (5, 35, 0)
    await _ledger_invariants(db, pid)


CANCEL = "mutation($p: ID!) { cancelProject(id: $p) { status paymentPolicy } }"


async def test_cancel_still_decides_and_pays_on_acceptance(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = (await api.create_customer())["token"]
    # REST creation with the policy; a wrong policy is a clear 422.
    bad = await api.rest(
        "POST",
        "/v1/projects",
        customer,
        json={"name": "x", "tasks": tasks_of("grading", 1), "payment_policy": "later"},
    )
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "BAD_INPUT"
    r = await api.rest(
        "POST",
        "/v1/projects",
        customer,
        json={
            "name": "c",
            "tasks": tasks_of("grading", 2),
            "pay_cents": 5,
            "redundancy": 2,
            "payment_policy": "on_acceptance",
        },
    )
    assert r.status_code == 201, r.text
    pid = r.json()["project_id"]
    e0, e1 = [await api.create_expert(["grading"], name=f"e{i}") for i in range(2)]
    first = await _work(api, e0["token"], {"g": 1})
    assert len(first) == 2
    held = await api.claim(e1["token"])
    assert held is not None
    cancel = (await api.gql(CANCEL, {"p": pid}, customer))["cancelProject"]
    assert cancel == {"status": "canceled", "paymentPolicy": "on_acceptance"}
    # The item nobody holds a slot of can no longer resolve: e0's answer on it is paid now.
    states = dict(
        await db.fetch(
            "SELECT id::text, review_status FROM assignments WHERE project_id = $1"
            " AND expert_id = $2",
            pid,
            e0["id"],
        )
    )
    assert sorted(states.values()) == ["accepted", "submitted"]
    # The held claim is still submitted (a disagreeing answer: no adjudication on a canceled
    # project), and then its item's answers are decided: both paid.
    got = await api.gql(SUBMIT, {"a": held["assignmentId"], "x": {"g": 2}}, e1["token"])
    assert got["submit"]["payStatus"] == "pending_resolution"
    assert (
        await db.fetchval(
            "SELECT count(*) FROM assignments"
            " WHERE project_id = $1 AND review_status <> 'accepted'",
            pid,
        )
        == 0
    )
    totals = (await api.gql(TOTALS, {"p": pid}, customer))["projectPayoutTotals"]
    assert (totals["payments"], totals["netCents"], totals["pending"]) == (3, 15, 0)
    await _ledger_invariants(db, pid)


async def test_retraction_rejects_and_claws_back(api: Api, db: asyncpg.Connection) -> None:
    customer = (await api.create_customer())["token"]
    pid = (
        await api.create_project(
            customer,
            tasks_of("grading", 1),
            payCents=9,
            redundancy=2,
            paymentPolicy="on_acceptance",
        )
    )["project"]["id"]
    e0, e1 = [await api.create_expert(["grading"], name=f"e{i}") for i in range(2)]
    a0 = (await _work(api, e0["token"], {"g": 1}))[0][0]
    await _work(api, e1["token"], {"g": 1})
    assert (await api.gql(REVIEW, {"a": a0}, e0["token"]))["assignmentReview"]["status"] == (
        "accepted"
    )
    data = await api.gql(
        'mutation($e: ID!) { retractLabels(expertId: $e, reason: "spam", clawback: true) {'
        " reversals } }",
        {"e": e0["id"]},
        ADMIN_TOKEN,
    )
    assert data["retractLabels"]["reversals"] == 1
    review = (await api.gql(REVIEW, {"a": a0}, customer))["assignmentReview"]
    assert review["status"] == "rejected" and review["reviewedBy"] == "retraction"
    assert review["overrideUntil"] is None
    # A retraction's rejection is the admin's: a customer approval does not undo it.
    again = (await api.gql(APPROVE, {"ids": [a0]}, customer))["approveAssignments"]
    assert again[0]["status"] == "rejected" and not again[0]["changed"]
    bal = (await api.gql(BALANCE, {}, e0["token"]))["expertBalance"]
    assert (bal["paidCents"], bal["reversedCents"], bal["balanceCents"]) == (9, 9, 0)
    await _ledger_invariants(db, pid)
