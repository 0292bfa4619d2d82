"""Issue 20: payment policies, reviews, auto-approval, and the ledger that follows them.

Invariants checked in the database after each scenario: exactly one payment line per accepted
assignment, none for a rejected or undecided one (unless reversed), balances = ledger sums."""

from __future__ import annotations

import asyncio
import csv
import io
from typing import Any

import asyncpg

from taskroute.db.pool import Database, create_pool
from taskroute.resolvers.jobs import auto_approval as acceptance

from ..helpers import ADMIN_TOKEN, Api, tasks_of, wait_for

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

    # The server's pass may hold the job's lock with a snapshot from before the move: its
    # next pass decides it, so wait for the decision instead of reading it at once.
    async def decided() -> bool:
        review = await api.gql(REVIEW, {"a": ids[5]}, expert["token"])
        return bool(review["assignmentReview"]["status"] != "submitted")

    await wait_for(decided, "the auto-approval of the overdue answer")
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


POLICY = """mutation($p: ID!, $i: QualityPolicyInput!) {
  setQualityPolicy(projectId: $p, input: $i) { goldRatio } }"""
REVIEWS = """query($p: ID!) { assignmentReviews(projectId: $p, first: 100) {
  edges { node { assignmentId status } } } }"""


async def _balances_add_up(api: Api, db: asyncpg.Connection, experts: list[dict]) -> None:
    """Every expert's balance is the sum of their ledger lines; pending is their undecided work."""
    for e in experts:
        bal = (await api.gql(BALANCE, {}, e["token"]))["expertBalance"]
        paid, reversed_, pending = await db.fetchrow(
            "SELECT coalesce(sum(amount_cents) FILTER (WHERE kind = 'payment'), 0),"
            " coalesce(-sum(amount_cents) FILTER (WHERE kind = 'reversal'), 0),"
            " (SELECT count(*) FROM assignments WHERE expert_id = $1"
            "  AND review_status = 'submitted')"
            " FROM payouts WHERE expert_id = $1",
            e["id"],
        )
        assert (bal["paidCents"], bal["reversedCents"], bal["pending"]) == (
            paid,
            abs(reversed_),
            pending,
        ), e["id"]
        assert bal["balanceCents"] == paid - abs(reversed_)


