"""Layouts through the API: the answer schema must fit the project's layout (BAD_INPUT naming
the mismatch), the claim returns the layout (GraphQL and REST), and PAIRWISE draws the
left/right order per assignment, records it, and shows it with the answer."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from ..helpers import Api, GraphQLError, claim_mutation

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
CLAIM = claim_mutation("id layout candidateKeys candidateOrder payload")


def _tasks(n: int) -> list[dict[str, Any]]:
    return [{"skill": "judge", "payload": {"a": f"left {i}", "b": f"right {i}"}} for i in range(n)]


@pytest.mark.parametrize(
    ("layout", "schema", "extra", "says"),
    [
        ("GRADE", None, {}, "must be an object schema"),
        ("GRADE", {"type": "object", "properties": {"x": {"type": "integer"}}}, {},
         "criterion 'x' needs an integer minimum and maximum"),
        ("GRADE", {"type": "object", "properties": {"x": {"type": "string"}}}, {},
         "criterion 'x' must be an integer with minimum and maximum, or an enum"),
        ("PAIRWISE", {"type": "object", "properties": {"winner": {"enum": ["a", "c"]}}}, {},
         "winner's enum must hold 'a' and 'b'"),
        ("PAIRWISE", {"type": "object", "properties": {"choice": {"enum": ["a", "b"]}}}, {},
         "needs a 'winner' property"),
        ("PAIRWISE", {**PAIRWISE, "properties": {**PAIRWISE["properties"],
                                                 "score": {"type": "integer"}}}, {},
         "property 'score' must be a string"),
        ("REVIEW", {"type": "object", "properties": {"notes": {"type": "array"}}}, {},
         "property 'notes' must be a scalar"),
        ("GENERIC", None, {"candidateKeys": ["x", "y"]}, "candidate_keys is for the PAIRWISE"),
        ("PAIRWISE", PAIRWISE, {"candidateKeys": ["x", "x"]}, "two different payload keys"),
    ],
)  # fmt: skip
async def test_the_schema_must_fit_the_layout(
    api: Api, layout: str, schema: Any, extra: dict[str, Any], says: str
) -> None:
    customer = (await api.create_customer())["token"]
    with pytest.raises(GraphQLError) as err:
        await api.create_project(customer, _tasks(1), layout=layout, answerSchema=schema, **extra)
    assert err.value.code == "BAD_INPUT"
    assert says in err.value.errors[0]["message"], err.value.errors[0]["message"]
    # REST says the same
    body = {"name": "p", "tasks": _tasks(1), "layout": layout, "answer_schema": schema}
    if "candidateKeys" in extra:
        body["candidate_keys"] = extra["candidateKeys"]
    r = await api.rest("POST", "/v1/projects", customer, json=body)
    assert r.status_code == 422 and says in r.json()["error"]["message"], r.text


async def test_claims_carry_the_layout(api: Api) -> None:
    customer = (await api.create_customer())["token"]
    await api.create_project(customer, _tasks(1), layout="GRADE", answerSchema=GRADE)
    expert = await api.create_expert(["judge"])
    c = (await api.gql(CLAIM, {"s": None}, expert["token"]))["claimNextTask"]
    assert c["task"]["layout"] == "GRADE" and c["task"]["candidateOrder"] is None
    r = await api.rest("POST", "/v1/tasks/next", expert["token"], json={})
    assert r.json()["task"]["layout"] == "GRADE"
    # a project without a layout: GENERIC
    await api.create_project(customer, [{"skill": "plain", "payload": 1}])
    other = await api.create_expert(["plain"], name="o")
    c = (await api.gql(CLAIM, {"s": None}, other["token"]))["claimNextTask"]
    assert c["task"]["layout"] == "GENERIC"


async def test_pairwise_order_is_drawn_recorded_and_shown(api: Api, db: asyncpg.Connection) -> None:
    customer = (await api.create_customer())["token"]
    n = 30
    pid = (
        await api.create_project(
            customer, _tasks(n), layout="PAIRWISE", answerSchema=PAIRWISE,
            paymentPolicy="on_review",
        )
    )["project"]["id"]  # fmt: skip
    expert = await api.create_expert(["judge"])
    orders = {}
    while (c := (await api.gql(CLAIM, {"s": None}, expert["token"]))["claimNextTask"]) is not None:
        t = c["task"]
        assert t["layout"] == "PAIRWISE" and t["candidateKeys"] == ["a", "b"]
        assert t["candidateOrder"] in ("ab", "ba")
        orders[c["assignmentId"]] = t["candidateOrder"]
        await api.submit(expert["token"], c["assignmentId"], {"winner": "a"})
    assert len(orders) == n
    # Both orders occur (all 30 alike: about 2e-9), and each is what the database recorded.
    assert set(orders.values()) == {"ab", "ba"}
    recorded = dict(
        await db.fetch(
            "SELECT id::text, CASE WHEN candidates_swapped THEN 'ba' ELSE 'ab' END"
            " FROM assignments WHERE project_id = $1",
            pid,
        )
    )
    assert recorded == orders
    listed = await api.gql(
        "query($p: ID!) { assignmentReviews(projectId: $p, first: 100) { edges {"
        " answer node { assignmentId candidateOrder } } } }",
        {"p": pid},
        customer,
    )
    shown = {
        e["node"]["assignmentId"]: e["node"]["candidateOrder"]
        for e in listed["assignmentReviews"]["edges"]
    }
    assert shown == orders
    r = await api.rest("GET", f"/v1/assignments/{next(iter(orders))}/review", customer)
    assert r.json()["candidate_order"] == next(iter(orders.values()))
