"""Answer schemas (issue 13): declared per project or item, checked when declared, against
gold answers, and on submit (BAD_INPUT naming the JSON path, nothing lost), readable in the
claim. Through GraphQL and REST."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import asyncpg
import pytest

from ..helpers import CLAIM, Api, GraphQLError, tasks_of

LABEL = {
    "type": "object",
    "properties": {"label": {"enum": ["cat", "dog"]}, "confidence": {"type": "number"}},
    "required": ["label"],
    "additionalProperties": False,
}
CREATE = (
    "mutation($i: CreateProjectInput!) { createProject(input: $i) { project { id answerSchema } } }"
)
SUBMIT = "mutation($a: ID!, $x: JSON!) { submit(assignmentId: $a, answer: $x) { id } }"


async def _refused(api: Api, query: str, variables: dict[str, Any], token: str) -> dict[str, Any]:
    body = await api.gql_raw(query, variables, token)
    assert body.get("errors"), body
    return body["errors"][0]


async def test_a_bad_schema_or_gold_is_refused_naming_the_path(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    token = customer["token"]
    bad_schema = {"type": "object", "properties": {"label": {"type": "strin"}}}
    err = await _refused(
        api,
        CREATE,
        {"i": {"name": "p", "tasks": tasks_of("g", 1), "answerSchema": bad_schema}},
        token,
    )
    assert err["extensions"]["code"] == "BAD_INPUT"
    assert err["extensions"]["path"] == "$.properties.label.type", err
    assert "answer_schema" in err["message"]
    # A per-item schema is checked the same way, named by the task's index.
    item = {"skill": "g", "payload": 1, "answerSchema": {"minimum": "zero"}}
    err = await _refused(api, CREATE, {"i": {"name": "p", "tasks": [item]}}, token)
    assert err["extensions"]["field"] == "tasks[0].answer_schema.minimum", err
    # Gold answers must match: the item's schema, else the project's.
    gold = {"skill": "g", "payload": 1, "gold": {"label": "cow"}}
    err = await _refused(
        api, CREATE, {"i": {"name": "p", "tasks": [gold], "answerSchema": LABEL}}, token
    )
    assert err["extensions"]["code"] == "BAD_INPUT"
    assert err["extensions"]["field"] == "tasks[0].gold.label", err
    assert await db.fetchval("SELECT count(*) FROM projects") == 0

    # REST: the same rules, 422 with the path.
    r = await api.rest(
        "POST",
        "/v1/projects",
        token,
        json={"name": "p", "tasks": [{"skill": "g", "payload": 1}], "answer_schema": bad_schema},
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"]["path"] == "$.properties.label.type"

    # addGoldItems and addTasks check gold against the stored project schema.
    created = await api.gql(
        CREATE, {"i": {"name": "p", "tasks": tasks_of("g", 1), "answerSchema": LABEL}}, token
    )
    pid = created["createProject"]["project"]["id"]
    assert created["createProject"]["project"]["answerSchema"] == LABEL
    err = await _refused(
        api,
        "mutation($p: ID!, $t: [TaskInput!]!) { addGoldItems(projectId: $p, tasks: $t) }",
        {"p": pid, "t": [{"skill": "g", "payload": 2, "gold": {"label": 3}}]},
        token,
    )
    assert err["extensions"]["field"] == "tasks[0].gold.label", err
    r = await api.rest(
        "POST",
        f"/v1/projects/{pid}/tasks",
        token,
        json={"tasks": [{"skill": "g", "payload": 3, "gold": {"confidence": 1}}]},
    )
    assert r.status_code == 422, r.text
    assert '"label" is a required property' in r.json()["error"]["message"]
    assert await db.fetchval("SELECT count(*) FROM items WHERE project_id = $1", pid) == 1


async def test_submit_refuses_a_non_conforming_answer_and_keeps_the_lease(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["g"])
    # One task follows the project's schema; one has its own (a number from 1 to 5).
    grade = {"type": "integer", "minimum": 1, "maximum": 5}
    tasks = [
        {"skill": "g", "payload": {"n": 1}, "priority": 10},
        {"skill": "g", "payload": {"n": 2}, "answerSchema": grade},
    ]
    await api.gql(
        CREATE,
        {"i": {"name": "p", "tasks": tasks, "answerSchema": LABEL, "payCents": 7}},
        customer["token"],
    )

    # GraphQL: the claim carries the schema; a wrong answer is BAD_INPUT with its path.
    claim = (await api.gql(CLAIM, {}, expert["token"]))["claimNextTask"]
    assert claim["task"]["payload"] == {"n": 1}
    assert claim["task"]["answerSchema"] == LABEL
    aid = claim["assignmentId"]
    for answer, field in [
        ({"label": "cow"}, "answer.label"),
        ({"label": "cat", "confidence": "high"}, "answer.confidence"),
        ({"label": "cat", "extra": 1}, "answer"),
        ("cat", "answer"),
    ]:
        err = await _refused(api, SUBMIT, {"a": aid, "x": answer}, expert["token"])
        assert err["extensions"]["code"] == "BAD_INPUT", err
        assert err["extensions"]["field"] == field, (answer, err)
    # Nothing was written, nothing paid, and the lease is still the expert's.
    row = await db.fetchrow("SELECT status, answer FROM assignments WHERE id = $1", aid)
    assert (row["status"], row["answer"]) == ("active", None)
    assert await db.fetchval("SELECT count(*) FROM payouts") == 0
    await api.heartbeat(expert["token"], aid)
    receipt = await api.submit(expert["token"], aid, {"label": "dog", "confidence": 0.9})
    assert receipt["payCents"] == 7

    # REST: the item's own schema replaces the project's; refused with 422 and the path.
    r = await api.rest("POST", "/v1/tasks/next", expert["token"])
    assert r.status_code == 200, r.text
    claimed = r.json()
    assert claimed["task"]["payload"] == {"n": 2}
    assert claimed["task"]["answer_schema"] == grade
    aid = claimed["assignment_id"]
    r = await api.rest("POST", f"/v1/assignments/{aid}/submit", expert["token"], json={"answer": 9})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "BAD_INPUT" and error["details"]["path"] == "$", error
    assert "9 is greater than the maximum of 5" in error["message"]
    r = await api.rest("POST", f"/v1/assignments/{aid}/submit", expert["token"], json={"answer": 4})
    assert r.status_code == 200, r.text
    answers = await db.fetch("SELECT answer FROM assignments WHERE status = 'submitted'")
    stored = [json.loads(a["answer"]) for a in answers]
    assert sorted(stored, key=str) == [4, {"label": "dog", "confidence": 0.9}]


async def test_projects_without_a_schema_take_any_json(api: Api) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["g"])
    await api.create_project(customer["token"], tasks_of("g", 1))
    claim = (await api.gql(CLAIM, {}, expert["token"]))["claimNextTask"]
    assert claim["task"]["answerSchema"] is None
    await api.submit(expert["token"], claim["assignmentId"], ["anything", {"at": 1}])
    try:
        await api.submit(expert["token"], claim["assignmentId"], None)
    except GraphQLError as exc:  # null is still not an answer
        assert exc.code in ("BAD_INPUT", "GRAPHQL_VALIDATION_FAILED", None)


# --- hostile schemas: each costs a bounded amount, whoever wrote it --------------------------


def _tasks_with_gold(gold: Any) -> list[dict[str, Any]]:
    return [{"skill": "g", "payload": 1}, {"skill": "g", "payload": 2, "gold": gold}]


async def _refused_at_declaration(
    api: Api, token: str, schema: Any, path: str, gold: Any = None
) -> dict[str, Any]:
    """BAD_INPUT naming `path` in the schema, through GraphQL (without and with a gold answer)
    and REST (422 with error.details.path)."""
    tasks = [tasks_of("g", 1)] + ([_tasks_with_gold(gold)] if gold is not None else [])
    err: dict[str, Any] = {}
    for t in tasks:
        err = await _refused(
            api, CREATE, {"i": {"name": "p", "tasks": t, "answerSchema": schema}}, token
        )
        assert err["extensions"]["code"] == "BAD_INPUT", err
        assert err["extensions"]["path"] == path, err
    r = await api.rest(
        "POST",
        "/v1/projects",
        token,
        json={"name": "p", "tasks": [{"skill": "g", "payload": 1}], "answer_schema": schema},
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"]["path"] == path, r.text
    return err


async def test_a_remote_ref_is_refused_at_declaration_and_never_fetched(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    # A listener that accepts nothing: any fetch would connect (the kernel's backlog) and wait.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        for ref in (f"http://127.0.0.1:{port}/x", f"http://127.0.0.1:{port}/x#/$defs/a"):
            schema = {"type": "object", "properties": {"label": {"$ref": ref}}}
            err = await _refused_at_declaration(
                api, customer["token"], schema, "$.properties.label.$ref", gold={"label": 1}
            )
            assert "outside the schema" in err["message"], err
        # Relative references would resolve against some base URI: refused the same way.
        await _refused_at_declaration(api, customer["token"], {"$ref": "x.json"}, "$.$ref")
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody ever connected
    assert await db.fetchval("SELECT count(*) FROM projects") == 0


async def test_a_ref_cycle_that_cannot_terminate_is_refused_at_declaration(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    token = customer["token"]
    own = {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
    err = await _refused_at_declaration(api, token, own, "$.$defs.a", gold={"x": 1})
    assert "cycle" in err["message"], err
    # Through other in-place keywords (not, allOf) and anchors: still no descent, still refused.
    mutual = {
        "$defs": {"a": {"allOf": [{"$ref": "#b"}]}, "b": {"$anchor": "b", "not": {"$ref": "#"}}},
        "$ref": "#/$defs/a",
    }
    await _refused_at_declaration(api, token, mutual, "$.$defs.b.not")
    # A per-item schema is checked the same way.
    item = {"skill": "g", "payload": 1, "answerSchema": own}
    err = await _refused(api, CREATE, {"i": {"name": "p", "tasks": [item]}}, token)
    assert err["extensions"]["field"] == "tasks[0].answer_schema.$defs.a", err
    # A schema that doubles its work at every level (terminating, but exponential) is refused.
    doubling: dict[str, Any] = {}
    for i in range(24):
        doubling[f"d{i}"] = {
            "allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]
        }
    doubling["d24"] = {"type": "string"}
    err = await _refused_at_declaration(api, token, {"$defs": doubling, "$ref": "#/$defs/d0"}, "$")
    assert "too costly" in err["message"], err
    # So is a regex the linear engine cannot run (a backreference).
    await _refused_at_declaration(api, token, {"pattern": "^(a+)\\1$"}, "$.pattern")
    assert await db.fetchval("SELECT count(*) FROM projects") == 0


async def test_a_recursive_schema_that_descends_still_works(api: Api) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["g"])
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            }
        },
        "$ref": "#/$defs/node",
    }
    err = await _refused(
        api,
        CREATE,
        {"i": {"name": "p", "tasks": _tasks_with_gold({"children": [5]}), "answerSchema": tree}},
        customer["token"],
    )
    assert err["extensions"]["field"] == "tasks[1].gold.children[0]", err
    gold = {"children": [{"children": []}]}
    await api.gql(
        CREATE,
        {"i": {"name": "p", "tasks": _tasks_with_gold(gold), "answerSchema": tree}},
        customer["token"],
    )
    claim = (await api.gql(CLAIM, {}, expert["token"]))["claimNextTask"]
    aid = claim["assignmentId"]
    deep: dict[str, Any] = {"children": [{"children": "leaf"}]}
    for _ in range(20):
        deep = {"children": [deep, {}]}
    err = await _refused(api, SUBMIT, {"a": aid, "x": deep}, expert["token"])
    assert err["extensions"]["path"] == "$" + ".children[0]" * 21 + ".children", err
    await api.submit(expert["token"], aid, {"children": [{}, {"children": [{}]}]})


async def _submit_while_healthz(api: Api, token: str, aid: str, answer: Any) -> dict[str, Any]:
    """The submit's body (GraphQL), with a /healthz sent while it is being processed: both must
    be answered (the validation does not take the server down with it)."""
    submit = asyncio.create_task(api.gql_raw(SUBMIT, {"a": aid, "x": answer}, token))
    health = await api.http.get("/healthz")
    assert health.status_code == 200
    return await submit


@pytest.mark.timeout(60)  # the quadratic and the backtracking validators took minutes
async def test_unique_items_on_a_large_answer_is_not_quadratic(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["g"])
    schema = {"type": "array", "uniqueItems": True}
    await api.gql(
        CREATE,
        {"i": {"name": "p", "tasks": tasks_of("g", 2), "answerSchema": schema}},
        customer["token"],
    )
    distinct = [{"k": i, "v": "x"} for i in range(8000)]
    claim = (await api.gql(CLAIM, {}, expert["token"]))["claimNextTask"]
    body = await _submit_while_healthz(api, expert["token"], claim["assignmentId"], distinct)
    assert "errors" not in body, body
    # The same size with one duplicate (last): refused, naming the answer.
    claim = (await api.gql(CLAIM, {}, expert["token"]))["claimNextTask"]
    duplicated = [*distinct[:-1], distinct[0]]
    body = await _submit_while_healthz(api, expert["token"], claim["assignmentId"], duplicated)
    assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT", body
    assert body["errors"][0]["extensions"]["path"] == "$", body
    status = await db.fetchval(
        "SELECT status FROM assignments WHERE id = $1", claim["assignmentId"]
    )
    assert status == "active"  # refused: the lease stays


@pytest.mark.timeout(60)
async def test_a_backtracking_pattern_is_matched_in_linear_time(api: Api) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["g"])
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}},
        "patternProperties": {"^(b+)+$": {"type": "integer"}},
    }
    await api.gql(
        CREATE,
        {"i": {"name": "p", "tasks": tasks_of("g", 1), "answerSchema": schema}},
        customer["token"],
    )
    claim = (await api.gql(CLAIM, {}, expert["token"]))["claimNextTask"]
    aid = claim["assignmentId"]
    # No match: the classic exponential case for a backtracking engine (and a long one).
    for s in ("a" * 40 + "!", "a" * 100_000 + "!"):
        body = await _submit_while_healthz(api, expert["token"], aid, {"s": s})
        assert body["errors"][0]["extensions"]["path"] == "$.s", body
    # patternProperties: a key matching the pattern must hold an integer, others anything.
    body = await _submit_while_healthz(api, expert["token"], aid, {"b" * 40: "x"})
    assert body["errors"][0]["extensions"]["path"] == "$." + "b" * 40, body
    body = await _submit_while_healthz(
        api, expert["token"], aid, {"s": "a" * 40, "b" * 40 + "!": "x", "b" * 40: 1}
    )
    assert "errors" not in body, body
