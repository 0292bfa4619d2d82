"""Realtime over real WebSockets against real Postgres: wake-ups, progress, auth, robustness."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import asyncpg
import pytest
import pytest_asyncio

from taskroute.realtime import notify
from taskroute.realtime.backend import LISTENER_APPLICATION_NAME
from taskroute.realtime.channels import skill_channel, tasks_payloads
from taskroute.realtime.hub import Hub, TaskWaiter
from taskroute.realtime.tickets import Ticket

from ..clock import DbClock
from ..helpers import (
    ADMIN_TOKEN,
    Api,
    DbRoute,
    InProcessServer,
    serving,
    settings_for,
    tasks_of,
    wait_for,
)
from ..procs import ServeProcess
from ..ws import LEGACY_WS, PROJECT_PROGRESS, TASK_AVAILABLE, TRANSPORT_WS, Rejected, WsClient

REPO = Path(__file__).resolve().parents[2]


async def realtime_status(api: Api) -> dict[str, Any]:
    r = await api.rest("GET", "/v1/realtime/status", ADMIN_TOKEN)
    assert r.status_code == 200, r.text
    return r.json()


async def wait_for_waiters(api: Api, n: int, key: str = "task_waiters") -> dict[str, Any]:
    """Until the server reports `n` started subscriptions (so none is still starting)."""
    deadline = asyncio.get_running_loop().time() + 60
    while asyncio.get_running_loop().time() < deadline:
        body = await realtime_status(api)
        if body.get(key) == n:
            return body
        await asyncio.sleep(0.02)
    raise AssertionError(f"server never reached {key}={n}: {body}")


async def tickets_settled(api: Api, heard: int) -> dict[str, Any]:
    """Until the server has heard `heard` wake tickets and none is waiting for or in a take:
    every wake-up they cause has been handed out (and counted in `wakeups`)."""

    async def settled() -> dict[str, Any] | None:
        body = await realtime_status(api)
        tickets = body["wake_tickets"]
        return body if tickets["heard"] >= heard and tickets["settled"] else None

    return await wait_for(settled, f"{heard} wake tickets heard and settled")


async def subscribe_tasks(
    api: Api, token: str, skills: list[str] | None = None, protocol: str = TRANSPORT_WS
) -> WsClient:
    client = WsClient(api.base_url, token, protocol)
    await client.open()
    await client.subscribe(TASK_AVAILABLE, {"s": skills})
    return client


# --- wake on new task ------------------------------------------------------------------


@pytest.mark.parametrize("protocol", [TRANSPORT_WS, LEGACY_WS])
async def test_new_task_wakes_subscriber(api: Api, protocol: str) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    sub = await subscribe_tasks(api, expert["token"], ["grading"], protocol)
    try:
        await wait_for_waiters(api, 1)
        created = await api.create_project(customer["token"], tasks_of("grading", 1))
        event = await sub.next()
        assert event["data"]["taskAvailable"] == {
            "skill": "grading",
            "projectId": created["project"]["id"],
            "recheck": False,
        }
        # The hint is true: the claim it prompts succeeds.
        assert await api.claim(expert["token"]) is not None
    finally:
        await sub.close()
    await wait_for_waiters(api, 0)


async def test_open_task_at_subscribe_time_is_not_missed(api: Api) -> None:
    """A task that opened between an empty claim and the subscription still produces a hint."""
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    created = await api.create_project(customer["token"], tasks_of("grading", 1))
    async with WsClient(api.base_url, expert["token"]) as sub:
        await sub.subscribe(TASK_AVAILABLE, {"s": None})
        event = await sub.next()
    assert event["data"]["taskAvailable"]["projectId"] == created["project"]["id"]


async def test_no_wake_for_other_skills(api: Api) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading", "ranking"])
    sub = await subscribe_tasks(api, expert["token"], ["grading"])
    try:
        await wait_for_waiters(api, 1)
        # Another skill (one the expert even holds, but did not subscribe to), then ours:
        # NOTIFYs arrive in commit order, so the first event must be for "grading".
        await api.create_project(customer["token"], tasks_of("ranking", 3), name="other")
        await api.create_project(customer["token"], tasks_of("translation", 3), name="other2")
        ours = await api.create_project(customer["token"], tasks_of("grading", 1), name="ours")
        event = await sub.next()
        assert event["data"]["taskAvailable"]["skill"] == "grading"
        assert event["data"]["taskAvailable"]["projectId"] == ours["project"]["id"]
    finally:
        await sub.close()


async def test_subscription_input_errors(api: Api) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    async with WsClient(api.base_url, expert["token"]) as ws:
        await ws.subscribe(TASK_AVAILABLE, {"s": ["not held"]})
        first = await ws.next()
        assert first["errors"][0]["extensions"]["code"] == "BAD_INPUT"
        await ws.subscribe(TASK_AVAILABLE, {"s": ["cooking"]})
        second = await ws.next()
        assert second["errors"][0]["extensions"]["code"] == "BAD_INPUT"
    # A customer is not an expert.
    async with WsClient(api.base_url, customer["token"]) as ws:
        await ws.subscribe(TASK_AVAILABLE, {"s": None})
        third = await ws.next()
        assert third["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    assert (await realtime_status(api))["task_waiters"] == 0


# The same selection twice: as written (served by the lean graphql-transport-ws path,
# schema/realtime_ws.py) and through a fragment (which that path leaves to strawberry).
LEAN = (
    "subscription($s: [String!]) { t: taskAvailable(skills: $s) {"
    " __typename s: skill projectId recheck } }"
)
THROUGH_STRAWBERRY = (
    "subscription($s: [String!]) { t: taskAvailable(skills: $s) { ...F } }"
    " fragment F on TaskAvailable { __typename s: skill projectId recheck }"
)


async def test_lean_task_available_answers_as_strawberry_does(api: Api) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading", "labeling"])
    await api.create_project(customer["token"], tasks_of("grading", 1), name="open")

    async def answers(token: str, variables: Any, n: int, then: Any = None) -> list[Any]:
        got = []
        for query in (LEAN, THROUGH_STRAWBERRY):
            async with WsClient(api.base_url, token) as ws:
                await ws.subscribe(query, variables)
                if then is not None:
                    await wait_for_waiters(api, 1)
                    await then()
                got.append([await ws.message() for _ in range(n)])
            await wait_for_waiters(api, 0)
            if then is not None:  # woken for the project just opened (a new one each run)
                hint = got[-1][0]["payload"]["data"]["t"]
                assert hint["projectId"] == labeling[-1]
                hint["projectId"] = "the project opened"
                # the woken expert takes the task: not open for the next run
                assert await api.claim(token, ["labeling"]) is not None
        assert got[0] == got[1], got
        return got[0]

    # a task already open (the catch-up), and one opened while subscribed
    opened = await answers(expert["token"], {"s": ["grading"]}, 1)
    assert opened[0]["payload"]["data"]["t"]["__typename"] == "TaskAvailable"
    labeling: list[str] = []

    async def open_labeling() -> None:
        name = f"l{len(labeling)}"
        created = await api.create_project(customer["token"], tasks_of("labeling", 1), name=name)
        labeling.append(created["project"]["id"])

    woken = await answers(expert["token"], {"s": ["labeling"]}, 1, then=open_labeling)
    assert woken[0]["payload"]["data"]["t"]["recheck"] is False
    # refusals: a skill not held, a malformed skill, a customer, a variable of the wrong type
    for token, variables, code in (
        (expert["token"], {"s": ["cooking"]}, "BAD_INPUT"),
        (expert["token"], {"s": ["not held"]}, "BAD_INPUT"),
        (customer["token"], {"s": None}, "NOT_FOUND"),
        (expert["token"], {"s": 5}, "BAD_INPUT"),
    ):
        refused = await answers(token, variables, 1)
        payload = refused[0]["payload"]
        errors = payload if isinstance(payload, list) else payload["errors"]
        assert errors[0]["extensions"]["code"] == code
    # a refusal is followed by `complete` on both paths
    done = await answers(expert["token"], {"s": ["cooking"]}, 2)
    assert done[1] == {"id": "1", "type": "complete"}


async def test_only_experts_good_enough_are_woken(api: Api) -> None:
    customer = await api.create_customer()
    novice = await api.create_expert([{"skill": "grading", "quality": 0.5}], name="novice")
    master = await api.create_expert([{"skill": "grading", "quality": 0.95}], name="master")
    # The novice subscribes first, so a quality-blind rotation would wake them first.
    low = await subscribe_tasks(api, novice["token"], ["grading"])
    await wait_for_waiters(api, 1)
    high = await subscribe_tasks(api, master["token"], ["grading"])
    try:
        await wait_for_waiters(api, 2)
        hard = await api.create_project(
            customer["token"], tasks_of("grading", 1), name="hard", minQuality=0.9
        )
        event = await high.next()
        assert event["data"]["taskAvailable"]["projectId"] == hard["project"]["id"]
        easy = await api.create_project(customer["token"], tasks_of("grading", 1), name="easy")
        # The novice's first event is the easy task: the hard one never woke them.
        event = await low.next()
        assert event["data"]["taskAvailable"]["projectId"] == easy["project"]["id"]
    finally:
        await low.close()
        await high.close()


# --- fairness and no thundering herd -----------------------------------------------------


class Collector:
    """Reads every subscriber in the background; `events[i]` is what subscriber i received."""

    def __init__(self, subs: list[WsClient]) -> None:
        self.subs = subs
        self.events: list[list[dict[str, Any]]] = [[] for _ in subs]
        self.changed = asyncio.Event()
        self.tasks = [asyncio.create_task(self._read(i, s)) for i, s in enumerate(subs)]

    async def _read(self, i: int, sub: WsClient) -> None:
        while True:
            self.events[i].append(await sub.next(timeout=3600))
            self.changed.set()

    @property
    def total(self) -> int:
        return sum(len(e) for e in self.events)

    async def until_total(self, n: int, timeout: float = 30) -> None:
        async with asyncio.timeout(timeout):
            while self.total < n:
                self.changed.clear()
                await self.changed.wait()

    async def close(self) -> None:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await asyncio.gather(*(s.close() for s in self.subs), return_exceptions=True)


async def test_tasks_rotate_among_waiters(api: Api) -> None:
    """Three idle waiters, three tasks opened one after another: each waiter is woken once."""
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    subs = [await subscribe_tasks(api, expert["token"], ["grading"]) for _ in range(3)]
    collector = Collector(subs)
    try:
        await wait_for_waiters(api, 3)
        for i in range(3):
            await api.create_project(customer["token"], tasks_of("grading", 1), name=f"p{i}")
            await collector.until_total(i + 1)
        assert [len(e) for e in collector.events] == [1, 1, 1]
    finally:
        await collector.close()


async def test_one_task_wakes_few_of_200_idle_subscribers(api: Api) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    subs: list[WsClient] = []
    for _ in range(4):  # in batches, as a shared test machine may be slow
        subs += await asyncio.gather(
            *(subscribe_tasks(api, expert["token"], ["grading"]) for _ in range(50))
        )
    collector = Collector(subs)
    try:
        await wait_for_waiters(api, 200)
        before = await tickets_settled(api, 0)
        await api.create_project(customer["token"], tasks_of("grading", 1))
        await collector.until_total(1)
        # No time window: the server has heard the task's wake ticket and has nothing left to
        # hand out for it, having handed out one wake-up (a herd: all 200 in that dispatch);
        # the one that arrived is all there is.
        one = await tickets_settled(api, before["wake_tickets"]["heard"] + 1)
        assert one["wakeups"] - before["wakeups"] == 1, one
        assert collector.total == 1, [len(e) for e in collector.events if e]
        # Five more tasks in one transaction wake five more (different) waiters.
        await api.create_project(customer["token"], tasks_of("grading", 5), name="five")
        await collector.until_total(6)
        six = await tickets_settled(api, one["wake_tickets"]["heard"] + 1)
        assert six["wakeups"] - before["wakeups"] == 6, six
        assert collector.total == 6
        assert all(len(e) <= 1 for e in collector.events)
    finally:
        await collector.close()


# --- lease expiry, rollback, debounce ------------------------------------------------------


async def test_expired_lease_swept_back_wakes_subscriber(
    api: Api, db: asyncpg.Connection, clock: DbClock
) -> None:
    customer = await api.create_customer()
    holder = await api.create_expert(["grading"], name="holder")
    waiter = await api.create_expert(["grading"], name="waiter")
    created = await api.create_project(customer["token"], tasks_of("grading", 1), leaseSeconds=60)
    claim = await api.claim(holder["token"])
    assert claim is not None
    sub = await subscribe_tasks(api, waiter["token"])
    try:
        await wait_for_waiters(api, 1)
        # No task is open now; once the lease ends the sweeper (every 0.2 s) reopens it.
        await clock.advance(61)
        event = await sub.next(timeout=15)
        assert event["data"]["taskAvailable"] == {
            "skill": "grading",
            "projectId": created["project"]["id"],
            "recheck": False,
        }
        status = await db.fetchval(
            "SELECT status FROM assignments WHERE id = $1", uuid.UUID(claim["assignmentId"])
        )
        assert status == "expired"
        second = await api.claim(waiter["token"])
        assert second is not None and second["task"]["id"] == claim["task"]["id"]
    finally:
        await sub.close()


async def test_rolled_back_notifications_are_never_delivered(
    api: Api, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hints sent inside a transaction (directly, or deferred by the debouncer) that rolls
    back never reach a subscriber; the next committed task is the first event."""
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    sub = await subscribe_tasks(api, expert["token"], ["grading"])
    conn = await asyncpg.connect(database_url)
    fake = "00000000-0000-0000-0000-000000000001"
    passes = 0
    real_flush = notify.NOTIFIER._flush

    async def counted_flush(final: bool = False) -> bool:
        nonlocal passes
        waiting = await real_flush(final)
        passes += 1
        return waiting

    monkeypatch.setattr(notify.NOTIFIER, "_flush", counted_flush)

    def flushed_and_held() -> bool:
        held = notify.NOTIFIER._deferred.get("grading", {}).values()
        return passes > deferred_at and any(fake in by_project for by_project in held)

    saved = notify.NOTIFIER.min_interval
    notify.NOTIFIER.min_interval = 60.0  # so the second hint is surely deferred
    try:
        await wait_for_waiters(api, 1)
        dropped = notify.NOTIFIER.dropped_aborted
        tx = conn.transaction()
        await tx.start()
        # The in-process server shares this process's notifier: the first call notifies in
        # the transaction, the second (within min_interval) is deferred to the flusher.
        await notify.tasks_opened(conn, [("grading", fake, 1)])
        await notify.tasks_opened(conn, [("grading", fake, 2)])
        deferred_at = passes
        assert notify.NOTIFIER.deferred_pending >= 1, "the second hint should have been deferred"
        # The flusher sees the transaction still in progress: a pass ends with the hint kept.
        await wait_for(flushed_and_held, "a flusher pass that keeps the in-progress hint")
        await tx.rollback()
        real = await api.create_project(customer["token"], tasks_of("grading", 1))
        event = await sub.next()
        assert event["data"]["taskAvailable"]["projectId"] == real["project"]["id"]
        assert notify.NOTIFIER.dropped_aborted == dropped + 1  # the deferred one was dropped
    finally:
        notify.NOTIFIER.min_interval = saved
        await conn.close()
        await sub.close()


