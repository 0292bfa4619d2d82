"""`taskroute admin ...` (issue 18): the operator's account commands, checked through the API
of a running server and in the database."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from typing import Any

import asyncpg

from ..helpers import ADMIN_TOKEN, Api, tasks_of
from ..procs import ROOT


async def admin(database_url: str, *argv: str, ok: bool = True) -> Any:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATABASE_URL": database_url}
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "taskroute", "admin", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if not ok:
        assert out.returncode == 2, (out.stdout, out.stderr)
        return out.stderr
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


async def test_cli_manages_experts_and_tokens(
    api: Api, database_url: str, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    await api.create_project(customer["token"], tasks_of("audio", 1))
    expert = await admin(database_url, "create-expert", "cli ann", "--skill", "grading:0.8")
    token = expert["token"]
    assert await api.claim(token) is None

    await admin(database_url, "grant-skill", expert["id"], "audio", "--reason", "certified")
    claim = await api.claim(token)
    assert claim is not None and claim["task"]["skill"] == "audio"

    listed = await admin(database_url, "list-experts", "--skill", "audio")
    assert [e["id"] for e in listed] == [expert["id"]]
    shown = await admin(database_url, "show-expert", expert["id"])
    assert shown["current_claim"]["assignment_id"] == claim["assignmentId"]
    assert sorted(s["skill"] for s in shown["skills"]) == ["audio", "grading"]

    out = await admin(database_url, "deactivate", expert["id"], "--reason", "left")
    assert out == {"expert": expert["id"], "leases_released": 1, "status": "disabled"}
    r = await api.rest("POST", "/v1/tasks/next", token)
    assert r.status_code == 401
    status = await db.fetchval(
        "SELECT status FROM tasks WHERE id = $1", uuid.UUID(claim["task"]["id"])
    )
    assert status == "open"
    await admin(database_url, "reactivate", expert["id"])

    issued = await admin(database_url, "create-token", "--customer", customer["id"],
                         "--label", "dashboard", "--read-only")  # fmt: skip
    assert issued["read_only"] is True and issued["token"].startswith("tr_c_")
    tokens = await admin(database_url, "list-tokens", "--customer", customer["id"])
    assert sorted(t["label"] for t in tokens) == ["dashboard", "initial"]
    assert all("token" not in t and "token_hash" not in t for t in tokens)
    await admin(database_url, "revoke-token", issued["id"], "--reason", "rotated out")
    body = await api.gql_raw("{ me { role } }", token=issued["token"])
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"

    err = await admin(database_url, "grant-skill", expert["id"], "audio", ok=False)
    assert "already holds" in err
    err = await admin(database_url, "deactivate", "not-an-id", ok=False)
    assert "no such expert" in err

    entries = await admin(database_url, "audit", "--subject", expert["id"])
    actions = [e["action"] for e in entries]
    assert actions == ["expert.create", "skill.grant", "expert.deactivate", "expert.reactivate"]
    assert all(e["actor"].startswith("cli:") for e in entries)
    # and the same audit over GraphQL
    data = await api.gql(
        "query($s: ID) { adminAudit(subjectId: $s) { edges { node { action reason } } } }",
        {"s": expert["id"]},
        ADMIN_TOKEN,
    )
    assert {"action": "skill.grant", "reason": "certified"} in [
        e["node"] for e in data["adminAudit"]["edges"]
    ]