async def test_on_acceptance_gold_is_decided_on_real_works_schedule(
    api: Api, db: asyncpg.Connection
) -> None:
    """Real work is decided when its item resolves, which at redundancy 2 is when the second
    expert answers. A gold answer is decided by its correctness on that same schedule: with a
    real answer another expert submitted just before it (its twin), never at its own submit
    unless that twin was decided already. (Decided at submit, as before, the review told the
    expert which tasks were gold.) Same review wording as real work; a correct one is paid
    once, a wrong one never; the customer never sees gold among the reviews."""
    customer = (await api.create_customer())["token"]
    gold = [{"skill": "grading", "payload": {"gold": i}, "gold": {"g": 1}} for i in range(2)]
    pid = (
        await api.create_project(
            customer,
            tasks_of("grading", 2) + gold,
            payCents=10,
            redundancy=2,
            paymentPolicy="on_acceptance",
        )
    )["project"]["id"]
    await api.gql(POLICY, {"p": pid, "i": {"goldRatio": 1.0, "explorationGoldRatio": 1.0}},
                  customer)  # fmt: skip
    e0, e1 = [await api.create_expert(["grading"], name=f"e{i}") for i in range(2)]

    async def status(assignment: str, token: str) -> tuple[str, str | None, str | None]:
        r = (await api.gql(REVIEW, {"a": assignment}, token))["assignmentReview"]
        return r["status"], r["reviewedBy"], r["reason"]

    async def serve(expert: dict[str, Any], gold_answers: list[dict[str, int]]) -> list[tuple]:
        """Claims until empty (gold first: goldRatio 1.0); each submit's review right after."""
        served = []
        answers = iter(gold_answers)
        while (claim := await api.claim(expert["token"])) is not None:
            is_gold = "gold" in claim["task"]["payload"]
            answer = next(answers) if is_gold else {"g": 1}
            a = claim["assignmentId"]
            got = await api.gql(SUBMIT, {"a": a, "x": answer}, expert["token"])
            served.append(("gold" if is_gold else "real", a, got["submit"]["payStatus"],
                           await status(a, expert["token"])))  # fmt: skip
        return served

    # e1 goes first: two gold answers, then both items, which wait for a second answer.
    first = await serve(e1, [{"g": 1}, {"g": 1}])
    assert [k for k, *_ in first] == ["gold", "gold", "real", "real"]
    # The receipt and the review right after submit: the same for gold and real work.
    assert {(pay, st) for _, _, pay, st in first} == {
        ("pending_resolution", ("submitted", None, None))
    }
    # e0: one gold answer right, one wrong, each twinned with e1's last real answer (item 1,
    # still undecided), then both items: item 0 resolves at e0's answer, item 1 at the next.
    second = await serve(e0, [{"g": 1}, {"g": 2}])
    assert [k for k, *_ in second] == ["gold", "gold", "real", "real"]
    right, wrong, real0, real1 = (a for _, a, *_ in second)
    assert [st for *_, st in second[:2]] == [("submitted", None, None)] * 2
    # e0's last answer decides item 1: e1's answer there, e0's, and e0's two gold answers in
    # that same transaction (so at the same instant as e0's real answer, like real work).
    assert second[2][3] == second[3][3] == (
        "accepted", "quality", "agrees with the resolved answer"
    )  # fmt: skip
    assert await status(right, e0["token"]) == (
        "accepted", "quality", "agrees with the resolved answer"
    )  # fmt: skip
    assert await status(wrong, e0["token"]) == (
        "rejected", "quality", "disagrees with the resolved answer"
    )  # fmt: skip
    at = dict(await db.fetch(
        "SELECT id::text, reviewed_at FROM assignments WHERE id = ANY($1::uuid[])",
        [right, wrong, real1, first[3][1]],
    ))  # fmt: skip
    assert len(set(at.values())) == 1, at
    # e1's gold answers had no twin (nobody else had submitted real work): the auto-approval
    # job links the next real answer another expert submitted (e0's) and decides them with it.
    for _, a, *_ in first[:2]:
        await wait_for(
            lambda a=a: _decided(db, a),
            "e1's gold answers decided with their twin",
        )
        assert await status(a, e1["token"]) == (
            "accepted", "quality", "agrees with the resolved answer"
        )  # fmt: skip
    assert await db.fetchval(
        "SELECT count(*) FROM gold_exposures x JOIN assignments a ON a.id = x.assignment_id"
        " WHERE a.project_id = $1 AND x.pending", pid
    ) == 0  # fmt: skip

    lines = dict(await db.fetch(
        "SELECT a.id::text, count(p.id) FROM assignments a"
        " LEFT JOIN payouts p ON p.assignment_id = a.id WHERE a.expert_id = $1 GROUP BY a.id",
        e0["id"],
    ))  # fmt: skip
    assert lines == {right: 1, wrong: 0, real0: 1, real1: 1}
    r = await api.rest("GET", f"/v1/assignments/{wrong}/review", e0["token"])
    assert r.status_code == 200 and r.json()["status"] == "rejected", r.text
    bal = (await api.gql(BALANCE, {}, e0["token"]))["expertBalance"]
    assert (bal["paidCents"], bal["pending"]) == (30, 0)
    r = await api.rest("GET", f"/v1/payouts.csv?expert_id={e0['id']}", e0["token"])
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert sorted((x["kind"], x["assignment_id"]) for x in rows) == sorted(
        ("payment", a) for a in (right, real0, real1)
    )

    # The customer sees the real work only, and cannot decide gold.
    listed = (await api.gql(REVIEWS, {"p": pid}, customer))["assignmentReviews"]["edges"]
    assert sorted(n["node"]["assignmentId"] for n in listed) == sorted(
        [real0, real1, first[2][1], first[3][1]]
    )
    body = await api.gql_raw(APPROVE, {"ids": [wrong]}, customer)
    assert body["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    r = await api.rest(
        "POST", "/v1/assignments/approve", customer, json={"assignment_ids": [wrong]}
    )
    assert r.status_code == 404, r.text
    totals = (await api.gql(TOTALS, {"p": pid}, customer))["projectPayoutTotals"]
    ledger = await db.fetchval("SELECT sum(amount_cents) FROM payouts WHERE project_id = $1", pid)
    assert (totals["payments"], totals["netCents"], totals["pending"]) == (7, 70, 0)
    assert totals["netCents"] == ledger
    await _balances_add_up(api, db, [e0, e1])
    await _ledger_invariants(db, pid)


async def _decided(db: asyncpg.Connection, assignment: str) -> bool:
    status = await db.fetchval("SELECT review_status FROM assignments WHERE id = $1", assignment)
    return status != "submitted"


