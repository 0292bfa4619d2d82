"""The payout ledger: sums equal receipts, reversal lines, cancel pays submitted work only."""

from __future__ import annotations

import asyncio
import csv
import io
from typing import Any

import asyncpg
import pytest

from ..helpers import ADMIN_TOKEN, Api, GraphQLError, tasks_of, wait_for

PAYOUTS = """query($e: ID, $p: ID, $a: String, $f: Int!) {
  payouts(expertId: $e, projectId: $p, after: $a, first: $f) {
    edges { cursor node { id seq kind amountCents expertId projectId assignmentId reversesId
                          reversedById reason } }
    pageInfo { hasNextPage endCursor }
  }
}"""
BALANCE = """query($e: ID, $p: ID) { expertBalance(expertId: $e, projectId: $p) {
  expertId payments reversals paidCents reversedCents balanceCents } }"""
TOTALS = """query($p: ID!) { projectPayoutTotals(projectId: $p) {
  payments reversals paidCents reversedCents netCents
  byExpert { expertId payments paidCents reversedCents balanceCents } } }"""
REVERSE = """mutation($id: ID!, $r: String!) { reverse(payoutId: $id, reason: $r) {
  id kind amountCents reversesId reason expertId projectId } }"""


async def _all_payouts(api: Api, token: str, **scope: str) -> list[dict[str, Any]]:
    """Walks the connection 4 lines at a time."""
    lines: list[dict[str, Any]] = []
    after = None
    while True:
        data = await api.gql(
            PAYOUTS, {"e": scope.get("e"), "p": scope.get("p"), "a": after, "f": 4}, token
        )
        conn = data["payouts"]
        lines += [e["node"] for e in conn["edges"]]
        if not conn["pageInfo"]["hasNextPage"]:
            return lines
        after = conn["pageInfo"]["endCursor"]


async def _next_claim(api: Api, token: str, customer: str, pid: str) -> dict[str, Any] | None:
    """The expert's next claim, or None once no slot of the project is open. An empty claim
    alone does not say that: a claim skips the rows other experts' claims hold locked at that
    instant (SKIP LOCKED), and a slot of an item this expert answered waits for another one."""

    async def claimed_or_finished() -> dict[str, Any] | str | None:
        claim = await api.claim(token)
        if claim is not None:
            return claim
        return "finished" if (await api.progress(customer, pid))["open"] == 0 else None

    got = await wait_for(claimed_or_finished, "a claim or no open slot")
    return got if isinstance(got, dict) else None


async def _work(
    api: Api, token: str, receipts: list[dict[str, Any]], customer: str, pid: str
) -> None:
    """Claim and submit until nothing is left; submit some twice (same receipt back).

    Everyone gives the same answer, so redundant answers agree and no adjudication task (extra,
    paid work) is created: the test is about the ledger, not about quality.
    """
    n = 0
    while (claim := await _next_claim(api, token, customer, pid)) is not None:
        receipt = await api.submit(token, claim["assignmentId"], {"grade": 1})
        if n % 2 == 0:
            again = await api.submit(token, claim["assignmentId"], {"grade": 1})
            assert again == receipt
        receipts.append(receipt)
        n += 1


async def test_ledger_sums_equal_receipts(api: Api, db: asyncpg.Connection) -> None:
    customer = (await api.create_customer())["token"]
    pid = (await api.create_project(customer, tasks_of("grading", 7), payCents=25, redundancy=2))[
        "project"
    ]["id"]
    experts = [await api.create_expert(["grading"], name=f"e{i}") for i in range(3)]
    receipts: dict[str, list[dict[str, Any]]] = {e["id"]: [] for e in experts}
    await asyncio.gather(
        *(_work(api, e["token"], receipts[e["id"]], customer, pid) for e in experts)
    )
    assert sum(len(r) for r in receipts.values()) == 14

    for e in experts:
        mine = receipts[e["id"]]
        bal = (await api.gql(BALANCE, {}, e["token"]))["expertBalance"]
        assert bal["payments"] == len(mine)
        assert bal["balanceCents"] == bal["paidCents"] == sum(r["payCents"] for r in mine)
        admin_view = (await api.gql(BALANCE, {"e": e["id"]}, ADMIN_TOKEN))["expertBalance"]
        assert admin_view == bal
        # An expert's own listing has exactly their receipts' assignments.
        lines = await _all_payouts(api, e["token"])
        assert sorted(x["assignmentId"] for x in lines) == sorted(r["assignmentId"] for r in mine)

    totals = (await api.gql(TOTALS, {"p": pid}, customer))["projectPayoutTotals"]
    assert totals["payments"] == 14 and totals["paidCents"] == totals["netCents"] == 14 * 25
    assert sum(b["balanceCents"] for b in totals["byExpert"]) == totals["netCents"]

    lines = await _all_payouts(api, customer, p=pid)
    assert len({x["id"] for x in lines}) == len(lines) == 14
    assert [x["seq"] for x in lines] == sorted(x["seq"] for x in lines)
    # The database agrees: one line per submitted assignment, each at the receipt's amount.
    row = await db.fetchrow(
        "SELECT count(*) AS n, sum(a.pay_cents) AS paid, sum(p.amount_cents) AS ledger"
        " FROM assignments a JOIN payouts p ON p.assignment_id = a.id"
        " WHERE a.project_id = $1 AND a.status = 'submitted'",
        pid,
    )
    assert row["n"] == 14 and row["paid"] == row["ledger"] == 14 * 25
    assert await db.fetchval("SELECT count(*) FROM payouts") == 14

    # CSV export: the same lines, the same sum.
    r = await api.rest("GET", f"/v1/payouts.csv?project_id={pid}", customer)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert len(rows) == 14 and sum(int(x["amount_cents"]) for x in rows) == 14 * 25
    assert {x["id"] for x in rows} == {x["id"] for x in lines}


