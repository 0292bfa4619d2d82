"""Exports through REST: a project's results as JSON Lines, CSV and Parquet, as of a position
of its change feed (reproducible after a retraction), with per-project expert pseudonyms,
scoped like every read of a project."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import asyncpg
import pytest

from ..helpers import ADMIN_TOKEN, Api

SKILL = "labeling"
LARGE = "x" * 20_000  # past the inline limit (16 KiB): kept in the blob store only


async def answer_all(api: Api, experts: list[dict[str, str]], answers: dict[str, Any]) -> None:
    """Each expert claims until nothing is left, answering by the payload's text."""
    for e in experts:
        while (c := await api.claim(e["token"], [SKILL])) is not None:
            text = c["task"]["payload"]["text"] if c["task"]["payload"] else "big"
            await api.submit(e["token"], c["assignmentId"], answers.get(text, {"label": "a"}))


async def project_of(api: Api, token: str, n: int, redundancy: int = 2, **kw: Any) -> str:
    tasks = [
        {"skill": SKILL, "payload": {"text": f"t{i}"}, "externalId": f"ext-{i}"} for i in range(n)
    ]
    created = await api.create_project(token, tasks, redundancy=redundancy, **kw)
    return str(created["project"]["id"])


async def export(
    api: Api, token: str, project_id: str, fmt: str = "jsonl", **params: str
) -> tuple[list[dict[str, Any]], str]:
    r = await api.rest(
        "GET", f"/v1/projects/{project_id}/export", token, params={"format": fmt, **params}
    )
    assert r.status_code == 200, r.text
    as_of = r.headers["x-taskroute-as-of"]
    if fmt == "jsonl":
        rows = [json.loads(line) for line in r.text.splitlines()]
    else:
        rows = list(csv.DictReader(io.StringIO(r.text)))
    return rows, as_of


