"""A receiver that answers 500, then refuses connections, gets every event once it is back
(retries driven by the database clock, never by sleeping); the delivery log shows each
attempt; an endpoint failing for longer than TASKROUTE_WEBHOOK_DISABLE_AFTER is disabled with
a reason; redelivery and replay from a change-feed cursor send the same ids again; at most
TASKROUTE_WEBHOOK_ENDPOINT_CONCURRENCY attempts are in flight per endpoint."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncpg

from taskroute.db.queries import Q

from ..clock import DbClock
from ..helpers import serving, settings_for, tasks_of, wait_for
from .receiver import Receiver
from .world import change_cursors, create_endpoint, work_through

LOG = """query($e: ID!) { webhookDeliveries(endpointId: $e) { edges { node {
  eventId eventType state attempts lastStatus lastError nextAttemptAt } } } }"""
ONE = """query($e: ID!, $i: ID!) { webhookDelivery(endpointId: $e, eventId: $i) {
  state attempts attemptLog { attempt status error latencyMs } } }"""


def settings(database_url: str, tmp_path: Path, **more: Any) -> Any:
    base = {"webhook_allow_private": True, "webhook_interval": 0.05} | more
    return settings_for(database_url, tmp_path, **base)


async def pending_due_later(db: asyncpg.Connection, n: int) -> bool:
    """n deliveries failed at least once and wait for their next attempt."""
    got = await db.fetchval(
        "SELECT count(*) FROM webhook_deliveries WHERE state = 'pending' AND attempts >= 1"
        " AND lease_token IS NULL AND next_attempt_at > taskroute_now()"
    )
    return bool(got == n)


async def test_a_receiver_down_for_a_while_gets_every_event_after_it_returns(
    database_url: str, tmp_path: Path, db: asyncpg.Connection, clock: DbClock
) -> None:
    receiver = Receiver(status=500)
    await receiver.up()
    async with serving(settings(database_url, tmp_path)) as api:
        customer = await api.create_customer()
        expert = await api.create_expert(["grading"])
        made = await create_endpoint(api, customer["token"], receiver.url, ["item.result.resolved"])
        endpoint = made["endpoint"]["id"]
        project = (await api.create_project(customer["token"], tasks_of("grading", 4)))["project"]
        await work_through(api, expert["token"], 2)
        # answered 500: attempted once each, then waiting
        await wait_for(lambda: pending_due_later(db, 2), "two failed deliveries")
        log = (await api.gql(LOG, {"e": endpoint}, customer["token"]))["webhookDeliveries"]
        nodes = [e["node"] for e in log["edges"]]
        assert {(n["state"], n["lastStatus"]) for n in nodes} == {("pending", 500)}
        assert all(n["nextAttemptAt"] and "HTTP 500" in n["lastError"] for n in nodes)
        # now refusing connections, and two more events
        await receiver.down()
        await work_through(api, expert["token"], 2)
        await clock.advance(3600)  # past every back-off: all four are due and fail again
        await wait_for(
            lambda: db.fetchval(
                "SELECT count(*) = 4 FROM webhook_deliveries WHERE lease_token IS NULL"
                " AND last_status IS NULL AND last_error IS NOT NULL AND state = 'pending'"
            ),
            "four refused attempts",
        )
        one = nodes[0]["eventId"]
        attempts = await api.gql(ONE, {"e": endpoint, "i": one}, customer["token"])
        attempt_log = attempts["webhookDelivery"]["attemptLog"]
        assert [a["status"] for a in attempt_log] == [500, None]
        assert attempt_log[1]["error"]
        # back, answering 200: every event arrives once the retries are due
        receiver.status = 200
        await receiver.up()
        await clock.advance(3 * 3600)
        await wait_for(lambda: len(set(receiver.ok_ids())) == 4, "four events delivered")
        assert len(receiver.ok_ids()) == 4  # none twice
        expected = await change_cursors(api, customer["token"], project["id"])
        got = [r.json["data"]["cursor"] for r in receiver.received if r.id in receiver.ok_ids()]
        assert sorted(set(got)) == sorted(expected)
        healthy = await db.fetchrow("SELECT failing_since, status FROM webhook_endpoints")
        assert healthy["failing_since"] is None and healthy["status"] == "enabled"
    await receiver.down()


async def test_an_endpoint_failing_for_days_is_disabled_with_a_reason(
    database_url: str, tmp_path: Path, db: asyncpg.Connection, clock: DbClock
) -> None:
    receiver = Receiver(status=503)
    await receiver.up()
    cfg = settings(database_url, tmp_path, webhook_disable_after=2 * 86400.0)
    async with serving(cfg) as api:
        customer = await api.create_customer()
        expert = await api.create_expert(["grading"])
        made = await create_endpoint(api, customer["token"], receiver.url, ["item.result.resolved"])
        await api.create_project(customer["token"], tasks_of("grading", 1))
        await work_through(api, expert["token"], 1)
        query = "query($e: ID!) { webhookEndpoint(id: $e) { status disabledReason failingSince } }"

        async def status() -> dict[str, Any]:
            got = await api.gql(query, {"e": made["endpoint"]["id"]}, customer["token"])
            return dict(got["webhookEndpoint"])

        await wait_for(lambda: pending_due_later(db, 1), "a failed delivery")
        assert (await status())["failingSince"] is not None
        # a day later: still retried, still enabled
        await clock.advance(86400)
        await wait_for(
            lambda: db.fetchval(
                "SELECT attempts >= 2 AND lease_token IS NULL FROM webhook_deliveries"
            ),
            "a retry",
        )
        assert (await status())["status"] == "enabled"
        await clock.advance(2 * 86400)
        got = await wait_for(
            lambda: _disabled(status), "the endpoint disabled after failing for days"
        )
        assert "HTTP 503" in got["disabledReason"], got
        tries = len(receiver.received)
        await clock.advance(86400)
        # disabled: nothing is claimed for it any more (the claim itself says so)
        assert await claim_now(database_url) == []
        assert len(receiver.received) == tries
    await receiver.down()


async def _disabled(status: Any) -> Any:
    got = await status()
    return got if got["status"] == "disabled" else None


async def claim_now(database_url: str, per_endpoint: int = 4) -> list[Any]:
    """What a sender's claim would take now (rolled back: nothing is leased)."""
    conn = await asyncpg.connect(database_url)
    try:
        tx = conn.transaction()
        await tx.start()
        rows = await conn.fetch(Q["webhook_claim"], 100, per_endpoint, 60)
        await tx.rollback()
        return list(rows)
    finally:
        await conn.close()


