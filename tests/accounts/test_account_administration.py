"""Accounts (issue 18) through GraphQL and REST: `me`, the admins' lists, skills, starting
quality, capabilities, deactivation, and the admin audit. Invariants checked in the database."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import pytest

from ..helpers import ADMIN_TOKEN, Api, GraphQLError, tasks_of

ME = """{ me { role id name credentialId readOnly projectId
  expert { id status capabilities currentClaim { assignmentId skill }
           skills { skill status pauseReason quality qualitySource } }
  customer { id name projectsSummary { projects active tasks done remaining } } } }"""
EXPERT = "id status capabilities skills { skill quality qualitySource status }"


async def audit(api: Api, subject: str | None = None, action: str | None = None) -> list[Any]:
    data = await api.gql(
        "query($s: ID, $a: String) { adminAudit(subjectId: $s, action: $a, first: 200) {"
        " edges { node { seq at actor action subjectKind subjectId reason details } } } }",
        {"s": subject, "a": action},
        ADMIN_TOKEN,
    )
    return [e["node"] for e in data["adminAudit"]["edges"]]


async def test_me_for_each_role(api: Api) -> None:
    customer = await api.create_customer("acme")
    expert = await api.create_expert([{"skill": "grading", "quality": 0.7}], "ann")
    created = await api.create_project(customer["token"], tasks_of("grading", 2))
    claim = await api.claim(expert["token"])
    assert claim is not None

    me = (await api.gql(ME, token=expert["token"]))["me"]
    assert me["role"] == "expert" and me["id"] == expert["id"] and me["name"] == "ann"
    assert me["customer"] is None and me["credentialId"] and not me["readOnly"]
    assert me["expert"]["currentClaim"] == {
        "assignmentId": claim["assignmentId"],
        "skill": "grading",
    }
    assert me["expert"]["skills"] == [
        {"skill": "grading", "status": "active", "pauseReason": None,
         "quality": pytest.approx(0.7), "qualitySource": "admin"}
    ]  # fmt: skip

    me = (await api.gql(ME, token=customer["token"]))["me"]
    assert me["role"] == "customer" and me["id"] == customer["id"] and me["name"] == "acme"
    assert me["customer"]["projectsSummary"] == {
        "projects": 1, "active": 1, "tasks": 2, "done": 0, "remaining": 2
    }  # fmt: skip
    assert created["project"]["id"]

    me = (await api.gql(ME, token=ADMIN_TOKEN))["me"]
    assert me["role"] == "admin" and me["id"] is None and me["credentialId"] is None

    body = await api.gql_raw(ME, token="tr_e_nope")
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


async def test_experts_and_customers_are_relay_paged_for_admins_only(api: Api) -> None:
    ids = [(await api.create_expert(["grading"], f"grader {i}"))["id"] for i in range(3)]
    other = await api.create_expert(["audio"], "listener")
    customer = await api.create_customer("acme")
    query = (
        "query($k: String, $s: String, $q: String, $a: String) {"
        " experts(skill: $k, status: $s, search: $q, after: $a, first: 2) {"
        " edges { cursor node { id name } } pageInfo { hasNextPage endCursor } } }"
    )
    seen: list[str] = []
    after = None
    while True:
        page = (await api.gql(query, {"k": "grading", "a": after}, ADMIN_TOKEN))["experts"]
        seen += [e["node"]["id"] for e in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert sorted(seen) == sorted(ids) and other["id"] not in seen
    found = (await api.gql(query, {"q": "LISTEN"}, ADMIN_TOKEN))["experts"]["edges"]
    assert [e["node"]["id"] for e in found] == [other["id"]]
    found = (await api.gql(query, {"q": "%"}, ADMIN_TOKEN))["experts"]["edges"]
    assert found == []  # LIKE wildcards match themselves
    custs = await api.gql("{ customers { edges { node { id name } } } }", token=ADMIN_TOKEN)
    assert custs["customers"]["edges"] == [{"node": {"id": customer["id"], "name": "acme"}}]

    for token in (customer["token"], other["token"]):
        with pytest.raises(GraphQLError) as err:
            await api.gql("{ experts { edges { cursor } } }", token=token)
        assert err.value.code == "NOT_FOUND"
    for variables, code in (({"s": "gone"}, "BAD_INPUT"), ({"a": "junk"}, "BAD_INPUT")):
        with pytest.raises(GraphQLError) as err:
            await api.gql(query, variables, ADMIN_TOKEN)
        assert err.value.code == code


async def test_granted_skill_is_claimable_at_once_and_removal_returns_the_lease(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    await api.create_project(customer["token"], tasks_of("audio", 1))
    assert await api.claim(expert["token"]) is None
    grant = (
        "mutation($e: ID!, $k: String!) {"
        ' grantSkill(expertId: $e, skill: $k, quality: 0.9, reason: "passed test")'
        f" {{ {EXPERT} }} }}"
    )
    got = (await api.gql(grant, {"e": expert["id"], "k": "audio"}, ADMIN_TOKEN))["grantSkill"]
    assert [s["skill"] for s in got["skills"]] == ["audio", "grading"]
    claim = await api.claim(expert["token"])
    assert claim is not None and claim["task"]["skill"] == "audio"
    with pytest.raises(GraphQLError) as err:
        await api.gql(grant, {"e": expert["id"], "k": "audio"}, ADMIN_TOKEN)
    assert err.value.code == "CONFLICT"

    removed = await api.gql(
        'mutation($e: ID!) { removeSkill(expertId: $e, skill: "audio", reason: "r")'
        " { skills { skill } } }",
        {"e": expert["id"]},
        ADMIN_TOKEN,
    )
    assert removed["removeSkill"]["skills"] == [{"skill": "grading"}]
    row = await db.fetchrow(
        "SELECT t.status, a.status AS a_status FROM assignments a JOIN tasks t ON t.id = a.task_id"
        " WHERE a.id = $1",
        uuid.UUID(claim["assignmentId"]),
    )
    assert dict(row) == {"status": "open", "a_status": "released"}
    assert await api.claim(expert["token"]) is None

    actions = [(a["action"], a["reason"]) for a in await audit(api, expert["id"])]
    assert ("skill.grant", "passed test") in actions and ("skill.remove", "r") in actions
    for variables in ({"e": str(uuid.uuid4()), "k": "x"}, {"e": "nope", "k": "x"}):
        with pytest.raises(GraphQLError) as err:
            await api.gql(grant, variables, ADMIN_TOKEN)
        assert err.value.code == "NOT_FOUND"
    with pytest.raises(GraphQLError) as err:
        await api.gql(grant, {"e": expert["id"], "k": "bad skill!"}, ADMIN_TOKEN)
    assert err.value.code == "BAD_INPUT"


async def test_starting_quality_never_silently_overwrites_gold(
    api: Api, db: asyncpg.Connection
) -> None:
    expert = await api.create_expert([{"skill": "grading", "quality": 0.5}])
    q = (
        "mutation($e: ID!, $q: Float!, $o: Boolean!) { setStartingQuality(expertId: $e,"
        ' skill: "grading", quality: $q, overrideMeasured: $o, reason: "calibrated")'
        " { skills { quality qualitySource } } }"
    )
    got = await api.gql(q, {"e": expert["id"], "q": 0.8, "o": False}, ADMIN_TOKEN)
    assert got["setStartingQuality"]["skills"] == [
        {"quality": pytest.approx(0.8), "qualitySource": "admin"}
    ]
    # gold measured it (as the submit's scoring would)
    await db.execute(
        "UPDATE expert_skills SET gold_seen = 4, gold_correct = 1, quality = 2.0 / 6"
        " WHERE expert_id = $1",
        uuid.UUID(expert["id"]),
    )
    with pytest.raises(GraphQLError) as err:
        await api.gql(q, {"e": expert["id"], "q": 0.9, "o": False}, ADMIN_TOKEN)
    assert err.value.code == "CONFLICT" and err.value.errors[0]["extensions"]["gold_seen"] == 4
    quality = await db.fetchval("SELECT quality FROM expert_skills WHERE expert_id = $1",
                                uuid.UUID(expert["id"]))  # fmt: skip
    assert quality == pytest.approx(1 / 3)
    got = await api.gql(q, {"e": expert["id"], "q": 0.9, "o": True}, ADMIN_TOKEN)
    assert got["setStartingQuality"]["skills"][0]["quality"] == pytest.approx(0.9)
    entries = await audit(api, expert["id"], "skill.set_quality")
    assert [e["details"]["overrode_measured"] for e in entries] == [False, True]
    assert entries[1]["details"]["previous"] == pytest.approx(1 / 3)
    with pytest.raises(GraphQLError) as err:
        await api.gql(q, {"e": expert["id"], "q": 1.5, "o": True}, ADMIN_TOKEN)
    assert err.value.code == "BAD_INPUT"


async def test_capabilities_gate_claims(api: Api) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    await api.create_project(
        customer["token"], tasks_of("grading", 1, requiredCapabilities=["medical"])
    )
    assert await api.claim(expert["token"]) is None
    got = await api.gql(
        'mutation($e: ID!) { setCapabilities(expertId: $e, capabilities: ["medical"]) {'
        " capabilities } }",
        {"e": expert["id"]},
        ADMIN_TOKEN,
    )
    assert got["setCapabilities"]["capabilities"] == ["medical"]
    assert await api.claim(expert["token"]) is not None


async def test_deactivation_refuses_the_token_and_returns_the_lease(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    other = await api.create_expert(["grading"], "other")
    await api.create_project(customer["token"], tasks_of("grading", 1))
    claim = await api.claim(expert["token"])
    assert claim is not None and await api.claim(other["token"]) is None

    got = await api.gql(
        'mutation($e: ID!) { deactivateExpert(expertId: $e, reason: "left the company") {'
        " leasesReleased expert { status } } }",
        {"e": expert["id"]},
        ADMIN_TOKEN,
    )
    assert got["deactivateExpert"] == {"leasesReleased": 1, "expert": {"status": "disabled"}}
    for r in (
        await api.rest("POST", "/v1/tasks/next", expert["token"]),
        await api.rest("POST", f"/v1/assignments/{claim['assignmentId']}/heartbeat",
                       expert["token"]),
    ):  # fmt: skip
        assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHENTICATED"
    body = await api.gql_raw(ME, token=expert["token"])
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    # the task went back to the pool: the other expert gets it
    again = await api.claim(other["token"])
    assert again is not None and again["task"]["id"] == claim["task"]["id"]
    # history stays: the expert row and their assignment exist
    eid = uuid.UUID(expert["id"])
    assert await db.fetchval("SELECT status FROM experts WHERE id = $1", eid) == "disabled"
    assert await db.fetchval("SELECT count(*) FROM assignments WHERE expert_id = $1", eid) == 1

    with pytest.raises(GraphQLError) as err:
        await api.gql(
            'mutation($e: ID!) { deactivateExpert(expertId: $e, reason: "x") { leasesReleased } }',
            {"e": expert["id"]},
            ADMIN_TOKEN,
        )
    assert err.value.code == "CONFLICT"
    await api.gql(
        'mutation($e: ID!) { reactivateExpert(expertId: $e, reason: "back") { status } }',
        {"e": expert["id"]},
        ADMIN_TOKEN,
    )
    assert (await api.gql(ME, token=expert["token"]))["me"]["expert"]["status"] == "active"
    entries = await audit(api, expert["id"])
    assert [(e["action"], e["reason"], e["actor"]) for e in entries[-2:]] == [
        ("expert.deactivate", "left the company", "admin-token"),
        ("expert.reactivate", "back", "admin-token"),
    ]
    assert entries[-2]["details"]["leases_released"] == [claim["assignmentId"]]


async def test_admin_actions_of_other_areas_show_in_the_audit(api: Api) -> None:
    expert = await api.create_expert(["grading"])
    await api.gql(
        'mutation($e: ID!) { pauseExpert(expertId: $e, skill: "grading",'
        ' reason: "spot check") { skill } }',
        {"e": expert["id"]},
        ADMIN_TOKEN,
    )
    entries = await audit(api, expert["id"], "pauseExpert")
    assert len(entries) == 1
    assert entries[0]["reason"] == "spot check" and entries[0]["actor"] == "admin-token"
    assert entries[0]["details"]["arguments"]["skill"] == "grading"
    # a failed admin mutation is not recorded as done
    body = await api.gql_raw(
        'mutation($e: ID!) { pauseExpert(expertId: $e, skill: "grading", reason: "x") { skill } }',
        {"e": str(uuid.uuid4())},
        token=ADMIN_TOKEN,
    )
    assert body["errors"]
    assert len(await audit(api, None, "pauseExpert")) == 1
    with pytest.raises(GraphQLError) as err:
        await api.gql("{ adminAudit { edges { cursor } } }", token=expert["token"])
    assert err.value.code == "NOT_FOUND"
