"""Project instructions: versioned Markdown, set by the customer, handed out with the claim,
recorded on every answer. Through the public API, checked against the database."""

from __future__ import annotations

import asyncpg

from ..helpers import ADMIN_TOKEN, CLAIM_TASK_FIELDS, Api, GraphQLError, claim_mutation, tasks_of

SET = (
    "mutation($p: ID!, $m: String!, $r: Boolean! = false) { setInstructions(projectId: $p,"
    " markdown: $m, allowRemoteImages: $r) { version markdown allowRemoteImages createdAt } }"
)
PROJECT = (
    "query($p: ID!) { project(id: $p) { instructions { version markdown }"
    " instructionsHistory { version markdown } } }"
)
CLAIM_WITH_INSTRUCTIONS = claim_mutation(
    CLAIM_TASK_FIELDS + " instructions { version markdown allowRemoteImages }"
)


async def test_versions_are_kept_and_each_answer_records_the_one_it_was_given_under(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    created = await api.create_project(customer["token"], tasks_of("grading", 2))
    pid = created["project"]["id"]
    # none yet: a claim says so
    first = (await api.gql(CLAIM_WITH_INSTRUCTIONS, {}, expert["token"]))["claimNextTask"]
    assert first["task"]["instructions"] is None
    await api.submit(expert["token"], first["assignmentId"], {"grade": 1})

    v1 = await api.gql(SET, {"p": pid, "m": "# Grading\n\nBe *fair*."}, customer["token"])
    assert v1["setInstructions"]["version"] == 1
    v2 = await api.gql(SET, {"p": pid, "m": "# Grading v2", "r": True}, customer["token"])
    assert v2["setInstructions"]["version"] == 2
    claim = (await api.gql(CLAIM_WITH_INSTRUCTIONS, {}, expert["token"]))["claimNextTask"]
    assert claim["task"]["instructions"] == {
        "version": 2, "markdown": "# Grading v2", "allowRemoteImages": True,
    }  # fmt: skip
    # a new version after the claim: the held claim keeps the one it was given
    await api.gql(SET, {"p": pid, "m": "# Grading v3"}, customer["token"])
    again = (await api.gql(CLAIM_WITH_INSTRUCTIONS, {}, expert["token"]))["claimNextTask"]
    assert again["assignmentId"] == claim["assignmentId"]
    assert again["task"]["instructions"]["version"] == 2
    await api.submit(expert["token"], claim["assignmentId"], {"grade": 2})
    recorded = await db.fetch("SELECT instructions_version FROM assignments ORDER BY claimed_at")
    assert [r["instructions_version"] for r in recorded] == [None, 2]

    project = (await api.gql(PROJECT, {"p": pid}, customer["token"]))["project"]
    assert project["instructions"] == {"version": 3, "markdown": "# Grading v3"}
    assert [h["version"] for h in project["instructionsHistory"]] == [3, 2, 1]
    assert project["instructionsHistory"][2]["markdown"] == "# Grading\n\nBe *fair*."


async def test_rest_put_and_the_rest_claim_body(api: Api) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    created = await api.create_project(customer["token"], tasks_of("grading", 1))
    pid = created["project"]["id"]
    path = f"/v1/projects/{pid}/instructions"
    r = await api.rest("PUT", path, customer["token"], json={"markdown": "Read **this**."})
    assert r.status_code == 200, r.text
    assert r.json()["version"] == 1 and r.json()["allow_remote_images"] is False
    claim = await api.rest("POST", "/v1/tasks/next", expert["token"])
    assert claim.json()["task"]["instructions"] == {
        "version": 1, "markdown": "Read **this**.", "allow_remote_images": False,
    }  # fmt: skip
    # admins may set them too
    r = await api.rest("PUT", path, ADMIN_TOKEN, json={"markdown": "v2"})
    assert r.status_code == 200 and r.json()["version"] == 2


async def test_bad_instructions_are_refused_and_write_nothing(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    other = await api.create_customer("other")
    expert = await api.create_expert(["grading"])
    created = await api.create_project(customer["token"], tasks_of("grading", 1))
    pid = created["project"]["id"]
    path = f"/v1/projects/{pid}/instructions"
    too_big = "x" * (64 * 1024 + 1)
    for token, body, status, code in [
        (customer["token"], {"markdown": too_big}, 422, "BAD_INPUT"),
        (customer["token"], {"markdown": "a\x00b"}, 422, "BAD_INPUT"),
        (customer["token"], {"markdown": 7}, 422, "BAD_INPUT"),
        (customer["token"], {"markdown": "ok", "allow_remote_images": "yes"}, 422, "BAD_INPUT"),
        (customer["token"], {"markdown": "ok", "html": "<b>"}, 422, "BAD_INPUT"),
        (customer["token"], {}, 422, "BAD_INPUT"),
        (other["token"], {"markdown": "mine now"}, 404, "NOT_FOUND"),
        (expert["token"], {"markdown": "mine now"}, 404, "NOT_FOUND"),
    ]:
        r = await api.rest("PUT", path, token, json=body)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), (body, r.text)
    try:
        await api.gql(SET, {"p": pid, "m": too_big}, customer["token"])
        raise AssertionError("64 KiB + 1 accepted")
    except GraphQLError as exc:
        assert exc.code == "BAD_INPUT"
    # exactly 64 KiB is fine
    ok = await api.rest("PUT", path, customer["token"], json={"markdown": "y" * 64 * 1024})
    assert ok.status_code == 200 and ok.json()["version"] == 1
    assert await db.fetchval("SELECT count(*) FROM project_instructions") == 1