async def test_redelivery_and_replay_send_the_same_ids_again(
    database_url: str, tmp_path: Path, db: asyncpg.Connection
) -> None:
    receiver = Receiver()
    await receiver.up()
    async with serving(settings(database_url, tmp_path)) as api:
        customer = await api.create_customer()
        expert = await api.create_expert(["grading"])
        made = await create_endpoint(api, customer["token"], receiver.url, ["item.result.resolved"])
        endpoint = made["endpoint"]["id"]
        project = (await api.create_project(customer["token"], tasks_of("grading", 4)))["project"]
        await work_through(api, expert["token"], 4)
        await wait_for(lambda: len(receiver.ok_ids()) == 4, "four events")
        first = list(receiver.ok_ids())
        # redeliver one (REST)
        r = await api.rest(
            "POST", f"/v1/webhooks/{endpoint}/deliveries/{first[0]}/redeliver", customer["token"]
        )
        assert r.status_code == 202, r.text
        await wait_for(lambda: len(receiver.ok_ids()) == 5, "the redelivery")
        assert receiver.ok_ids()[4] == first[0]
        # replay after the second change of the feed: the last two again, same ids and cursors
        cursors = await change_cursors(api, customer["token"], project["id"])
        replay = await api.gql(
            "mutation($e: ID!, $a: String) { replayWebhookEvents(endpointId: $e, after: $a) {"
            " queued endCursor hasMore } }",
            {"e": endpoint, "a": cursors[1]},
            customer["token"],
        )
        assert replay["replayWebhookEvents"] == {
            "queued": 2,
            "endCursor": cursors[3],
            "hasMore": False,
        }
        await wait_for(lambda: len(receiver.ok_ids()) == 7, "the replay")
        replayed = receiver.received[-2:]
        assert sorted(r.json["data"]["cursor"] for r in replayed) == sorted(cursors[2:])
        by_cursor = {r.json["data"]["cursor"]: r.id for r in receiver.received[:4]}
        assert all(by_cursor[r.json["data"]["cursor"]] == r.id for r in replayed)
        # the ping: a webhook.test event
        ping = await api.rest("POST", f"/v1/webhooks/{endpoint}/ping", customer["token"])
        assert ping.status_code == 202
        await wait_for(lambda: ping.json()["event_id"] in receiver.ok_ids(), "the ping")
        assert receiver.received[-1].json["type"] == "webhook.test"
    await receiver.down()


async def test_attempts_in_flight_per_endpoint_are_bounded(
    database_url: str, tmp_path: Path, db: asyncpg.Connection
) -> None:
    receiver = Receiver(gate=asyncio.Event())
    await receiver.up()
    cfg = settings(database_url, tmp_path, webhook_endpoint_concurrency=2)
    async with serving(cfg) as api:
        customer = await api.create_customer()
        expert = await api.create_expert(["grading"])
        await create_endpoint(api, customer["token"], receiver.url, ["item.result.resolved"])
        await api.create_project(customer["token"], tasks_of("grading", 6))
        await work_through(api, expert["token"], 6)
        await wait_for(lambda: receiver.in_flight == 2, "two attempts held by the receiver")
        # four more are due, but a claim now takes none of them
        assert await claim_now(database_url, per_endpoint=2) == []
        assert receiver.in_flight == 2
        assert receiver.gate is not None
        receiver.gate.set()
        await wait_for(lambda: len(set(receiver.ok_ids())) == 6, "all six")
        assert receiver.most_in_flight == 2
    await receiver.down()