async def test_ledger_visibility(api: Api) -> None:
    customer = (await api.create_customer())["token"]
    stranger = (await api.create_customer("globex"))["token"]
    expert = await api.create_expert(["grading"])
    other = await api.create_expert(["grading"], name="other")
    pid = (await api.create_project(customer, tasks_of("grading", 1), payCents=5))["project"]["id"]
    claim = await api.claim(expert["token"])
    assert claim is not None
    await api.submit(expert["token"], claim["assignmentId"], {"x": 1})

    for token, variables in (
        (stranger, {"p": pid}),  # another customer's project
        (other["token"], {"e": expert["id"]}),  # another expert's lines
    ):
        with pytest.raises(GraphQLError) as err:
            await api.gql(PAYOUTS, {**variables, "f": 10}, token)
        assert err.value.code == "NOT_FOUND"
    with pytest.raises(GraphQLError) as err:
        await api.gql(PAYOUTS, {"f": 10, "a": "garbage"}, ADMIN_TOKEN)
    assert err.value.code == "BAD_INPUT"
    with pytest.raises(GraphQLError) as err:
        await api.gql(PAYOUTS, {"p": pid, "f": 10, "a": "garbage"}, customer)
    assert err.value.code == "BAD_INPUT"
    with pytest.raises(GraphQLError) as err:
        await api.gql(PAYOUTS, {"p": pid, "f": 0}, customer)
    assert err.value.code == "BAD_INPUT"
    assert len(await _all_payouts(api, other["token"])) == 0

    r = await api.rest("GET", f"/v1/payouts.csv?project_id={pid}", stranger)
    assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"
    r = await api.rest("GET", f"/v1/payouts.csv?project_id={pid}")
    assert r.status_code == 401
    r = await api.rest("GET", "/v1/payouts.csv?bogus=1", ADMIN_TOKEN)
    assert r.status_code == 422 and r.json()["error"]["code"] == "BAD_INPUT"
    r = await api.rest("GET", "/v1/payouts.csv", expert["token"])
    assert r.status_code == 200 and len(list(csv.DictReader(io.StringIO(r.text)))) == 1