async def test_debounced_hints_arrive_after_commit(api: Api) -> None:
    """Opening transactions in one skill closer together than the debounce interval: all but
    the first are deferred to the flusher, and still every task wakes its own waiter."""
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    subs = [await subscribe_tasks(api, expert["token"], ["grading"]) for _ in range(4)]
    collector = Collector(subs)
    saved = notify.NOTIFIER.min_interval
    notify.NOTIFIER.min_interval = 60.0  # every hint after the first is deferred
    try:
        await wait_for_waiters(api, 4)
        before = (notify.NOTIFIER.sent_in_transaction, notify.NOTIFIER.sent_deferred)
        projects = [
            await api.create_project(customer["token"], tasks_of("grading", 1), name=f"b{i}")
            for i in range(4)
        ]
        await collector.until_total(4)
        got = {e[0]["data"]["taskAvailable"]["projectId"] for e in collector.events}
        assert got == {p["project"]["id"] for p in projects}
        sent_in_tx = notify.NOTIFIER.sent_in_transaction - before[0]
        assert sent_in_tx == 1 and notify.NOTIFIER.sent_deferred > before[1]
    finally:
        notify.NOTIFIER.min_interval = saved
        await collector.close()


# --- robustness ------------------------------------------------------------------------------


async def test_listener_killed_reconnects_and_wakes(api: Api, db: asyncpg.Connection) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    sub = await subscribe_tasks(api, expert["token"], ["grading"])
    try:
        await wait_for_waiters(api, 1)
        killed = await db.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = $1 AND datname = current_database()",
            LISTENER_APPLICATION_NAME,
        )
        assert killed == 1
        # Events sent while it was down are lost: every waiter is told to re-check.
        recheck = await sub.next()
        assert recheck["data"]["taskAvailable"] == {
            "skill": "grading",
            "projectId": None,
            "recheck": True,
        }
        created = await api.create_project(customer["token"], tasks_of("grading", 1))
        event = await sub.next()
        assert event["data"]["taskAvailable"]["projectId"] == created["project"]["id"]
        ready = await api.http.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        status = await realtime_status(api)
        assert status["listener"] == "ok" and status["reconnects"] == 1
    finally:
        await sub.close()


