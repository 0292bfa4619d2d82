"""A quote before committing (GraphQL `quote`, REST `POST /v1/projects?dry_run=true`): the
forecast the project would get if created now, the extra experts a deadline needs, the cost;
createProject's errors; and nothing written."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import asyncpg

from ..forecast_helpers import FORECAST_FIELDS, add_history, db_now, history_project, seen
from ..helpers import Api, GraphQLError, tasks_of

SKILL = "grading"
QUOTE = """query($i: CreateProjectInput!) { quote(input: $i) {
  items goldItems slots deadline eta etaEarly etaLate meetsDeadline
  bySkill { skill items slots presentExperts eta etaEarly etaLate extraExpertsNeeded reason }
  expectedGoldAnswers expectedAdjudications payCents baseCostCents goldCostCents
  adjudicationCostCents expectedCostCents } }"""


async def steady_expert(api: Api, db: asyncpg.Connection, customer: str) -> None:
    """An expert present now, with 10-minute cycles over the last hour (their history project
    is used up: the quoted batch is the only work left)."""
    hist = await history_project(api, customer, SKILL, 6)
    e = await api.create_expert([SKILL], name="steady")
    await add_history(db, hist, e["id"], SKILL, [55, 45, 35, 25, 15, 5], on_task=9)
    await seen(db, e["id"], 1)


async def table_rows(db: asyncpg.Connection) -> dict[str, int]:
    """Rows per table, but for the record of a token's first use (authentication's, not the
    quote's)."""
    tables = await db.fetch(
        "SELECT relname FROM pg_class WHERE relkind = 'r'"
        " AND relnamespace = 'public'::regnamespace AND relname <> 'credential_last_use'"
    )
    return {
        t["relname"]: await db.fetchval(f'SELECT count(*) FROM "{t["relname"]}"') for t in tables
    }


async def quote(api: Api, token: str, **fields: Any) -> dict[str, Any]:
    data = await api.gql(QUOTE, {"i": {"name": "q", **fields}}, token)
    return data["quote"]


