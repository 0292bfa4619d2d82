"""Bad input gets a clear error and writes nothing."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from ..helpers import Api, GraphQLError, tasks_of

BAD_PROJECTS: list[tuple[str, dict[str, Any]]] = [
    ("skill with spaces", {"tasks": [{"skill": "grade essays", "payload": {}}]}),
    ("empty skill", {"tasks": [{"skill": "", "payload": {}}]}),
    ("skill too long", {"tasks": [{"skill": "s" * 65, "payload": {}}]}),
    ("negative lease", {"leaseSeconds": -5, "tasks": tasks_of("grading", 1)}),
    ("zero lease", {"leaseSeconds": 0, "tasks": tasks_of("grading", 1)}),
    ("redundancy 9", {"redundancy": 9, "tasks": tasks_of("grading", 1)}),
    ("min quality 2", {"minQuality": 2.0, "tasks": tasks_of("grading", 1)}),
    ("priority out of range", {"priority": 10**6, "tasks": tasks_of("grading", 1)}),
    ("negative pay", {"payCents": -1, "tasks": tasks_of("grading", 1)}),
    ("huge payload", {"tasks": [{"skill": "grading", "payload": {"t": "x" * (1024 * 1024 + 1)}}]}),
    ("null payload", {"tasks": [{"skill": "grading", "payload": None}]}),
    (
        "duplicate external id",
        {
            "tasks": [
                {"skill": "g", "payload": 1, "externalId": "a"},
                {"skill": "g", "payload": 2, "externalId": "a"},
            ]
        },
    ),
    ("blank name", {"name": "  ", "tasks": tasks_of("grading", 1)}),
    ("naive deadline", {"deadline": "2030-01-01T00:00:00", "tasks": tasks_of("grading", 1)}),
]


@pytest.mark.parametrize(("case", "fields"), BAD_PROJECTS, ids=[c for c, _ in BAD_PROJECTS])
async def test_bad_projects_are_refused_and_nothing_is_written(
    api: Api, db: asyncpg.Connection, case: str, fields: dict[str, Any]
) -> None:
    customer = await api.create_customer()
    fields = dict(fields)
    tasks = fields.pop("tasks")
    with pytest.raises(GraphQLError) as err:
        await api.create_project(customer["token"], tasks, **fields)
    assert err.value.code == "BAD_INPUT", err.value.errors
    assert err.value.errors[0]["message"]
    for table in ("projects", "items", "tasks"):
        assert await db.fetchval(f"SELECT count(*) FROM {table}") == 0


async def test_rest_bad_bodies(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    cases = [
        ("/v1/projects", customer["token"], b"{not json", 422),
        (
            "/v1/projects",
            customer["token"],
            b'{"name": "x", "lease_seconds": -1, "tasks": []}',
            422,
        ),
        ("/v1/projects", customer["token"], b'{"name": "x", "tasks": "many"}', 422),
        ("/v1/projects", customer["token"], b'{"name": "x", "tasks": [], "colour": "red"}', 422),
        ("/v1/projects", customer["token"], b"[1, 2]", 422),
        ("/v1/tasks/next", expert["token"], b'{"skills": "grading"}', 422),
        ("/v1/tasks/next", expert["token"], b'{"skills": ["a b"]}', 422),
        ("/v1/tasks/next", expert["token"], b"\xff\xfe", 422),
    ]
    for path, token, body, status in cases:
        r = await api.rest(
            "POST", path, token, content=body, headers={"Content-Type": "application/json"}
        )
        assert r.status_code == status, (path, body, r.text)
        assert r.json()["error"]["code"] == "BAD_INPUT"
        assert r.json()["error"]["message"]
    assert await db.fetchval("SELECT count(*) FROM projects") == 0


async def test_graphql_type_errors_have_a_code(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    body = await api.gql_raw(
        'mutation { createProject(input: {name: "x", leaseSeconds: "long", tasks: []}) '
        "{ accepted } }",
        token=customer["token"],
    )
    assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT"
    body = await api.gql_raw("{ nonsense", token=customer["token"])
    assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT"
    assert await db.fetchval("SELECT count(*) FROM projects") == 0


async def test_submit_needs_an_answer(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    await api.create_project(customer["token"], tasks_of("grading", 1))
    claim = await api.claim(expert["token"])
    assert claim is not None
    r = await api.rest(
        "POST", f"/v1/assignments/{claim['assignmentId']}/submit", expert["token"], json={"nope": 1}
    )
    assert r.status_code == 422
    huge = {"a": "x" * (300 * 1024)}
    with pytest.raises(GraphQLError) as err:
        await api.submit(expert["token"], claim["assignmentId"], huge)
    assert err.value.code == "BAD_INPUT"
    assert await db.fetchval("SELECT count(*) FROM assignments WHERE answer IS NOT NULL") == 0


async def test_oversized_body_is_refused(api: Api) -> None:
    customer = await api.create_customer()
    big = b'{"name": "x", "tasks": [' + b'{"skill":"g","payload":"' + b"x" * (33 * 1024 * 1024)
    r = await api.rest(
        "POST",
        "/v1/projects",
        customer["token"],
        content=big,
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"


async def test_every_rest_body_refuses_unknown_fields_alike(
    api: Api, db: asyncpg.Connection
) -> None:
    """A misspelt field is a 422 naming it on every route, never silently ignored (a claim
    with `skils` used to claim from every skill)."""
    customer = await api.create_customer()
    expert = await api.create_expert(["grading", "other"])
    pid = (await api.create_project(customer["token"], tasks_of("other", 1)))["project"]["id"]
    writes = [
        ("/v1/tasks/next", expert["token"], {"skils": ["grading"]}, "skils"),
        (f"/v1/projects/{pid}/tasks", customer["token"], {"tasks": [], "extra": 1}, "extra"),
        (f"/v1/projects/{pid}/gold", customer["token"], {"tasks": [], "extra": 1}, "extra"),
        ("/v1/assignments/approve", customer["token"], {"assignment_ids": [], "why": "x"}, "why"),
    ]
    for path, token, body, field in writes:
        r = await api.rest("POST", path, token, json=body)
        assert r.status_code == 422, (path, r.text)
        error = r.json()["error"]
        assert error["code"] == "BAD_INPUT" and field in error["message"], (path, error)
    assert await db.fetchval("SELECT count(*) FROM assignments") == 0
    claim = await api.claim(expert["token"])
    assert claim is not None
    r = await api.rest(
        "POST",
        f"/v1/assignments/{claim['assignmentId']}/submit",
        expert["token"],
        json={"answer": 1, "note": "x"},
    )
    assert r.status_code == 422 and "note" in r.json()["error"]["message"], r.text
    assert await db.fetchval("SELECT count(*) FROM assignments WHERE answer IS NOT NULL") == 0


async def test_every_rest_route_refuses_unknown_query_parameters_alike(
    api: Api, db: asyncpg.Connection
) -> None:
    """A misspelt query parameter is a 422 naming it, on listings and writes alike (`frist=1`
    used to return the default page of 100), while the route's own parameters still work."""
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    pid = (await api.create_project(customer["token"], tasks_of("grading", 3)))["project"]["id"]
    c, e = customer["token"], expert["token"]
    refused = [
        ("GET", f"/v1/projects/{pid}/result-changes?frist=1", c, "frist"),
        ("GET", f"/v1/audit-log?first=1&projectid={pid}", c, "projectid"),
        ("GET", f"/v1/projects/{pid}/results?since=0", c, "since"),
        ("GET", "/v1/payouts.csv?project=1", c, "project"),
        ("GET", f"/v1/projects/{pid}?verbose=1", c, "verbose"),
        ("POST", "/v1/tasks/next?skill=grading", e, "skill"),
    ]
    for method, path, token, name in refused:
        r = await api.rest(method, path, token)
        assert r.status_code == 422, (path, r.text)
        error = r.json()["error"]
        assert error["code"] == "BAD_INPUT" and name in error["message"], (path, error)
    assert await db.fetchval("SELECT count(*) FROM assignments") == 0  # the claim did nothing
    page = await api.rest("GET", f"/v1/projects/{pid}/result-changes?first=1", c)
    assert page.status_code == 200, page.text
    audit = await api.rest("GET", f"/v1/audit-log?first=1&project_id={pid}", c)
    assert audit.status_code == 200, audit.text
    assert (await api.rest("POST", "/v1/tasks/next", e)).status_code == 200


async def test_an_unknown_field_named_by_a_lone_surrogate_is_a_clean_422(api: Api) -> None:
    """The refusal quotes the field; a lone surrogate in it made the error itself a 500
    (found by test_mutation_fuzz.py)."""
    expert = await api.create_expert(["grading"])
    r = await api.rest(
        "POST", "/v1/tasks/next", expert["token"], content=b'{"\\ud800": null}',
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "BAD_INPUT"
    assert r.json()["error"]["details"]["field"] == "\ud800"