def test_payloads_stay_far_below_the_notify_limit() -> None:
    many = {f"{i:08d}-0000-0000-0000-000000000000": 1_000_000 + i for i in range(2000)}
    quality = {p: 0.123456789 for p in many}
    payloads = tasks_payloads(many, quality)
    assert len(payloads) > 1
    assert max(len(p.encode()) for p in payloads) < 7000
    merged: dict[str, int] = {}
    for p in payloads:
        body = json.loads(p)
        assert set(body["q"]) == set(body["p"])
        merged.update(body["p"])
    assert merged == many
    # Channel names fit Postgres's 63-byte identifiers, even for the longest skill names.
    assert len(skill_channel("s" * 64).encode()) <= 63
    assert skill_channel("a" * 64) != skill_channel("a" * 63 + "b")


async def test_slow_consumer_mailbox_stays_bounded() -> None:
    waiter = TaskWaiter(expert_id=uuid.uuid4(), skills=["a", "b"])
    for i in range(100_000):
        waiter.offer("a" if i % 2 else "b", f"p{i}")
    assert len(waiter._pending) == 2
    first, second = await waiter.next(), await waiter.next()
    assert {first.skill, second.skill} == {"a", "b"}
    assert waiter.idle


# --- auth and projectProgress ----------------------------------------------------------------