async def test_jsonl_and_csv_rows_pseudonyms_and_gold(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    e1 = await api.create_expert([SKILL], "ann")
    e2 = await api.create_expert([SKILL], "bob")
    p1 = await project_of(api, customer["token"], 3)
    gold = await api.rest(
        "POST", f"/v1/projects/{p1}/gold", customer["token"],
        json={"tasks": [{"skill": SKILL, "payload": {"text": "g"}, "gold": {"label": "a"}}]},
    )  # fmt: skip
    assert gold.status_code == 201
    await db.execute("UPDATE project_quality SET gold_ratio = 0, exploration_gold_ratio = 0")
    await answer_all(api, [e1, e2], {"t1": {"label": "b"}})

    rows, as_of = await export(api, customer["token"], p1)
    assert [r["item_id"] for r in rows] == sorted(r["item_id"] for r in rows)
    assert {r["external_id"] for r in rows} == {"ext-0", "ext-1", "ext-2"}  # no gold item
    by_ext = {r["external_id"]: r for r in rows}
    r0 = by_ext["ext-0"]
    assert r0["as_of"] == as_of and r0["status"] == "resolved"
    assert r0["answer"] == {"label": "a"} and r0["method"] == "majority"
    assert r0["payload"] == {"text": "t0"} and r0["payload_url"] is None
    assert [a["answer"] for a in r0["answers"]] == [{"label": "a"}, {"label": "a"}]
    assert {a["retracted"] for a in r0["answers"]} == {False}
    # two different answers, no adjudicator yet: still adjudicating, so not exported
    assert "ext-1" not in by_ext or by_ext["ext-1"]["status"] == "resolved"

    # pseudonyms: stable within the project, never the real id, unlinkable across projects
    names = {a["expert"] for r in rows for a in r["answers"]}
    assert len(names) == 2 and not names & {e1["id"], e2["id"]}
    again, _ = await export(api, customer["token"], p1)
    assert {a["expert"] for r in again for a in r["answers"]} == names
    real, _ = await export(api, customer["token"], p1, expert_ids="real")
    assert {a["expert"] for r in real for a in r["answers"]} == {e1["id"], e2["id"]}
    p2 = await project_of(api, customer["token"], 1)
    await answer_all(api, [e1, e2], {})
    other, _ = await export(api, customer["token"], p2)
    assert {a["expert"] for r in other for a in r["answers"]}.isdisjoint(names)
    assert len({a["expert"] for r in other for a in r["answers"]}) == 2

    # CSV: the same rows, JSON-valued cells as JSON text
    csv_rows, csv_as_of = await export(api, customer["token"], p1, "csv")
    assert csv_as_of == as_of
    assert [r["item_id"] for r in csv_rows] == [r["item_id"] for r in rows]
    c0 = next(r for r in csv_rows if r["external_id"] == "ext-0")
    assert json.loads(c0["answer"]) == {"label": "a"} and c0["as_of"] == as_of
    assert json.loads(c0["answers"]) == [{**a} for a in r0["answers"]]
    assert c0["status"] == "resolved" and c0["payload_url"] == ""


async def test_as_of_reproduces_rows_after_a_retraction(api: Api) -> None:
    customer = await api.create_customer()
    e1 = await api.create_expert([SKILL], "ann")
    e2 = await api.create_expert([SKILL], "bob")
    project = await project_of(api, customer["token"], 4)
    await answer_all(api, [e1, e2], {})
    first, as_of = await export(api, customer["token"], project)
    assert len(first) == 4 and {r["status"] for r in first} == {"resolved"}

    data = await api.gql(
        'mutation($e: ID!) { retractLabels(expertId: $e, reason: "bad") { answers items } }',
        {"e": e2["id"]},
        ADMIN_TOKEN,
    )
    assert data["retractLabels"]["items"] == 4
    now, now_as_of = await export(api, customer["token"], project)
    assert now_as_of != as_of
    assert {r["status"] for r in now} == {"retracted"}
    assert all(r["answer"] is None for r in now)
    assert all(any(a["retracted"] for a in r["answers"]) for r in now)

    again, again_as_of = await export(api, customer["token"], project, as_of=as_of)
    assert again_as_of == as_of and again == first
    csv_then, _ = await export(api, customer["token"], project, "csv", as_of=as_of)
    assert [json.loads(r["answer"]) for r in csv_then] == [r["answer"] for r in first]

    # a relabel moves the head again; the first position still gives the first rows
    e3 = await api.create_expert([SKILL], "cy")
    await answer_all(api, [e3], {})
    relabelled, _ = await export(api, customer["token"], project)
    assert {r["status"] for r in relabelled} == {"resolved"}
    assert (await export(api, customer["token"], project, as_of=as_of))[0] == first
    assert (await export(api, customer["token"], project, as_of=now_as_of))[0] == now


async def test_large_payloads_are_signed_links_for_the_customer(api: Api) -> None:
    customer = await api.create_customer()
    e1 = await api.create_expert([SKILL], "ann")
    created = await api.create_project(
        customer["token"], [{"skill": SKILL, "payload": {"text": LARGE}}], redundancy=1
    )
    project = created["project"]["id"]
    await answer_all(api, [e1], {})
    rows, _ = await export(api, customer["token"], project)
    assert rows[0]["payload"] is None and rows[0]["payload_url"]
    got = await api.rest("GET", rows[0]["payload_url"], customer["token"])
    assert got.status_code == 200 and got.json() == {"text": LARGE}
    stranger = await api.create_customer("other")
    assert (await api.rest("GET", rows[0]["payload_url"], stranger["token"])).status_code == 404
    forged = rows[0]["payload_url"].replace("sig=", "sig=A")
    assert (await api.rest("GET", forged, customer["token"])).status_code == 404


async def test_scope_and_bad_input(api: Api) -> None:
    customer = await api.create_customer()
    other = await api.create_customer("other")
    p1 = await project_of(api, customer["token"], 1)
    p2 = await project_of(api, customer["token"], 1)
    url = f"/v1/projects/{p1}/export"
    assert (await api.rest("GET", url, other["token"])).status_code == 404
    data = await api.gql(
        "mutation($c: ID!, $p: ID!) { createCredential(customerId: $c, projectId: $p,"
        ' label: "p") { token } }',
        {"c": customer["id"], "p": p2},
        ADMIN_TOKEN,
    )
    scoped = data["createCredential"]["token"]
    assert (await api.rest("GET", url, scoped)).status_code == 404
    assert (await api.rest("GET", f"/v1/projects/{p2}/export", scoped)).status_code == 200

    for params, field in (
        ({"format": "xml"}, "format"),
        ({"expert_ids": "yes"}, "expert_ids"),
        ({"as_of": "not-a-cursor"}, "as_of"),
        ({"as_of": "999999"}, "as_of"),  # a number, but no change of this project
        ({"frist": "1"}, "frist"),
    ):
        r = await api.rest("GET", url, customer["token"], params=params)
        assert r.status_code == 422, (params, r.text)
        assert r.json()["error"]["details"]["field"] == field

    # an empty project: no rows, the start of the feed as its position
    r = await api.rest("GET", url, customer["token"])
    assert r.status_code == 200 and r.text == ""
    as_of = {"as_of": r.headers["x-taskroute-as-of"]}
    again = await api.rest("GET", url, customer["token"], params=as_of)
    assert again.status_code == 200 and again.text == ""


async def test_parquet(api: Api) -> None:
    customer = await api.create_customer()
    e1 = await api.create_expert([SKILL], "ann")
    project = await project_of(api, customer["token"], 3, redundancy=1)
    await answer_all(api, [e1], {})
    r = await api.rest("GET", f"/v1/projects/{project}/export", customer["token"],
                       params={"format": "parquet"})  # fmt: skip
    try:
        import pyarrow.parquet as pq
    except ImportError:
        assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "format"
        assert "pyarrow" in r.json()["error"]["message"]
        pytest.skip("pyarrow is not installed: the refusal was checked instead")
    assert r.status_code == 200, r.text
    table = pq.read_table(io.BytesIO(r.content))
    rows, as_of = await export(api, customer["token"], project)
    assert table.schema.metadata[b"taskroute.as_of"].decode() == as_of
    assert table.column("item_id").to_pylist() == [x["item_id"] for x in rows]
    assert [json.loads(a) for a in table.column("answer").to_pylist()] == [
        x["answer"] for x in rows
    ]
