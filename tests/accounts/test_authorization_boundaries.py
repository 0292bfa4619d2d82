"""Authorization boundaries: other people's things answer as not found."""

from __future__ import annotations

import asyncpg
import pytest

from ..helpers import ADMIN_TOKEN, Api, GraphQLError, tasks_of


async def test_missing_and_unknown_tokens(api: Api) -> None:
    for token in (None, "nope"):
        with pytest.raises(GraphQLError) as err:
            await api.claim(token)  # type: ignore[arg-type]
        assert err.value.code == "UNAUTHENTICATED"
        r = await api.rest("POST", "/v1/tasks/next", token)
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "UNAUTHENTICATED"
    r = await api.rest("POST", "/v1/tasks/next", headers={"Authorization": "Basic abc"})
    assert r.status_code == 401


async def test_roles_are_enforced(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    with pytest.raises(GraphQLError) as err:
        await api.gql('mutation { createCustomer(name: "x") { id } }', token=customer["token"])
    assert err.value.code == "NOT_FOUND"
    with pytest.raises(GraphQLError) as err:
        await api.create_project(expert["token"], tasks_of("grading", 1))
    assert err.value.code == "NOT_FOUND"
    with pytest.raises(GraphQLError) as err:
        await api.claim(customer["token"])
    assert err.value.code == "NOT_FOUND"
    r = await api.rest("POST", "/v1/projects", expert["token"], json={"name": "x", "tasks": []})
    assert r.status_code == 404
    assert await db.fetchval("SELECT count(*) FROM customers") == 1
    assert await db.fetchval("SELECT count(*) FROM projects") == 0


async def test_tokens_are_stored_hashed(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    stored = await db.fetch("SELECT token_hash FROM credentials")
    assert len(stored) == 1
    assert customer["token"].encode() not in bytes(stored[0]["token_hash"])
    assert len(stored[0]["token_hash"]) == 32


async def test_customers_see_only_their_projects(api: Api) -> None:
    alice = await api.create_customer("alice")
    bob = await api.create_customer("bob")
    created = await api.create_project(alice["token"], tasks_of("grading", 1))
    project_id = created["project"]["id"]
    query = "query($p: ID!) { project(id: $p) { id name } }"
    assert (await api.gql(query, {"p": project_id}, alice["token"]))["project"]["id"] == project_id
    assert (await api.gql(query, {"p": project_id}, ADMIN_TOKEN))["project"]["id"] == project_id
    with pytest.raises(GraphQLError) as err:
        await api.gql(query, {"p": project_id}, bob["token"])
    assert err.value.code == "NOT_FOUND"
    r = await api.rest("GET", f"/v1/projects/{project_id}", bob["token"])
    assert r.status_code == 404
    with pytest.raises(GraphQLError) as err:
        await api.gql(
            "mutation($p: ID!) { cancelProject(id: $p) { id } }", {"p": project_id}, bob["token"]
        )
    assert err.value.code == "NOT_FOUND"
    with pytest.raises(GraphQLError) as err:
        await api.gql(query, {"p": "not-a-uuid"}, alice["token"])
    assert err.value.code == "NOT_FOUND"


async def test_experts_touch_only_their_own_assignments(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    owner = await api.create_expert(["grading"], "owner")
    thief = await api.create_expert(["grading"], "thief")
    await api.create_project(customer["token"], tasks_of("grading", 2), payCents=9)
    claim = await api.claim(owner["token"])
    assert claim is not None
    for call in (
        api.heartbeat(thief["token"], claim["assignmentId"]),
        api.submit(thief["token"], claim["assignmentId"], {"stolen": True}),
    ):
        with pytest.raises(GraphQLError) as err:
            await call
        assert err.value.code == "NOT_FOUND"
    for path in ("heartbeat", "submit"):
        r = await api.rest(
            "POST",
            f"/v1/assignments/{claim['assignmentId']}/{path}",
            thief["token"],
            json={"answer": 1},
        )
        assert r.status_code == 404
        assert r.json()["error"]["code"] == "NOT_FOUND"
    assert await db.fetchval("SELECT count(*) FROM payouts") == 0
    assert await db.fetchval("SELECT count(*) FROM assignments WHERE answer IS NOT NULL") == 0