async def test_websocket_authentication(api: Api) -> None:
    expert = await api.create_expert(["grading"])
    for protocol in (TRANSPORT_WS, LEGACY_WS):
        for token in (None, "tr_e_not-a-real-token"):
            with pytest.raises(Rejected):
                async with WsClient(api.base_url, token, protocol) as ws:
                    await ws.subscribe(TASK_AVAILABLE, {"s": None})
                    await ws.next()
        # a valid token is accepted, in connection_init or on the upgrade request
        async with WsClient(api.base_url, expert["token"], protocol) as ws:
            await ws.subscribe(TASK_AVAILABLE, {"s": None})
        bearer = {"Authorization": f"Bearer {expert['token']}"}
        await wait_for_waiters(api, 0)
        async with WsClient(api.base_url, None, protocol, headers=bearer) as ws:
            await ws.subscribe(TASK_AVAILABLE, {"s": None})
            await wait_for_waiters(api, 1)
        # connection_init wins over the header: a bad token there is refused
        with pytest.raises(Rejected):
            async with WsClient(api.base_url, "tr_e_bad", protocol, headers=bearer):
                pass


async def test_realtime_status_is_for_admins_only(api: Api) -> None:
    expert = await api.create_expert(["grading"])
    for token in (None, expert["token"]):
        r = await api.rest("GET", "/v1/realtime/status", token)
        assert r.status_code in (401, 404) and "error" in r.json()
    status = await realtime_status(api)
    assert status["listener"] == "ok" and status["task_waiters"] == 0


