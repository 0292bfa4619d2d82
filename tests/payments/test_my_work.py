"""An expert's own work and earnings (`me { expert { work earnings } }`): each answer with
its pay state and rejection reason, the totals, the bonus lines; only ever their own."""

from __future__ import annotations

from typing import Any

from ..helpers import ADMIN_TOKEN, Api, GraphQLError, tasks_of

WORK = (
    "query($s: WorkStatus, $a: String, $f: Int!) { me { expert { work(status: $s, after: $a,"
    " first: $f) { edges { cursor node { assignmentId projectId submittedAt payState payCents"
    " paidCents rejectionReason autoApprovalAt instructionsVersion } }"
    " pageInfo { hasNextPage endCursor } } } } }"
)
EARNINGS = (
    "{ me { expert { earnings { paidCents pendingCents rejectedCents bonusCents"
    " nextAutoApprovalAt bonuses { amountCents reason projectId } } } } }"
)


async def work(api: Api, token: str, status: str | None = None, first: int = 20,
               after: str | None = None) -> dict[str, Any]:  # fmt: skip
    data = await api.gql(WORK, {"s": status, "a": after, "f": first}, token)
    return data["me"]["expert"]["work"]


async def answer_all(api: Api, token: str, n: int) -> list[str]:
    done = []
    for i in range(n):
        claim = await api.claim(token)
        assert claim is not None
        await api.submit(token, claim["assignmentId"], {"grade": i})
        done.append(claim["assignmentId"])
    return done


async def test_my_work_shows_pay_states_rejection_reasons_totals_and_bonuses(api: Api) -> None:
    customer = await api.create_customer()
    ada = await api.create_expert(["grading"], "ada")
    bob = await api.create_expert(["grading"], "bob")
    reviewed = await api.create_project(
        customer["token"], tasks_of("grading", 3), name="reviewed", payCents=10,
        paymentPolicy="on_review",
    )  # fmt: skip
    a1, a2, a3 = await answer_all(api, ada["token"], 3)
    await api.gql(
        'mutation($a: [ID!]!) { rejectAssignments(assignmentIds: $a, reason: "off topic")'
        " { reviewedAt } }",
        {"a": [a1]},
        customer["token"],
    )
    await api.gql(
        "mutation($a: [ID!]!) { approveAssignments(assignmentIds: $a) { reviewedAt } }",
        {"a": [a2]},
        customer["token"],
    )
    paid_at_submit = await api.create_project(
        customer["token"], tasks_of("grading", 1), name="instant", payCents=7
    )
    (a4,) = await answer_all(api, ada["token"], 1)
    await api.create_project(customer["token"], tasks_of("grading", 1), name="bob's", payCents=5)
    await answer_all(api, bob["token"], 1)
    await api.gql(
        "mutation($p: ID!, $e: ID!) { grantBonus(projectId: $p, expertId: $e, amountCents: 50,"
        ' reason: "great work", idempotencyKey: "k1") { id } }',
        {"p": reviewed["project"]["id"], "e": ada["id"]},
        customer["token"],
    )

    page = await work(api, ada["token"])
    nodes = [e["node"] for e in page["edges"]]
    assert [n["assignmentId"] for n in nodes] == [a4, a3, a2, a1]  # newest first, only hers
    states = {n["assignmentId"]: n for n in nodes}
    assert states[a1]["payState"] == "rejected" and states[a1]["rejectionReason"] == "off topic"
    assert states[a1]["paidCents"] == 0
    assert states[a2]["payState"] == "paid" and states[a2]["paidCents"] == 10
    assert states[a3]["payState"] == "pending" and states[a3]["autoApprovalAt"] is not None
    assert states[a4]["payState"] == "paid" and states[a4]["paidCents"] == 7
    assert states[a4]["projectId"] == paid_at_submit["project"]["id"]
    assert all(n["rejectionReason"] is None for n in nodes if n["assignmentId"] != a1)

    earnings = (await api.gql(EARNINGS, token=ada["token"]))["me"]["expert"]["earnings"]
    assert earnings["paidCents"] == 17 and earnings["pendingCents"] == 10
    assert earnings["rejectedCents"] == 10 and earnings["bonusCents"] == 50
    assert earnings["nextAutoApprovalAt"] == states[a3]["autoApprovalAt"]
    assert earnings["bonuses"] == [
        {"amountCents": 50, "reason": "great work", "projectId": reviewed["project"]["id"]}
    ]
    bobs = (await api.gql(EARNINGS, token=bob["token"]))["me"]["expert"]["earnings"]
    assert bobs["paidCents"] == 5 and bobs["bonusCents"] == 0 and bobs["bonuses"] == []

    # filters
    for status, expected in [("REJECTED", [a1]), ("PENDING", [a3]), ("PAID", [a4, a2])]:
        got = [e["node"]["assignmentId"] for e in (await work(api, ada["token"], status))["edges"]]
        assert got == expected, status


async def test_paging_walks_every_answer_once(api: Api) -> None:
    customer = await api.create_customer()
    ada = await api.create_expert(["grading"], "ada")
    await api.create_project(customer["token"], tasks_of("grading", 5), payCents=1)
    done = await answer_all(api, ada["token"], 5)
    seen: list[str] = []
    after = None
    while True:
        page = await work(api, ada["token"], first=2, after=after)
        seen += [e["node"]["assignmentId"] for e in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert seen == done[::-1]
    for bad in [{"f": 0}, {"f": 1001}, {"a": "bogus"}]:
        v = {"s": None, "a": None, "f": 2, **bad}
        try:
            await api.gql(WORK, v, ada["token"])
            raise AssertionError(f"accepted {bad}")
        except GraphQLError as exc:
            assert exc.code == "BAD_INPUT", bad


async def test_only_the_expert_and_admins_see_an_experts_work(api: Api) -> None:
    customer = await api.create_customer()
    ada = await api.create_expert(["grading"], "ada")
    bob = await api.create_expert(["grading"], "bob")
    await api.create_project(customer["token"], tasks_of("grading", 1), payCents=1)
    (a1,) = await answer_all(api, ada["token"], 1)
    assert (await work(api, bob["token"]))["edges"] == []
    query = "query($e: ID!) { expert(id: $e) { work { edges { node { assignmentId } } } } }"
    admin = await api.gql(query, {"e": ada["id"]}, ADMIN_TOKEN)
    assert [e["node"]["assignmentId"] for e in admin["expert"]["work"]["edges"]] == [a1]
    for token in (customer["token"], bob["token"]):
        try:
            await api.gql(query, {"e": ada["id"]}, token)
            raise AssertionError("another account read ada's work")
        except GraphQLError as exc:
            assert exc.code == "NOT_FOUND"
