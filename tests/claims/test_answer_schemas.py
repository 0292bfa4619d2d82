"""Answer schemas (issue 13): declared per project or item, checked when declared, against
gold answers, and on submit (BAD_INPUT naming the JSON path, nothing lost), readable in the
claim. Through GraphQL and REST."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

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
    assert "'label' is a required property" in r.json()["error"]["message"]
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