async def test_project_progress_owner_only_and_coalesced(api: Api) -> None:
    owner = await api.create_customer("owner")
    other = await api.create_customer("other")
    expert = await api.create_expert(["grading"])
    created = await api.create_project(owner["token"], tasks_of("grading", 12))
    project_id = created["project"]["id"]

    async with WsClient(api.base_url, other["token"]) as ws:
        await ws.subscribe(PROJECT_PROGRESS, {"p": project_id})
        refused = await ws.next()
        assert refused["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    async with WsClient(api.base_url, expert["token"], LEGACY_WS) as ws:
        await ws.subscribe(PROJECT_PROGRESS, {"p": project_id})
        refused = await ws.next()
        assert refused["errors"][0]["extensions"]["code"] == "NOT_FOUND"

    async with WsClient(api.base_url, owner["token"]) as ws:
        await ws.subscribe(PROJECT_PROGRESS, {"p": project_id})
        first = await ws.next()
        start = {"total": 12, "open": 12, "claimed": 0, "done": 0, "failed": 0, "canceled": 0}
        assert first["data"]["projectProgress"] == start
        loop = asyncio.get_running_loop()
        began = loop.time()
        for _ in range(12):  # 24 changes: a claim and a submit each
            claim = await api.claim(expert["token"])
            assert claim is not None
            await api.submit(expert["token"], claim["assignmentId"], {"ok": True})
        elapsed = loop.time() - began
        seen = []
        while True:
            event = (await ws.next())["data"]["projectProgress"]
            seen.append(event)
            if event["done"] == 12:
                break
        # It ends on the latest state ...
        assert seen[-1] == {
            "total": 12,
            "open": 0,
            "claimed": 0,
            "done": 12,
            "failed": 0,
            "canceled": 0,
        }
        # ... and is coalesced: about one push per 0.3 s while changes keep coming, rather
        # than one per change (the allowance grows with the time the changes took).
        assert len(seen) <= min(23, elapsed / 0.3 + 3), (len(seen), elapsed)


# --- heartbeat ------------------------------------------------------------------------------


async def test_heartbeat_reports_higher_priority_tasks(api: Api) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    await api.create_project(customer["token"], tasks_of("grading", 2), name="low")
    claim = await api.claim(expert["token"])
    assert claim is not None
    query = "mutation($a: ID!) { heartbeat(assignmentId: $a) { leaseUntil hasHighPriorityTasks } }"
    beat = await api.gql(query, {"a": claim["assignmentId"]}, expert["token"])
    assert beat["heartbeat"]["hasHighPriorityTasks"] is False  # the other task: same priority
    # Higher priority, but in a skill the expert does not hold: still false.
    await api.create_project(customer["token"], tasks_of("ranking", 1), name="x", priority=5)
    beat = await api.gql(query, {"a": claim["assignmentId"]}, expert["token"])
    assert beat["heartbeat"]["hasHighPriorityTasks"] is False
    await api.create_project(customer["token"], tasks_of("grading", 1), name="hi", priority=5)
    beat = await api.gql(query, {"a": claim["assignmentId"]}, expert["token"])
    assert beat["heartbeat"]["hasHighPriorityTasks"] is True
    r = await api.rest(
        "POST", f"/v1/assignments/{claim['assignmentId']}/heartbeat", expert["token"]
    )
    assert r.status_code == 200 and r.json()["has_high_priority_tasks"] is True


# --- several server processes ----------------------------------------------------------------


@pytest_asyncio.fixture
async def two_servers(db_route: DbRoute, tmp_path: Path) -> AsyncIterator[list[str]]:
    """Two processes on one database, straight or with their pools through PgBouncer (the
    LISTEN connection always goes straight to Postgres)."""
    servers = [
        ServeProcess(
            db_route.url,
            tmp_path / f"server{i}.log",
            TASKROUTE_SWEEP_INTERVAL="0.2",
            TASKROUTE_DATA_DIR=str(tmp_path / f"d{i}"),
            **db_route.env(),
        )  # fmt: skip
        for i in range(2)
    ]
    try:
        await asyncio.gather(*(s.astart() for s in servers))
        yield [s.url for s in servers]
    finally:
        for s in servers:
            s.stop()


async def test_task_opened_via_one_process_wakes_expert_on_another(
    two_servers: list[str], clock: DbClock
) -> None:
    a_url, b_url = two_servers
    async with Api(a_url) as a, Api(b_url) as b:
        customer = await a.create_customer()
        expert = await a.create_expert(["grading"])
        sub = await subscribe_tasks(b, expert["token"], ["grading"])
        try:
            await wait_for_waiters(b, 1)
            created = await a.create_project(customer["token"], tasks_of("grading", 1))
            event = await sub.next()
            assert event["data"]["taskAvailable"]["projectId"] == created["project"]["id"]
            # An expired lease, swept back by whichever process holds the sweep lock.
            short = await a.create_project(
                customer["token"], tasks_of("ranking", 1), name="short", leaseSeconds=60
            )
            holder = await a.create_expert(["ranking"], name="holder")
            ranker = await a.create_expert(["ranking"], name="ranker")
            taken = await a.claim(holder["token"])
            assert taken is not None
            sub2 = await subscribe_tasks(b, ranker["token"], ["ranking"])
            try:
                await wait_for_waiters(b, 2)
                await clock.advance(61)
                event = await sub2.next(timeout=15)
                assert event["data"]["taskAvailable"]["projectId"] == short["project"]["id"]
            finally:
                await sub2.close()
        finally:
            await sub.close()


# --- a silently dead listener (no RST): only the probe can notice ----------------------------


class FreezableProxy:
    """A loopback TCP proxy to Postgres; `freeze()` stops moving bytes on every connection open
    so far without closing it, like a cut network cable. Later connections work normally."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.frozen: set[int] = set()
        self.conns: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    def freeze(self) -> None:
        self.frozen.update(range(len(self.conns)))

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):  # torn down with the test
            await self._serve(reader, writer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        index = len(self.conns)
        self.conns.append((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    while index in self.frozen:
                        await asyncio.sleep(3600)  # hold the bytes: nothing gets through
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        for a, b in self.conns:
            a.close()
            b.close()


async def test_frozen_listener_detected_by_probe(
    database_url: str, tmp_path: Path, db: asyncpg.Connection
) -> None:
    pg_port = int(database_url.rsplit(":", 1)[1].split("/", 1)[0])
    proxy = FreezableProxy(pg_port)
    await proxy.start()
    proxied = database_url.replace(f":{pg_port}/", f":{proxy.port}/")
    srv = InProcessServer(
        settings_for(proxied, tmp_path, listen_probe_interval=0.3, listen_probe_timeout=1.0)
    )
    await srv.start()
    try:
        async with Api(srv.url) as api:
            customer = await api.create_customer()
            expert = await api.create_expert(["grading"])
            sub = await subscribe_tasks(api, expert["token"], ["grading"])
            try:
                await wait_for_waiters(api, 1)
                # One event first: the subscription is fully set up (it reads the database
                # once while starting, which a frozen pool would block forever).
                await api.create_project(customer["token"], tasks_of("grading", 1))
                assert (await sub.next())["data"]["taskAvailable"]["recheck"] is False
                proxy.freeze()  # the listener's socket stays open but goes silent
                recheck = await sub.next(timeout=30)
                assert recheck["data"]["taskAvailable"]["recheck"] is True
                # The new listener LISTENs again: a NOTIFY sent now (straight to Postgres,
                # as the frozen pool cannot) reaches the subscriber. Resent until it does, in
                # case a loaded machine made a probe time out once more.
                fake = "00000000-0000-0000-0000-00000000000f"
                async with asyncio.timeout(30):
                    while True:
                        await db.execute(
                            "SELECT pg_notify($1, $2)",
                            skill_channel("grading"),
                            json.dumps({"p": {fake: 1}, "x": uuid.uuid4().hex}),
                        )
                        try:
                            event = await sub.next(timeout=1)
                        except TimeoutError:
                            continue
                        if event["data"]["taskAvailable"]["projectId"] == fake:
                            break
            finally:
                await sub.close()
    finally:
        await proxy.close()  # unblocks the frozen pool connections, so the server can stop
        await srv.stop()


async def test_backend_works_behind_broadcasters_interface(database_url: str) -> None:
    """The backend is a drop-in broadcaster backend: `Broadcast(backend=...)` round-trips."""
    from broadcaster import Broadcast

    from taskroute.realtime.backend import PostgresNotifyBackend

    backend = PostgresNotifyBackend(database_url)
    async with Broadcast(backend=backend) as broadcast:
        async with broadcast.subscribe("tr.test") as subscriber:
            await broadcast.publish("tr.test", "hello")
            event = await asyncio.wait_for(subscriber.get(), 10)
            assert (event.channel, event.message) == ("tr.test", "hello")
        assert backend.healthy
    assert not backend.healthy


async def test_deactivated_expert_is_not_woken(database_url: str, tmp_path: Path) -> None:
    """A deactivated expert's wake-up would sit out the ack window (long here) before the
    task reached anyone else: the active expert behind it in the rotation gets it at once."""
    settings = settings_for(database_url, tmp_path, wake_coordination=True, wake_ack_seconds=600)
    async with serving(settings) as api:
        customer = await api.create_customer()
        gone = await api.create_expert(["grading"], name="gone")
        stays = await api.create_expert(["grading"], name="stays")
        # `gone` first, so first in the rotation; over SSE, a stream nothing else reads
        body = {"query": TASK_AVAILABLE, "variables": {"s": ["grading"]}}
        headers = {"Authorization": f"Bearer {gone['token']}", "Accept": "text/event-stream"}
        async with api.http.stream("POST", "/graphql", json=body, headers=headers):
            await wait_for_waiters(api, 1)
            sub = await subscribe_tasks(api, stays["token"], ["grading"])
            try:
                await wait_for_waiters(api, 2)
                await api.gql(
                    'mutation($e: ID!) { deactivateExpert(expertId: $e, reason: "left") {'
                    " leasesReleased } }",
                    {"e": gone["id"]},
                    ADMIN_TOKEN,
                )
                created = await api.create_project(customer["token"], tasks_of("grading", 1))
                event = await sub.next(timeout=10)
                assert event["data"]["taskAvailable"]["projectId"] == created["project"]["id"]
            finally:
                await sub.close()


async def test_status_notice_takes_the_experts_waiters_out_of_the_rotation_at_once() -> None:
    """Before the database is asked: no hint handled after the notice can reach them."""

    class Db:
        status = "disabled"

        async def fetchrow(self, query: str, *args: Any) -> dict[str, Any]:
            return {"status": self.status}

    db = Db()
    hub = Hub(cast(Any, None), cast(Any, db))
    gone, stays = TaskWaiter(uuid.uuid4(), ["grading"]), TaskWaiter(uuid.uuid4(), ["grading"])
    for w in (gone, stays):
        hub._rotation.setdefault("grading", OrderedDict())[w.id] = w
    ticket = Ticket("k", "grading", str(uuid.uuid4()), 1, 0.0)
    assert hub.candidates(ticket, 1) == [gone]
    hub.expert_status_changed(str(gone.expert_id))
    assert hub.candidates(ticket, 1) == [stays]
    await wait_for(lambda: not hub._held_checks, "the status check")
    assert hub.candidates(ticket, 1) == [stays] and not hub.deliverable(gone)
    # reactivated: a candidate again once the database says so
    db.status = "active"
    hub.expert_status_changed(str(gone.expert_id))
    await wait_for(lambda: not hub._held_checks, "the status check")
    assert hub.candidates(ticket, 1) == [gone]