async def test_quote_is_the_forecast_of_the_project_it_would_create(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    await steady_expert(api, db, customer["token"])
    now = await db_now(db)
    tasks = tasks_of(SKILL, 6)
    far = (now + timedelta(days=2)).isoformat()
    before = await table_rows(db)
    q = await quote(api, customer["token"], tasks=tasks, redundancy=2, deadline=far, payCents=25)
    assert await table_rows(db) == before  # nothing written
    assert q["items"] == 6 and q["slots"] == 12 and q["goldItems"] == 0
    assert q["meetsDeadline"] is True and q["eta"] is not None
    assert q["etaEarly"] <= q["eta"] <= q["etaLate"]
    (skill,) = q["bySkill"]
    assert skill["presentExperts"] == 1 and skill["extraExpertsNeeded"] == 0
    assert q["baseCostCents"] == 25 * 12 and q["goldCostCents"] == 0
    assert q["expectedCostCents"] == q["baseCostCents"] + q["adjudicationCostCents"]

    # created for real, the project's forecast says what the quote said (to the minute: the
    # test's own seconds pass between the two)
    created = await api.create_project(
        customer["token"], tasks, redundancy=2, deadline=far, payCents=25
    )
    data = await api.gql(
        f"query($p: ID!) {{ forecast(projectId: $p) {{ {FORECAST_FIELDS} }} }}",
        {"p": created["project"]["id"]},
        customer["token"],
    )
    real = data["forecast"]
    assert real["eta"][:16] == q["eta"][:16]
    assert real["bySkill"][0]["extraExpertsNeeded"] == 0

    # a deadline the one expert cannot meet: the verdict, and how many more it needs
    soon = (now + timedelta(minutes=40)).isoformat()
    tight = await quote(api, customer["token"], tasks=tasks, redundancy=2, deadline=soon)
    assert tight["meetsDeadline"] is False
    assert tight["bySkill"][0]["extraExpertsNeeded"] >= 2
    assert tight["eta"] == tight["bySkill"][0]["eta"]


async def test_cost_counts_gold_and_adjudication_overhead(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    tasks = tasks_of(SKILL, 9) + [{"skill": SKILL, "payload": {"g": 1}, "gold": {"label": "a"}}]
    q = await quote(api, customer["token"], tasks=tasks, redundancy=2, payCents=10)
    assert q["items"] == 9 and q["goldItems"] == 1 and q["slots"] == 18
    # a new project's default gold share is 0.1: 0.1 / 0.9 gold answers per real one
    assert abs(q["expectedGoldAnswers"] - 18 * 0.1 / 0.9) < 1e-6
    assert q["goldCostCents"] == round(10 * 18 * 0.1 / 0.9)
    assert q["expectedAdjudications"] == 0  # no history of this customer's yet
    # nobody holds the skill: no ETA, and the reason says so
    assert q["eta"] is None and "no present expert" in q["bySkill"][0]["reason"]

    # half of this customer's resolved items were adjudicated: half of the batch's will be
    project = (await api.create_project(customer["token"], tasks_of(SKILL, 2)))["project"]["id"]
    await db.execute(
        "INSERT INTO item_results (item_id, project_id, status, method, answers)"
        " SELECT id, project_id, 'resolved', m, 2 FROM (SELECT id, project_id,"
        " CASE WHEN row_number() OVER (ORDER BY id) = 1 THEN 'adjudicated' ELSE 'majority' END m"
        " FROM items WHERE project_id = $1) x",
        project,
    )
    q = await quote(api, customer["token"], tasks=tasks, redundancy=2, payCents=10)
    assert q["expectedAdjudications"] == 9 * 0.5
    assert q["adjudicationCostCents"] == round(10 * 4.5)
    single = await quote(api, customer["token"], tasks=tasks, redundancy=1, payCents=10)
    assert single["expectedAdjudications"] == 0


BAD_INPUTS: list[dict[str, Any]] = [
    {"tasks": [{"skill": SKILL, "payload": {}}], "redundancy": 9},
    {"tasks": [{"skill": "", "payload": {}}]},
    {"tasks": [{"skill": SKILL, "payload": {}, "externalId": "a"}] * 2},
    {"tasks": [], "deadline": "2020-01-01T00:00:00"},
    {"tasks": [{"skill": SKILL, "payload": {}}], "payCents": -1},
]


async def test_errors_are_create_projects(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    before = await table_rows(db)
    for bad in BAD_INPUTS:
        fields = {"name": "q", **bad}
        errors = []
        for op in ("quote", "create"):
            try:
                if op == "quote":
                    await api.gql(QUOTE, {"i": fields}, customer["token"])
                else:
                    await api.create_project(customer["token"], **fields)
            except GraphQLError as exc:
                errors.append((exc.code, exc.errors[0]["message"]))
        assert len(errors) == 2 and errors[0] == errors[1], (bad, errors)

    # REST: dry_run answers the quote, or createProject's error, and writes nothing
    body = {"name": "q", "tasks": [{"skill": SKILL, "payload": {}}], "redundancy": 2}
    r = await api.rest("POST", "/v1/projects?dry_run=true", customer["token"], json=body)
    assert r.status_code == 200 and r.json()["quote"]["slots"] == 2
    for bad in ({**body, "redundancy": 9}, {**body, "surprise": 1}):
        dry = await api.rest("POST", "/v1/projects?dry_run=true", customer["token"], json=bad)
        real = await api.rest("POST", "/v1/projects", customer["token"], json=bad)
        assert dry.status_code == real.status_code == 422 and dry.json() == real.json()
    r = await api.rest("POST", "/v1/projects?dry_run=maybe", customer["token"], json=body)
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "dry_run"
    assert await table_rows(db) == before
