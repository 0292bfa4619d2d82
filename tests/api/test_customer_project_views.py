"""Customers' views: `projects(status, after)` pages and progress by skill and state."""

from __future__ import annotations

import pytest

from ..helpers import ADMIN_TOKEN, Api, GraphQLError, tasks_of

PROJECTS = """query($s: String, $a: String, $f: Int!) {
  projects(status: $s, after: $a, first: $f) {
    edges { cursor node { id name status } }
    pageInfo { hasNextPage endCursor }
  }
}"""


async def _walk(api: Api, token: str, status: str | None, first: int) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    after = None
    while True:
        conn = (await api.gql(PROJECTS, {"s": status, "a": after, "f": first}, token))["projects"]
        out += [e["node"] for e in conn["edges"]]
        if not conn["pageInfo"]["hasNextPage"]:
            return out
        after = conn["pageInfo"]["endCursor"]


async def test_projects_pages_and_filters(api: Api) -> None:
    customer = (await api.create_customer())["token"]
    other = (await api.create_customer("globex"))["token"]
    mine = []
    for i in range(5):
        created = await api.create_project(customer, tasks_of("grading", 1), name=f"p{i}")
        mine.append(created["project"]["id"])
    theirs = (await api.create_project(other, tasks_of("grading", 1), name="x"))["project"]["id"]
    for pid in mine[:2]:
        await api.gql("mutation($p: ID!) { cancelProject(id: $p) { id } }", {"p": pid}, customer)

    listed = await _walk(api, customer, None, 2)
    assert [p["id"] for p in listed] == list(reversed(mine))  # newest first, no repeats
    assert {p["id"] for p in await _walk(api, customer, "canceled", 1)} == set(mine[:2])
    assert {p["id"] for p in await _walk(api, customer, "active", 10)} == set(mine[2:])
    assert [p["id"] for p in await _walk(api, other, None, 10)] == [theirs]
    assert len(await _walk(api, ADMIN_TOKEN, None, 3)) == 6

    for variables, code in (
        ({"s": "done", "f": 10}, "BAD_INPUT"),
        ({"a": "not-a-cursor", "f": 10}, "BAD_INPUT"),
        ({"f": 0}, "BAD_INPUT"),
        ({"f": 10_000}, "BAD_INPUT"),
    ):
        with pytest.raises(GraphQLError) as err:
            await api.gql(PROJECTS, variables, customer)
        assert err.value.code == code
    expert = await api.create_expert(["grading"])
    with pytest.raises(GraphQLError) as err:
        await api.gql(PROJECTS, {"f": 10}, expert["token"])
    assert err.value.code == "NOT_FOUND"


async def test_progress_by_skill_and_state(api: Api) -> None:
    customer = (await api.create_customer())["token"]
    tasks = tasks_of("grading", 3) + tasks_of("ranking", 2)
    pid = (await api.create_project(customer, tasks, redundancy=2))["project"]["id"]
    grader = await api.create_expert(["grading"])
    claim = await api.claim(grader["token"])
    assert claim is not None
    await api.submit(grader["token"], claim["assignmentId"], {"g": 1})
    claim = await api.claim(grader["token"])  # in flight
    assert claim is not None

    data = await api.gql(
        "query($p: ID!) { project(id: $p) { progressBySkill {"
        " skill total open claimed done failed canceled } } }",
        {"p": pid},
        customer,
    )
    assert data["project"]["progressBySkill"] == [
        {"skill": "grading", "total": 6, "open": 4, "claimed": 1, "done": 1, "failed": 0,
         "canceled": 0},
        {"skill": "ranking", "total": 4, "open": 4, "claimed": 0, "done": 0, "failed": 0,
         "canceled": 0},
    ]  # fmt: skip
