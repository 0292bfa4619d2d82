"""/openapi.json documents every mounted /v1 route and nothing else, is a valid OpenAPI 3.1
document, and every route answers a valid request with a status it documents and a body
matching the schema documented for that status (refusals: the JSON error body)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import jsonschema_rs
import pytest
from openapi_spec_validator import validate as validate_spec
from starlette.routing import Route

from taskroute.server.app import create_app

from ..helpers import ADMIN_TOKEN, Api, InProcessServer, settings_for, tasks_of

METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE"}


def _mounted_v1(database_url: str, tmp_path: Path) -> set[tuple[str, str]]:
    app = create_app(settings_for(database_url, tmp_path))
    return {
        (method.lower(), r.path)
        for r in app.routes
        if isinstance(r, Route) and r.path.startswith("/v1/")
        for method in (r.methods or set()) & METHODS
    }


async def test_every_mounted_route_is_documented_and_nothing_else(
    database_url: str, tmp_path: Path, api: Api
) -> None:
    spec = (await api.http.get("/openapi.json")).json()
    documented = {(m, p) for p, ops in spec["paths"].items() for m in ops}
    mounted = _mounted_v1(database_url, tmp_path)
    assert mounted, "no /v1 routes found"
    assert mounted - documented == set(), "mounted but not documented"
    assert documented - mounted == set(), "documented but not mounted"
    validate_spec(spec)  # OpenAPI 3.1, its schemas included
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            for status, reply in op["responses"].items():
                if int(status) >= 400:
                    schema = reply["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/Error"}, (method, path)


class Checked:
    """Calls the API and checks each answer against the document: a documented status, and a
    body the schema of that status accepts."""

    def __init__(self, http: httpx.AsyncClient, spec: dict[str, Any]) -> None:
        self.http = http
        self.spec = spec
        self.seen: set[tuple[str, str, int]] = set()

    def _schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        ref = schema.get("$ref")
        if ref:
            return self.spec["components"]["schemas"][ref.rsplit("/", 1)[1]]  # type: ignore[no-any-return]
        return schema

    async def call(
        self, method: str, template: str, token: str, ids: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:  # fmt: skip
        op = self.spec["paths"][template][method.lower()]
        r = await self.http.request(
            method,
            template.format(**(ids or {})),
            headers={"Authorization": f"Bearer {token}"},
            follow_redirects=False,
            **kwargs,
        )
        where = f"{method} {template} -> {r.status_code}: {r.text[:300]}"
        assert str(r.status_code) in op["responses"], f"undocumented status: {where}"
        reply = op["responses"][str(r.status_code)]
        content = reply.get("content")
        if content is None:
            assert r.content == b"", where
        else:
            media = r.headers["content-type"].split(";")[0]
            assert media in content, f"undocumented media type {media}: {where}"
            body = content[media]
            schema = self._schema(body["schema"])
            if media == "application/json":
                errors = [e.message for e in jsonschema_rs.validator_for(schema).iter_errors(
                    r.json())]  # fmt: skip
                assert errors == [], f"{where}: {errors}"
            if "x-line-schema" in body:
                lines = jsonschema_rs.validator_for(body["x-line-schema"])
                for line in r.text.splitlines():
                    lines.validate(json.loads(line))
        for header in reply.get("headers", {}):
            assert header in r.headers, f"{where}: no {header}"
        self.seen.add((method.lower(), template, r.status_code))
        return r


@pytest.fixture
def small_inline(database_url: str, tmp_path: Path) -> Any:
    # webhooks to a loopback address (nothing listens: deliveries fail, which the log shows)
    return settings_for(database_url, tmp_path, inline_payload_bytes=64, webhook_allow_private=True)


async def test_every_route_answers_as_documented(small_inline: Any) -> None:
    srv = InProcessServer(small_inline)
    await srv.start()
    try:
        async with Api(srv.url) as api:
            await _walk_every_route(api)
    finally:
        await srv.stop()


async def _walk_every_route(api: Api) -> None:
    spec = (await api.http.get("/openapi.json")).json()
    c = Checked(api.http, spec)
    customer = (await api.create_customer())["token"]
    expert = await api.create_expert(["grading"])
    et = expert["token"]

    big = {"text": "x" * 200}  # over inline_payload_bytes: sent by signed URL
    r = await c.call("POST", "/v1/projects", customer, json={
        "name": "contract", "redundancy": 2, "payment_policy": "on_review",
        "tasks": [{"skill": "grading", "payload": big, "external_id": "a"}],
    })  # fmt: skip
    assert r.status_code == 201
    pid = r.json()["project_id"]
    many = [{"skill": "bulk", "payload": {"n": i}} for i in range(100)]
    r = await c.call("POST", "/v1/projects", customer, json={"name": "bulk", "tasks": many})
    assert r.status_code == 202
    bulk = r.json()["project_id"]
    await api.wait_ingested(customer, bulk)
    r = await c.call(
        "POST", "/v1/projects/{id}/tasks", customer, {"id": bulk}, json={"tasks": many[:100]}
    )  # noqa: E501
    assert r.status_code == 202
    await api.wait_ingested(customer, bulk)
    r = await c.call("POST", "/v1/projects/{id}/tasks", customer, {"id": pid},
                     json={"tasks": tasks_of("grading", 1)})  # fmt: skip
    assert r.status_code == 201
    r = await c.call("GET", "/v1/projects/{id}", customer, {"id": bulk})
    assert r.json()["ingest"]["state"] == "done"
    r = await c.call("POST", "/v1/projects/{id}/gold", customer, {"id": pid},
                     json={"tasks": [{"skill": "grading", "payload": {}, "gold": 1}]})  # fmt: skip
    assert r.status_code == 201
    r = await c.call("PUT", "/v1/projects/{id}/quality", customer, {"id": pid},
                     json={"gold_ratio": 0, "exploration_tasks": 0})  # fmt: skip
    assert r.status_code == 200
    await c.call("GET", "/v1/projects/{id}/quality", customer, {"id": pid})

    r = await c.call("POST", "/v1/tasks/next", et, json={"skills": ["grading"]})
    assert r.status_code == 200
    claim = r.json()
    aid = claim["assignment_id"]
    url = claim["task"]["payload_url"]
    assert url is not None
    r = await api.http.get(url, headers={"Authorization": f"Bearer {et}"})
    assert r.status_code == 200, r.text
    query = dict(httpx.URL(url).params)
    r = await c.call("GET", "/v1/payloads/{id}", et, {"id": aid}, params=query)
    assert r.status_code in (200, 307)
    await c.call("POST", "/v1/assignments/{id}/heartbeat", et, {"id": aid})
    await c.call("GET", "/v1/tasks/{id}/prior-answers", et, {"id": claim["task"]["id"]})
    r = await c.call("POST", "/v1/assignments/{id}/submit", et, {"id": aid}, json={"answer": 1})
    assert r.status_code == 200
    r = await c.call("POST", "/v1/assignments/{id}/submit", et, {"id": aid}, json={"answer": 1})
    assert r.status_code == 200  # idempotent: the same receipt
    # the second grading task: claim, submit, then reject it and approve the first
    r = await c.call("POST", "/v1/tasks/next", et, json={"skills": ["grading"]})
    second = r.json()["assignment_id"]
    await c.call("POST", "/v1/assignments/{id}/submit", et, {"id": second}, json={"answer": 2})
    r = await c.call("POST", "/v1/tasks/next", et, json={"skills": ["grading"]})
    assert r.status_code == 204
    await c.call("GET", "/v1/assignments/{id}/review", et, {"id": aid})
    await c.call("POST", "/v1/assignments/approve", customer, json={"assignment_ids": [aid]})
    await c.call("POST", "/v1/assignments/reject", customer,
                 json={"assignment_ids": [second], "reason": "wrong"})  # fmt: skip

    await _walk_newer_routes(api, c, customer, et, expert["id"], pid)

    await c.call("GET", "/v1/projects/{id}/results", customer, {"id": pid})
    await c.call("GET", "/v1/projects/{id}/result-changes", customer, {"id": pid},
                 params={"first": 1})  # fmt: skip
    r = await c.call("GET", "/v1/audit-log", customer, params={"first": 1})
    assert r.json()["entries"]
    await c.call("GET", "/v1/payouts.csv", customer, params={"project_id": pid})
    await c.call("GET", "/v1/payouts.csv", et, params={"expert_id": expert["id"]})
    await c.call("GET", "/v1/realtime/status", ADMIN_TOKEN)
    r = await c.call("GET", "/v1/realtime/status", customer)
    assert r.status_code == 404  # admin routes do not exist for others: the error body
    r = await c.call("GET", "/v1/projects/{id}", customer, {"id": str(uuid.uuid4())})
    assert r.status_code == 404

    answered = {(m, p) for m, p, status in c.seen if status < 300}
    documented = {(m, p) for p, ops in spec["paths"].items() for m in ops}
    assert documented - answered == set(), "routes never answered a valid request"


PAIRWISE = {
    "type": "object",
    "properties": {"winner": {"enum": ["a", "b", "tie"]}},
    "required": ["winner"],
}


async def _walk_newer_routes(
    api: Api, c: Checked, customer: str, et: str, expert_id: str, pid: str
) -> None:
    """Quotes, instructions, layouts and review by experts, releases, bonuses, exports and
    webhooks."""
    r = await c.call("POST", "/v1/projects", customer, params={"dry_run": "true"}, json={
        "name": "quote", "deadline": "2100-01-01T00:00:00Z", "redundancy": 2,
        "tasks": [*tasks_of("grading", 3), {"skill": "grading", "payload": {}, "gold": 1}],
    })  # fmt: skip
    assert r.status_code == 200 and r.json()["quote"]["gold_items"] == 1

    # PAIRWISE with review by experts: the claim's candidates, then the review's claim
    r = await c.call("POST", "/v1/projects", customer, json={
        "name": "pairs", "layout": "PAIRWISE", "answer_schema": PAIRWISE,
        "candidate_keys": ["x", "y"], "payment_policy": "on_review", "expert_review": True,
        "review_pay_cents": 1, "min_seconds_per_task": 60, "max_items_per_expert": 5,
        "too_fast_policy": "exclude", "flag_after_bad_item_releases": 3,
        "tasks": [{"skill": "judge", "payload": {"x": "left", "y": "right"}}],
    })  # fmt: skip
    pairs = r.json()["project_id"]
    r = await c.call("GET", "/v1/projects/{id}", customer, {"id": pairs})
    assert r.json()["candidate_keys"] == ["x", "y"] and r.json()["expert_review"] is True
    guide = {"markdown": "# Pick the better one", "allow_remote_images": True}
    r = await c.call("PUT", "/v1/projects/{id}/instructions", customer, {"id": pairs}, json=guide)
    assert r.json()["version"] == 1
    judge = (await api.create_expert(["judge"], name="judge"))["token"]
    reviewer = (await api.create_expert(["review:judge"], name="reviewer"))["token"]
    r = await c.call("POST", "/v1/tasks/next", judge, json={})
    task = r.json()["task"]
    assert task["layout"] == "PAIRWISE" and task["candidate_order"] in ("ab", "ba")
    assert task["instructions"]["version"] == 1
    judged = r.json()["assignment_id"]
    await c.call("POST", "/v1/assignments/{id}/submit", judge, {"id": judged},
                 json={"answer": {"winner": "a"}})  # fmt: skip
    r = await c.call("POST", "/v1/tasks/next", reviewer, json={})
    assert r.json()["task"]["review_of"]["answer"] == {"winner": "a"}
    verdict = {"answer": {"verdict": "accept"}}
    review = {"id": r.json()["assignment_id"]}
    await c.call("POST", "/v1/assignments/{id}/submit", reviewer, review, json=verdict)
    r = await c.call("GET", "/v1/assignments/{id}/review", customer, {"id": judged})
    assert r.json()["candidate_order"] in ("ab", "ba") and r.json()["too_fast"] is True

    # a release
    r = await c.call("POST", "/v1/projects", customer, json={
        "name": "skip", "tasks": tasks_of("grading", 1)
    })  # fmt: skip
    r = await c.call("POST", "/v1/tasks/next", et, json={"skills": ["grading"]})
    r = await c.call("POST", "/v1/assignments/{id}/release", et,
                     {"id": r.json()["assignment_id"]}, json={"reason": "SKIP"})  # fmt: skip
    assert r.status_code == 200 and r.json()["reason"] == "SKIP"

    # a bonus to an expert who worked on the project
    for _ in range(2):  # idempotent per key
        r = await c.call("POST", "/v1/projects/{id}/bonuses", customer, {"id": pid}, json={
            "expert_id": expert_id, "amount_cents": 50, "reason": "thanks",
            "idempotency_key": "k1",
        })  # fmt: skip
        assert r.status_code == 200

    # an export whose payload is in the blob store, and the payload behind its link
    big = {"text": "y" * 200}
    r = await c.call("POST", "/v1/projects", customer, json={
        "name": "export", "tasks": [{"skill": "grading", "payload": big, "external_id": "e"}]
    })  # fmt: skip
    exported = r.json()["project_id"]
    r = await c.call("POST", "/v1/tasks/next", et, json={"skills": ["grading"]})
    await c.call("POST", "/v1/assignments/{id}/submit", et, {"id": r.json()["assignment_id"]},
                 json={"answer": 3})  # fmt: skip
    r = await c.call("GET", "/v1/projects/{id}/export", customer, {"id": exported},
                     params={"expert_ids": "real"})  # fmt: skip
    as_of = r.headers["x-taskroute-as-of"]
    (row,) = [json.loads(line) for line in r.text.splitlines()]
    assert row["payload_url"] is not None and row["answers"][0]["expert"] == expert_id
    link = httpx.URL(row["payload_url"])
    r = await c.call("GET", "/v1/items/{id}/payload", customer, {"id": row["item_id"]},
                     params=dict(link.params))  # fmt: skip
    assert r.status_code == 200 and r.json() == big
    r = await c.call("GET", "/v1/projects/{id}/export", customer, {"id": exported},
                     params={"format": "csv", "as_of": as_of})  # fmt: skip
    assert r.status_code == 200 and r.text.startswith("as_of,item_id")

    # webhooks, every route
    r = await c.call("POST", "/v1/webhooks", customer, json={
        "url": "http://127.0.0.1:9/hook", "event_types": ["item.result.resolved"],
        "project_id": pid, "description": "contract",
    })  # fmt: skip
    assert r.status_code == 201
    wid = {"id": r.json()["endpoint"]["id"]}
    await c.call("GET", "/v1/webhooks", customer)
    await c.call("GET", "/v1/webhooks/{id}", customer, wid)
    await c.call("PATCH", "/v1/webhooks/{id}", customer, wid,
                 json={"description": "renamed", "enabled": True})  # fmt: skip
    r = await c.call("POST", "/v1/webhooks/{id}/ping", customer, wid)
    assert r.status_code == 202
    ids = {**wid, "event_id": r.json()["event_id"]}
    r = await c.call("GET", "/v1/webhooks/{id}/deliveries", customer, wid, params={"first": 10})
    assert r.json()["deliveries"]
    await c.call("GET", "/v1/webhooks/{id}/deliveries/{event_id}", customer, ids)
    await c.call("POST", "/v1/webhooks/{id}/deliveries/{event_id}/redeliver", customer, ids)
    await c.call("POST", "/v1/webhooks/{id}/replay", customer, wid, json={})
    await c.call("POST", "/v1/webhooks/{id}/rotate-secret", customer, wid)
    await c.call("POST", "/v1/webhooks/{id}/disable", customer, wid)
    r = await c.call("DELETE", "/v1/webhooks/{id}", customer, wid)
    assert r.status_code == 204
    r = await c.call("GET", "/v1/webhooks", et)
    assert r.status_code == 404  # experts have no webhooks: the error body