async def test_reversal_lines(api: Api, db: asyncpg.Connection) -> None:
    customer = (await api.create_customer())["token"]
    pid = (await api.create_project(customer, tasks_of("grading", 3), payCents=40))["project"]["id"]
    expert = await api.create_expert(["grading"])
    for _ in range(3):
        claim = await api.claim(expert["token"])
        assert claim is not None
        await api.submit(expert["token"], claim["assignmentId"], {"ok": True})
    lines = await _all_payouts(api, ADMIN_TOKEN, p=pid)
    first, second = lines[0], lines[1]

    # Bad inputs write nothing.
    for variables, code in (
        ({"id": first["id"], "r": "  "}, "BAD_INPUT"),
        ({"id": "00000000-0000-0000-0000-000000000000", "r": "x"}, "NOT_FOUND"),
        ({"id": "nope", "r": "x"}, "NOT_FOUND"),
    ):
        with pytest.raises(GraphQLError) as err:
            await api.gql(REVERSE, variables, ADMIN_TOKEN)
        assert err.value.code == code
    for token in (customer, expert["token"]):
        with pytest.raises(GraphQLError) as err:
            await api.gql(REVERSE, {"id": first["id"], "r": "mine"}, token)
        assert err.value.code == "NOT_FOUND"
    assert await db.fetchval("SELECT count(*) FROM payouts") == 3

    rev = (await api.gql(REVERSE, {"id": first["id"], "r": "=HYPERLINK(dup)"}, ADMIN_TOKEN))[
        "reverse"
    ]
    assert rev["kind"] == "reversal" and rev["amountCents"] == -40
    assert rev["reversesId"] == first["id"] and rev["expertId"] == expert["id"]

    # Reversing twice is refused; so is reversing a reversal line.
    with pytest.raises(GraphQLError) as err:
        await api.gql(REVERSE, {"id": first["id"], "r": "again"}, ADMIN_TOKEN)
    assert err.value.code == "ALREADY_REVERSED"
    with pytest.raises(GraphQLError) as err:
        await api.gql(REVERSE, {"id": rev["id"], "r": "undo"}, ADMIN_TOKEN)
    assert err.value.code == "BAD_INPUT"
    # Two admins racing on the same payment: exactly one reversal line.
    raced = await asyncio.gather(
        *(api.gql_raw(REVERSE, {"id": second["id"], "r": f"race {i}"}, ADMIN_TOKEN) for i in (1, 2))
    )
    codes = sorted(
        (b["errors"][0]["extensions"]["code"] if b.get("errors") else "OK") for b in raced
    )
    assert codes == ["ALREADY_REVERSED", "OK"]

    bal = (await api.gql(BALANCE, {"e": expert["id"]}, ADMIN_TOKEN))["expertBalance"]
    assert bal == {
        "expertId": expert["id"],
        "payments": 3,
        "reversals": 2,
        "paidCents": 120,
        "reversedCents": 80,
        "balanceCents": 40,
    }
    totals = (await api.gql(TOTALS, {"p": pid}, customer))["projectPayoutTotals"]
    assert totals["netCents"] == 40 and totals["reversals"] == 2
    listed = await _all_payouts(api, customer, p=pid)
    assert [x["kind"] for x in listed] == ["payment", "payment", "payment", "reversal", "reversal"]
    assert listed[0]["reversedById"] == rev["id"] and listed[2]["reversedById"] is None
    # The ledger itself never changed: the original payment lines are intact.
    amounts = await db.fetch("SELECT amount_cents FROM payouts WHERE kind = 'payment'")
    assert [a["amount_cents"] for a in amounts] == [40, 40, 40]
    with pytest.raises(asyncpg.RaiseError):
        await db.execute("UPDATE payouts SET amount_cents = 0")

    # CSV: a formula-looking reason is made inert.
    r = await api.rest("GET", f"/v1/payouts.csv?project_id={pid}", customer)
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert sum(int(x["amount_cents"]) for x in rows) == 40
    assert "'=HYPERLINK(dup)" in [x["reason"] for x in rows]


async def test_cancel_pays_submitted_only(api: Api, db: asyncpg.Connection) -> None:
    customer = (await api.create_customer())["token"]
    pid = (await api.create_project(customer, tasks_of("grading", 6), payCents=10))["project"]["id"]
    done, in_flight, lapsed, late = [
        await api.create_expert(["grading"], name=n) for n in ("done", "flight", "lapsed", "late")
    ]
    c1 = await api.claim(done["token"])
    assert c1 is not None
    await api.submit(done["token"], c1["assignmentId"], {"a": 1})
    c2 = await api.claim(in_flight["token"])
    c3 = await api.claim(lapsed["token"])
    assert c2 is not None and c3 is not None

    await api.gql("mutation($p: ID!) { cancelProject(id: $p) { status } }", {"p": pid}, customer)
    assert await api.claim(late["token"]) is None  # nothing new to claim
    # In-flight work submitted within its lease is paid ...
    await api.submit(in_flight["token"], c2["assignmentId"], {"a": 2})
    # ... a lease that lapsed is not (expire it in the database rather than wait for it).
    await db.execute(
        "UPDATE tasks SET lease_until = now() - interval '1 second' WHERE assignment_id = $1",
        c3["assignmentId"],
    )
    await db.execute(
        "UPDATE assignments SET lease_until = now() - interval '1 second' WHERE id = $1",
        c3["assignmentId"],
    )
    with pytest.raises(GraphQLError) as err:
        await api.submit(lapsed["token"], c3["assignmentId"], {"a": 3})
    assert err.value.code == "LEASE_EXPIRED"

    totals = (await api.gql(TOTALS, {"p": pid}, customer))["projectPayoutTotals"]
    assert totals["payments"] == 2 and totals["netCents"] == 20
    assert {b["expertId"] for b in totals["byExpert"]} == {done["id"], in_flight["id"]}
    submitted = await db.fetchval(
        "SELECT count(*) FROM assignments WHERE project_id = $1 AND status = 'submitted'", pid
    )
    unpaid_submitted = await db.fetchval(
        "SELECT count(*) FROM assignments a WHERE a.project_id = $1 AND a.status = 'submitted'"
        " AND NOT EXISTS (SELECT 1 FROM payouts p WHERE p.assignment_id = a.id)",
        pid,
    )
    paid_unsubmitted = await db.fetchval(
        "SELECT count(*) FROM payouts p JOIN assignments a ON a.id = p.assignment_id"
        " WHERE p.project_id = $1 AND a.status <> 'submitted'",
        pid,
    )
    assert (submitted, unpaid_submitted, paid_unsubmitted) == (2, 0, 0)
    progress = await api.progress(customer, pid)
    assert progress["done"] == 2 and progress["open"] == 0
