"""A customer's bonus to an expert who worked on their project: one ledger line per key."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from ..helpers import Api, GraphQLError, tasks_of

GRANT = (
    "mutation($p: ID!, $e: ID!, $a: Int!, $r: String!, $k: String!) { grantBonus(projectId: $p,"
    " expertId: $e, amountCents: $a, reason: $r, idempotencyKey: $k) { id kind amountCents } }"
)


async def _worked(api: Api) -> tuple[dict[str, str], dict[str, str], str]:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    created = await api.create_project(customer["token"], tasks_of("grading", 1))
    claim = await api.claim(expert["token"])
    assert claim is not None
    await api.submit(expert["token"], claim["assignmentId"], {"ok": True})
    return customer, expert, created["project"]["id"]


async def grant(api: Api, token: str, **v: Any) -> dict[str, Any]:
    return (await api.gql(GRANT, v, token))["grantBonus"]


async def test_a_bonus_is_one_line_per_key_even_when_granted_concurrently(
    api: Api, db: asyncpg.Connection
) -> None:
    customer, expert, pid = await _worked(api)
    args = {"p": pid, "e": expert["id"], "a": 250, "r": "great work", "k": "bonus-1"}
    lines = await asyncio.gather(*(grant(api, customer["token"], **args) for _ in range(10)))
    assert len({line["id"] for line in lines}) == 1
    assert lines[0]["kind"] == "bonus" and lines[0]["amountCents"] == 250
    assert await db.fetchval("SELECT count(*) FROM payouts WHERE kind = 'bonus'") == 1
    # the expert sees it among their lines
    mine = await api.gql(
        "{ payouts(first: 10) { edges { node { kind amountCents reason } } } }",
        token=expert["token"],
    )
    kinds = [e["node"]["kind"] for e in mine["payouts"]["edges"]]
    assert "bonus" in kinds
    # the same key for another amount is a conflict, not a second line
    try:
        await grant(api, customer["token"], **{**args, "a": 999})
        raise AssertionError("a reused key granted a second bonus")
    except GraphQLError as exc:
        assert exc.code == "CONFLICT"
    r = await api.rest(
        "POST", f"/v1/projects/{pid}/bonuses", customer["token"],
        json={"expert_id": expert["id"], "amount_cents": 250, "reason": "great work",
              "idempotency_key": "bonus-1"},
    )  # fmt: skip
    assert r.status_code == 200 and r.json()["id"] == lines[0]["id"]


async def test_a_bonus_is_refused_to_strangers_and_for_bad_amounts(
    api: Api, db: asyncpg.Connection
) -> None:
    customer, expert, pid = await _worked(api)
    stranger = await api.create_expert(["grading"], "stranger")
    other_customer = await api.create_customer("other")
    cases = [
        (customer, {"e": stranger["id"], "a": 100}, "NOT_FOUND"),
        (other_customer, {"e": expert["id"], "a": 100}, "NOT_FOUND"),
        (customer, {"e": expert["id"], "a": 0}, "BAD_INPUT"),
        (customer, {"e": expert["id"], "a": -5}, "BAD_INPUT"),
        (customer, {"e": expert["id"], "a": 10_000_000}, "BAD_INPUT"),
    ]
    for who, v, code in cases:
        try:
            await grant(api, who["token"], p=pid, r="thanks", k=f"k{v['a']}", **v)
            raise AssertionError(f"granted {v}")
        except GraphQLError as exc:
            assert exc.code == code, (v, exc.errors)
    assert await db.fetchval("SELECT count(*) FROM payouts WHERE kind = 'bonus'") == 0
