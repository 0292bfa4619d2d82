"""URL safety (non-public addresses refused at creation and at delivery without
TASKROUTE_WEBHOOK_ALLOW_PRIVATE; https required) and who manages which endpoint."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from taskroute.resolvers.webhooks import addresses

from ..helpers import ADMIN_TOKEN, Api, serving, settings_for, tasks_of, wait_for
from .receiver import Receiver
from .world import CREATE, create_endpoint, work_through

REFUSED = [
    "http://example.com/hook",  # not https
    "https://127.0.0.1/hook",
    "https://10.1.2.3/hook",
    "https://192.168.0.1/hook",
    "https://169.254.169.254/latest/meta-data",
    "https://[::1]/hook",
    "https://[::ffff:127.0.0.1]/hook",
    "https://224.0.0.1/hook",
    "https://240.0.0.1/hook",
    "https://100.64.0.1/hook",
    "https://0.0.0.0/hook",
    "https://user:pw@8.8.8.8/hook",
    "ftp://8.8.8.8/hook",
    "not a url",
]


@pytest.mark.parametrize("ip", ["8.8.8.8", "2606:4700:4700::1111", "1.1.1.1"])
def test_public_addresses_pass(ip: str) -> None:
    assert addresses.public(ipaddress.ip_address(ip))


async def test_private_addresses_are_refused_without_the_setting(
    database_url: str, tmp_path: Path, db: asyncpg.Connection
) -> None:
    receiver = Receiver()
    await receiver.up()
    async with serving(settings_for(database_url, tmp_path, webhook_interval=0.05)) as api:
        customer = await api.create_customer()
        for url in [*REFUSED, receiver.url]:
            body = await api.gql_raw(
                CREATE, {"u": url, "t": ["item.result.resolved"]}, customer["token"]
            )
            assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT", (url, body)
        r = await api.rest(
            "POST", "/v1/webhooks", customer["token"],
            json={"url": "https://127.0.0.1/x", "event_types": ["item.result.resolved"]},
        )  # fmt: skip
        assert r.status_code == 422 and r.json()["error"]["code"] == "BAD_INPUT"
        assert await db.fetchval("SELECT count(*) FROM webhook_endpoints") == 0
        # saved while allowed (as if its name resolved elsewhere then): refused at delivery
        await db.execute(
            "INSERT INTO webhook_endpoints (customer_id, url, event_types, secret)"
            " VALUES ($1, $2, '{item.result.resolved}', 'whsec_AAAA')",
            customer["id"],
            receiver.url,
        )
        expert = await api.create_expert(["grading"])
        await api.create_project(customer["token"], tasks_of("grading", 1))
        await work_through(api, expert["token"], 1)
        row = await wait_for(
            lambda: db.fetchrow(
                "SELECT * FROM webhook_deliveries WHERE attempts = 1 AND lease_token IS NULL"
            ),
            "a refused attempt",
        )
        assert row["state"] == "pending" and row["last_status"] is None
        assert "url refused" in row["last_error"] or "non-public" in row["last_error"], row
        assert receiver.received == []
    await receiver.down()


MINE = "query { webhookEndpoints { id projectId } }"


async def outcome(api: Api, doc: str, variables: dict[str, Any], token: str) -> str:
    body = await api.gql_raw(doc, variables, token)
    if body.get("errors"):
        return str(body["errors"][0]["extensions"]["code"])
    return "ok"


async def test_who_manages_which_endpoint(database_url: str, tmp_path: Path) -> None:
    cfg = settings_for(database_url, tmp_path, webhook_allow_private=True)
    async with serving(cfg) as api:
        customer = await api.create_customer()
        other = await api.create_customer("other")
        expert = await api.create_expert(["grading"])
        one = (await api.create_project(customer["token"], tasks_of("grading", 1)))["project"]["id"]
        two = (await api.create_project(customer["token"], tasks_of("grading", 1)))["project"]["id"]
        issue = (
            "mutation($c: ID, $p: ID, $r: Boolean!) { createCredential(customerId: $c,"
            ' projectId: $p, readOnly: $r, label: "t") { token } }'
        )

        async def token(project: str | None, read_only: bool) -> str:
            v = {"c": customer["id"], "p": project, "r": read_only}
            return str((await api.gql(issue, v, ADMIN_TOKEN))["createCredential"]["token"])

        tokens = {
            "customer": customer["token"],
            "project": await token(one, False),
            "read_only": await token(None, True),
            "read_only_project": await token(one, True),
            "expert": expert["token"],
            "other": other["token"],
            "admin": ADMIN_TOKEN,
        }
        url = "http://127.0.0.1:9/hook"
        wide = (await create_endpoint(api, customer["token"], url))["endpoint"]["id"]
        on_one = (await create_endpoint(api, customer["token"], url, project=one))["endpoint"]["id"]
        on_two = (await create_endpoint(api, customer["token"], url, project=two))["endpoint"]["id"]

        def create(project: str | None) -> tuple[str, dict[str, Any]]:
            return CREATE, {"u": url, "t": ["project.completed"], "p": project}

        get = "query($i: ID!) { webhookEndpoint(id: $i) { id } }"
        rotate = "mutation($i: ID!) { rotateWebhookSecret(id: $i) { secret } }"
        cases: dict[str, tuple[tuple[str, dict[str, Any]], dict[str, str]]] = {
            # another customer makes its own endpoint: fine
            "create account-wide": (
                create(None),
                {"customer": "ok", "project": "FORBIDDEN", "other": "ok"},
            ),
            "create on its project": (create(one), {"customer": "ok", "project": "ok"}),
            "create on another project": (create(two), {"customer": "ok", "project": "NOT_FOUND"}),
            "read account-wide": ((get, {"i": wide}), {"customer": "ok", "project": "NOT_FOUND"}),
            "read its project's": ((get, {"i": on_one}), {"customer": "ok", "project": "ok"}),
            "rotate another's": (
                (rotate, {"i": on_two}),
                {"customer": "ok", "project": "NOT_FOUND"},
            ),
        }
        for what, ((doc, variables), expect) in cases.items():
            expect = {
                "read_only": "FORBIDDEN",
                "read_only_project": "FORBIDDEN",
                "expert": "NOT_FOUND",
                "other": "NOT_FOUND",
                "admin": "NOT_FOUND",
                **expect,
            }
            for kind, tok in tokens.items():
                got = await outcome(api, doc, variables, tok)
                assert got == expect[kind], (what, kind, got)
        listed = (await api.gql(MINE, {}, tokens["project"]))["webhookEndpoints"]
        assert listed and {e["projectId"] for e in listed} == {one}
        everything = (await api.gql(MINE, {}, tokens["customer"]))["webhookEndpoints"]
        assert {e["projectId"] for e in everything} == {None, one, two}
        theirs = (await api.gql(MINE, {}, tokens["other"]))["webhookEndpoints"]
        assert theirs and not {e["id"] for e in theirs} & {e["id"] for e in everything}
        r = await api.rest("GET", "/v1/webhooks", tokens["read_only"])
        assert r.status_code == 403