async def _adjudicated(
    api: Api, db: asyncpg.Connection, pay_disagreements: bool
) -> tuple[str, str, dict[str, Any], list[dict[str, str]]]:
    """Two experts disagree on one item (1/2 < 0.6): an adjudicator decides it."""
    customer = (await api.create_customer())["token"]
    pid = (
        await api.create_project(
            customer,
            tasks_of("grading", 1),
            payCents=8,
            redundancy=2,
            paymentPolicy="on_acceptance",
            payAdjudicatedDisagreements=pay_disagreements,
        )
    )["project"]["id"]
    e0, e1, judge = [await api.create_expert(["grading"], name=n) for n in ("e0", "e1", "j")]
    ids = {}
    for e, answer in ((e0, {"g": 1}), (e1, {"g": 2})):
        [(aid, receipt)] = await _work(api, e["token"], answer)
        assert receipt["payStatus"] == "pending_resolution"
        ids[e["id"]] = aid
    # Adjudication is open, the item unresolved: nothing decided, nothing paid.
    assert await db.fetchval(
        "SELECT count(*) FROM tasks WHERE project_id = $1 AND kind = 'adjudication'"
        " AND status = 'open'", pid,
    ) == 1  # fmt: skip
    assert await db.fetchval("SELECT count(*) FROM payouts WHERE project_id = $1", pid) == 0
    for e in (e0, e1):
        bal = (await api.gql(BALANCE, {}, e["token"]))["expertBalance"]
        assert (bal["paidCents"], bal["pending"], bal["pendingCents"]) == (0, 1, 8)
    [(adj, receipt)] = await _work(api, judge["token"], {"g": 1})
    assert receipt["payStatus"] == "pending_resolution"
    ids[judge["id"]] = adj
    return customer, pid, ids, [e0, e1, judge]


async def test_on_acceptance_adjudication_pays_the_judge_and_the_policy_decides_the_rest(
    api: Api, db: asyncpg.Connection
) -> None:
    customer, pid, ids, (e0, e1, judge) = await _adjudicated(api, db, True)
    # The judge's answer resolved the item: the judge and the agreeing answer are accepted;
    # the disagreeing one is paid too (payAdjudicatedDisagreements, the default), saying why.
    got = {
        e["id"]: (await api.gql(REVIEW, {"a": ids[e["id"]]}, customer))["assignmentReview"]
        for e in (e0, e1, judge)
    }
    assert {k: (v["status"], v["reviewedBy"]) for k, v in got.items()} == {
        e0["id"]: ("accepted", "quality"),
        e1["id"]: ("accepted", "quality"),
        judge["id"]: ("accepted", "quality"),
    }
    assert "adjudicated" in got[e1["id"]]["reason"]
    totals = (await api.gql(TOTALS, {"p": pid}, customer))["projectPayoutTotals"]
    assert (totals["payments"], totals["netCents"], totals["pending"]) == (3, 24, 0)
    await _balances_add_up(api, db, [e0, e1, judge])
    await _ledger_invariants(db, pid)
    # A second customer decision changes nothing: accepted work stays accepted, paid once.
    again = await api.gql(REJECT, {"ids": list(ids.values()), "r": "no"}, customer)
    assert all(not a["changed"] for a in again["rejectAssignments"])
    assert await db.fetchval("SELECT count(*) FROM payouts WHERE project_id = $1", pid) == 3


async def test_on_acceptance_adjudication_without_paying_disagreements(
    api: Api, db: asyncpg.Connection
) -> None:
    customer, pid, ids, (e0, e1, judge) = await _adjudicated(api, db, False)
    status = {
        e["id"]: (await api.gql(REVIEW, {"a": ids[e["id"]]}, e["token"]))["assignmentReview"][
            "status"
        ]
        for e in (e0, e1, judge)
    }
    assert status == {e0["id"]: "accepted", e1["id"]: "rejected", judge["id"]: "accepted"}
    bal = (await api.gql(BALANCE, {}, e1["token"]))["expertBalance"]
    assert (bal["paidCents"], bal["pending"]) == (0, 0)
    totals = (await api.gql(TOTALS, {"p": pid}, customer))["projectPayoutTotals"]
    assert (totals["payments"], totals["netCents"], totals["pending"]) == (2, 16, 0)
    # The customer may still overturn the quality rule's rejection (the override window).
    turned = (await api.gql(APPROVE, {"ids": [ids[e1["id"]]]}, customer))["approveAssignments"]
    assert turned[0]["status"] == "accepted" and turned[0]["changed"]
    await _balances_add_up(api, db, [e0, e1, judge])
    await _ledger_invariants(db, pid)


