"""Request ids, JSON logs, health and readiness, Prometheus metrics."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator

import asyncpg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from taskroute.observability.logs import JsonFormatter
from taskroute.server import metrics

from ..clock import DbClock
from ..helpers import ADMIN_TOKEN, Api, tasks_of, wait_for


async def scrape(api: Api) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = await api.http.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_request_id_in_and_out(api: Api) -> None:
    r = await api.http.get("/healthz", headers={"X-Request-ID": "abc-123.x"})
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    assert r.headers["x-request-id"] == "abc-123.x"
    r = await api.http.get("/healthz")
    assert re.fullmatch(r"[0-9a-f]{32}", r.headers["x-request-id"])
    for bad in ("has space", "x" * 200, "new\\nline"):
        r = await api.http.get("/healthz", headers={"X-Request-ID": bad})
        assert re.fullmatch(r"[0-9a-f]{32}", r.headers["x-request-id"])
    # Error responses carry it too (GraphQL and REST).
    r = await api.http.post("/v1/tasks/next", headers={"X-Request-ID": "rest-err"})
    assert r.status_code == 401 and r.headers["x-request-id"] == "rest-err"
    headers = {
        "X-Request-ID": "gql-err",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {ADMIN_TOKEN}",
    }
    r = await api.http.post("/graphql", content=b"{", headers=headers)
    assert r.status_code == 400 and r.headers["x-request-id"] == "gql-err"


@pytest.fixture
def json_lines() -> Iterator[list[str]]:
    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Capture()
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("taskroute")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield lines
    logger.removeHandler(handler)
    logger.setLevel(old_level)


async def test_access_log_is_json_with_request_id(api: Api, json_lines: list[str]) -> None:
    await api.http.get("/readyz", headers={"X-Request-ID": "trace-me-1"})
    entries = [json.loads(line) for line in json_lines]
    mine = [e for e in entries if e.get("request_id") == "trace-me-1"]
    assert mine, entries
    access = mine[-1]
    assert access["logger"] == "taskroute.access"
    assert access["status"] == 200 and access["route"] == "/readyz"
    assert access["msg"] == "GET /readyz 200" and isinstance(access["ms"], float)
    # GraphQL's requests skip most of the middleware stack (app.App): logged all the same
    await api.http.post(
        "/graphql", json={"query": "{ __typename }"},
        headers={"X-Request-ID": "trace-me-2", "Authorization": f"Bearer {ADMIN_TOKEN}"},
    )  # fmt: skip
    entries = [json.loads(line) for line in json_lines]
    access = [e for e in entries if e.get("request_id") == "trace-me-2"][-1]
    assert access["logger"] == "taskroute.access"
    assert access["status"] == 200 and access["route"] == "/graphql"
    assert access["msg"] == "POST /graphql 200"


async def test_readyz_reports_checks(api: Api) -> None:
    r = await api.http.get("/readyz")
    assert r.status_code == 200
    assert r.json() == {
        "status": "ready",
        "checks": {"database": "ok", "listener": "ok", "accepting": "ok"},
    }


async def test_metrics_need_a_scraper_token(api: Api) -> None:
    """/metrics names customers' skills and backlogs: never served anonymously."""
    customer = await api.create_customer()
    for headers in (
        {},
        {"Authorization": "Bearer nope"},
        {"Authorization": f"Bearer {customer['token']}"},
    ):
        r = await api.http.get("/metrics", headers=headers)
        assert r.status_code == 401, headers
        assert r.json()["error"]["code"] == "UNAUTHENTICATED"
        assert "taskroute_" not in r.text


async def test_metrics(
    api: Api, db: asyncpg.Connection, clock: DbClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics, "DB_GAUGE_TTL", 0.0)  # refresh the database gauges every scrape
    before = await scrape(api)
    customer = await api.create_customer()
    expert = await api.create_expert(["obs"])
    idle = await api.create_expert(["obs-none"], name="idle")
    await api.create_project(customer["token"], tasks_of("obs", 3), leaseSeconds=60)

    mid = await scrape(api)
    assert value(mid, "taskroute_open_tasks", skill="obs") == 3

    claim = await api.claim(expert["token"])
    assert claim is not None
    assert await api.claim(expert["token"]) == claim  # the held claim, handed back
    assert await api.claim(idle["token"]) is None
    await api.submit(expert["token"], claim["assignmentId"], {"ok": True})
    second = await api.claim(expert["token"])
    assert second is not None
    # The lease runs out; the sweeper (every 0.2 s in tests) returns the task.
    await clock.advance(61)
    await wait_for(
        lambda: db.fetchval("SELECT count(*) FROM assignments WHERE status = 'expired'"),
        "the sweeper to expire the lease",
    )
    await db.execute(
        "UPDATE projects SET status = 'ingesting', created_at = now() - '30 s'::interval"
    )

    after = await scrape(api)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("taskroute_claims_total", outcome="new") == 2
    assert delta("taskroute_claims_total", outcome="held") == 1
    assert delta("taskroute_claims_empty_total") == 1
    assert delta("taskroute_submit_seconds_count", outcome="ok") == 1
    assert delta("taskroute_lease_expiries_total", result="open") == 1
    assert value(after, "taskroute_open_tasks", skill="obs") == 2  # one done, two open again
    assert value(after, "taskroute_ingest_lag_seconds") >= 30
    assert value(after, "taskroute_db_pool_connections", state="total") >= 1
    # every claim and the submit took a database slot, and said how long they waited for it
    assert delta("taskroute_admission_wait_seconds_count", priority="claim") >= 4
    assert delta("taskroute_admission_wait_seconds_count", priority="protect") >= 1
    assert delta("taskroute_admission_hold_seconds_count", priority="claim") >= 4
    assert delta("taskroute_admission_hold_seconds_sum", priority="protect") > 0
    assert delta("taskroute_http_requests_total", method="POST", route="/graphql",
                 status="200") >= 8  # fmt: skip


async def test_event_loop_lag_is_measured_all_the_time(api: Api) -> None:
    """Each process times a 100 ms timer: its lateness is the wait every request there shares."""
    before = value(await scrape(api), "taskroute_event_loop_lag_seconds_count")

    async def fired_three_more_times() -> bool:
        return value(await scrape(api), "taskroute_event_loop_lag_seconds_count") >= before + 3

    await wait_for(fired_three_more_times, "the event-loop lag timer to fire")


async def test_background_job_passes_are_timed(api: Api) -> None:
    """Every periodic job's passes are counted and timed by job: a pass that runs long takes
    a connection and Postgres from requests, and /metrics says which job it was."""
    jobs = ("lease sweeper", "routing", "deadline alerts", "task-count compaction")

    async def each_ran() -> bool:
        samples = await scrape(api)
        return all(value(samples, "taskroute_job_pass_seconds_count", job=j) >= 1 for j in jobs)

    await wait_for(each_ran, "a timed pass of every periodic job")
    samples = await scrape(api)
    assert all(value(samples, "taskroute_job_pass_seconds_sum", job=j) > 0 for j in jobs)
