"""Every committed change is an event delivered to the endpoint, signed as Standard Webhooks
says (checked by taskroute.client.verify_webhook and by the standardwebhooks library); a
change that rolls back (a refused submit, a transaction rolled back on a direct connection)
is none. Item result events carry the change feed's own cursor."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest
import standardwebhooks

from taskroute.client import WebhookVerificationError, verify_webhook

from ..helpers import GraphQLError, serving, settings_for, tasks_of, wait_for
from .receiver import Receiver
from .world import change_cursors, create_endpoint, work_through


def webhook_settings(database_url: str, tmp_path: Path, **more: object) -> object:
    return settings_for(
        database_url, tmp_path, webhook_allow_private=True, webhook_interval=0.05, **more
    )


async def test_committed_changes_are_delivered_and_rolled_back_ones_are_not(
    database_url: str, tmp_path: Path, db: asyncpg.Connection
) -> None:
    receiver = Receiver()
    await receiver.up()
    schema = {"type": "object", "required": ["label"], "properties": {"label": {"type": "string"}}}
    async with serving(webhook_settings(database_url, tmp_path)) as api:  # type: ignore[arg-type]
        customer = await api.create_customer()
        expert = await api.create_expert(["grading"])
        made = await create_endpoint(api, customer["token"], receiver.url)
        secret = made["secret"]
        assert secret.startswith("whsec_")
        project = (
            await api.create_project(customer["token"], tasks_of("grading", 3), answerSchema=schema)
        )["project"]["id"]
        # a submit the answer schema refuses changes nothing: no event
        claim = await api.claim(expert["token"])
        assert claim is not None
        with pytest.raises(GraphQLError):
            await api.submit(expert["token"], claim["assignmentId"], {"label": 7})
        await api.submit(expert["token"], claim["assignmentId"], {"label": "a"})
        await work_through(api, expert["token"], 2, {"label": "b"})
        # a change rolled back on a direct connection: no event either
        tx = db.transaction()
        await tx.start()
        before = await db.fetchval("SELECT count(*) FROM webhook_events")
        await db.execute(
            "INSERT INTO result_changes (project_id, item_id, version, change)"
            " SELECT project_id, item_id, 9, 're-resolved' FROM item_results"
            " WHERE project_id = $1 LIMIT 1",
            project,
        )
        # the trigger wrote its event in this transaction, and it goes with the rollback
        assert await db.fetchval("SELECT count(*) FROM webhook_events") == before + 1
        await tx.rollback()

        def delivered() -> list[str]:
            return sorted({r.id for r in receiver.received})

        # three results and the project's completion
        await wait_for(lambda: len(delivered()) >= 4, "4 deliveries")
        cursors = await change_cursors(api, customer["token"], project)
    await receiver.down()

    events = await db.fetch("SELECT id, type FROM webhook_events ORDER BY created_at, id")
    assert sorted(e["id"] for e in events) == delivered()
    types = sorted(e["type"] for e in events)
    assert types == ["item.result.resolved"] * 3 + ["project.completed"], types
    ids = [r.id for r in receiver.received]
    assert len(ids) == len(set(ids)), "an event delivered twice"
    results = [r for r in receiver.received if r.json["type"] == "item.result.resolved"]
    assert sorted(r.json["data"]["cursor"] for r in results) == sorted(cursors)
    for r in receiver.received:
        # our receiver helper and an independent implementation agree
        assert verify_webhook(secret, r.headers, r.body) == r.json
        assert standardwebhooks.Webhook(secret).verify(r.body, r.headers) == r.json
        with pytest.raises(WebhookVerificationError):
            verify_webhook(secret, r.headers, r.body + b" ")
        with pytest.raises(WebhookVerificationError):
            verify_webhook(secret, r.headers, r.body, tolerance=-1)