async def test_rest_project_shows_the_payment_policy(api: Api) -> None:
    customer = (await api.create_customer())["token"]
    r = await api.rest(
        "POST",
        "/v1/projects",
        customer,
        json={
            "name": "p",
            "tasks": tasks_of("grading", 1),
            "pay_cents": 12,
            "payment_policy": "on_review",
            "auto_approve_seconds": 60,
            "override_seconds": 120,
            "pay_adjudicated_disagreements": False,
        },
    )
    assert r.status_code == 201, r.text
    shown = (await api.rest("GET", r.json()["status_url"], customer)).json()
    assert {
        k: shown[k]
        for k in (
            "pay_cents",
            "payment_policy",
            "auto_approve_seconds",
            "override_seconds",
            "pay_adjudicated_disagreements",
        )
    } == {
        "pay_cents": 12,
        "payment_policy": "on_review",
        "auto_approve_seconds": 60,
        "override_seconds": 120,
        "pay_adjudicated_disagreements": False,
    }
    default = await api.rest(
        "POST", "/v1/projects", customer, json={"name": "d", "tasks": tasks_of("grading", 1)}
    )
    shown = (await api.rest("GET", default.json()["status_url"], customer)).json()
    assert (shown["payment_policy"], shown["auto_approve_seconds"]) == ("on_submit", 259200)


async def test_on_review_cancel_then_auto_approval_races_reviews(
    api: Api, db: asyncpg.Connection, database_url: str
) -> None:
    """Cancel keeps its promise under on_review: submitted work of the canceled project is
    still reviewed or auto-approved. Auto-approval (delay 0: due at once, the server's job
    runs every 0.2 s, plus our own runs) races the customer's approvals and rejections:
    each assignment ends decided once, with one payment line if accepted and none if not."""
    customer = (await api.create_customer())["token"]
    pid = (
        await api.create_project(
            customer,
            tasks_of("grading", 12),
            payCents=6,
            paymentPolicy="on_review",
            autoApproveSeconds=0,
        )
    )["project"]["id"]
    expert = await api.create_expert(["grading"])
    held = None
    done = []
    for _ in range(11):
        claim = await api.claim(expert["token"])
        assert claim is not None
        got = await api.gql(SUBMIT, {"a": claim["assignmentId"], "x": {"g": 1}}, expert["token"])
        assert got["submit"]["payStatus"] == "pending_review"
        done.append(claim["assignmentId"])
    held = await api.claim(expert["token"])
    assert held is not None
    assert (await api.gql(CANCEL, {"p": pid}, customer))["cancelProject"]["status"] == "canceled"
    # The claim held across the cancel may still be submitted, and is reviewed like the rest.
    got = await api.gql(SUBMIT, {"a": held["assignmentId"], "x": {"g": 1}}, expert["token"])
    assert got["submit"]["payStatus"] == "pending_review"
    done.append(held["assignmentId"])

    pool = await create_pool(database_url, min_size=1, max_size=4)
    try:
        job = Database(pool, timeout=10)

        async def auto() -> None:
            for _ in range(5):
                await acceptance.auto_approve_once(job)

        await asyncio.gather(
            api.gql(REJECT, {"ids": done[:4], "r": "late"}, customer),
            api.gql(APPROVE, {"ids": done[4:8]}, customer),
            api.rest("POST", "/v1/assignments/approve", customer,
                     json={"assignment_ids": done[4:8]}),
            auto(),
            auto(),
        )  # fmt: skip
        await acceptance.auto_approve_once(job)  # whatever the reviews left is due
    finally:
        await pool.close()
    states = dict(
        await db.fetch("SELECT id::text, review_status FROM assignments WHERE project_id = $1", pid)
    )
    assert set(states) == set(done)
    assert "submitted" not in states.values(), "nothing is left undecided after a cancel"
    # Approved ones and the auto-approved rest are paid once; a rejection that won its race
    # is not (it lost to auto-approval otherwise: accepted work stays accepted).
    for aid in done[4:]:
        assert states[aid] == "accepted", aid
    lines = dict(
        await db.fetch(
            "SELECT assignment_id::text, count(*) FROM payouts WHERE project_id = $1"
            " GROUP BY assignment_id",
            pid,
        )
    )
    for aid, status in states.items():
        assert lines.get(aid, 0) == (1 if status == "accepted" else 0), (aid, status)
    bal = (await api.gql(BALANCE, {}, expert["token"]))["expertBalance"]
    accepted = sum(1 for s in states.values() if s == "accepted")
    assert (bal["payments"], bal["paidCents"], bal["pending"]) == (accepted, 6 * accepted, 0)
    totals = (await api.gql(TOTALS, {"p": pid}, customer))["projectPayoutTotals"]
    assert (totals["payments"], totals["netCents"], totals["pending"]) == (
        accepted,
        6 * accepted,
        0,
    )
    await _balances_add_up(api, db, [expert])
    await _ledger_invariants(db, pid)
