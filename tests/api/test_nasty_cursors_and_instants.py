"""Cursors, limits and instants clients send back: always BAD_INPUT (422), never INTERNAL.

Every listing parses them through taskroute/resolvers/cursors.py. The nasty values: non-ASCII
digits that `str.isdigit()` accepts ("²", Arabic-Indic digits), numbers past int64, base64
that is not base64 or not UTF-8, opaque cursors that decode to absurd numbers or to dates at
the edges of the calendar with extreme offsets.
"""

from __future__ import annotations

import base64
import uuid

from ..helpers import ADMIN_TOKEN, Api, GraphQLError, tasks_of

PLAIN = ["²", "٣", "-1", "1.5", "9" * 25, str(2**63), " 1", "1e3", "\x00"]


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode()


def opaque(kind: str) -> list[str]:
    rid = uuid.uuid4()
    bodies = ["²", "9" * 25, str(2**63), f"0001-01-01T00:00:00+14:00|{rid}",
              f"9999-12-31T23:59:59-14:00|{rid}", "2026-01-01T00:00:00|nope", ""]  # fmt: skip
    return [b64(f"{kind}:{b}".encode()) for b in bodies] + [
        "!!!not base64",
        b64(b"\xff\xfe\xfd"),
        b64(b"payout"),
        "",
        "²",
    ]


async def expect_bad_input(api: Api, query: str, variables: dict, token: str) -> None:
    """Refused as BAD_INPUT because of the cursor (the field is named), not for another reason."""
    body = await api.gql_raw(query, variables, token)
    errors = body.get("errors", [])
    assert errors, (variables, body)
    for e in errors:
        ext = e.get("extensions", {})
        assert ext.get("code") == "BAD_INPUT" and ext.get("field") == "after", (variables, body)


async def test_listings_refuse_nasty_cursors(api: Api) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["s"])
    created = await api.create_project(customer["token"], tasks_of("s", 1))
    pid = created["project"]["id"]
    listings = [
        ("query($a: String) { auditLog(after: $a) { entries { action } } }", customer, "plain"),
        (
            "query($p: ID!, $a: String) { resultChanges(projectId: $p, after: $a) { cursor } }",
            customer,
            "plain",
        ),  # fmt: skip
        (
            "query($p: ID, $a: String) { payouts(projectId: $p, after: $a) { edges { cursor } } }",
            customer,
            "payout",
        ),  # fmt: skip
        ("query($a: String) { projects(after: $a) { edges { cursor } } }", customer, "project"),
        ("query($a: String) { experts(after: $a) { edges { cursor } } }", None, "expert"),
        ("query($a: String) { customers(after: $a) { edges { cursor } } }", None, "customer"),
        ("query($a: String) { adminAudit(after: $a) { edges { cursor } } }", None, "audit"),
        # The result feeds and the payload audit also take their deprecated raw cursors.
        (
            "query($p: ID!, $a: String) { itemResults(projectId: $p, after: $a)"
            " { edges { cursor } } }",
            customer,
            "result",
        ),  # fmt: skip
        (
            "query($p: ID!, $a: String) { itemResultChanges(projectId: $p, after: $a)"
            " { edges { cursor } } }",
            customer,
            "change",
        ),  # fmt: skip
        (
            "query($a: String) { payloadAudit(after: $a) { edges { cursor } } }",
            customer,
            "payload_audit",
        ),  # fmt: skip
    ]
    for query, who, kind in listings:
        token = who["token"] if who else ADMIN_TOKEN
        values = PLAIN if kind == "plain" else opaque(kind) + PLAIN[:4]
        raw_too = kind in ("plain", "result", "change", "payload_audit")
        for value in values:
            if value == "" and raw_too:
                continue  # an empty cursor means "from the start"
            await expect_bad_input(api, query, {"a": value, "p": pid}, token)
    # The same through REST: 422 with the field named.
    for path in (
        "/v1/audit-log?after={}",
        "/v1/audit-log?limit={}",
        f"/v1/projects/{pid}/result-changes?after={{}}",
        f"/v1/projects/{pid}/result-changes?limit={{}}",
        f"/v1/projects/{pid}/result-changes?first={{}}",
        "/v1/audit-log?first={}",
        f"/v1/projects/{pid}/results?after={{}}",
    ):
        for value in ("²", "٣", "9" * 25, str(2**63), "-5"):
            r = await api.rest("GET", path.format(value), customer["token"])
            assert r.status_code == 422, (path, value, r.text)
            error = r.json()["error"]
            assert error["code"] == "BAD_INPUT", error
            assert error.get("details", {}).get("field") in ("after", "limit", "first"), error
    # The expert still works normally afterwards: nothing was broken or stored.
    assert await api.claim(expert["token"]) is not None


async def test_instants_at_the_edges_of_the_calendar(api: Api) -> None:
    expert = await api.create_expert(["s"])
    for since in ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"):
        try:
            await api.gql(
                'mutation($e: ID!, $s: DateTime) { retractLabels(expertId: $e, reason: "r",'
                " since: $s) { answers } }",
                {"e": expert["id"], "s": since},
                ADMIN_TOKEN,
            )
        except GraphQLError as err:
            assert err.code == "BAD_INPUT", err.errors
        else:
            raise AssertionError(f"since={since} was accepted")


async def test_answer_field_nul_and_lone_surrogate(api: Api) -> None:
    """Text Postgres cannot store answered INTERNAL from the driver: now BAD_INPUT."""
    customer = await api.create_customer()
    pid = (await api.create_project(customer["token"], tasks_of("s", 1)))["project"]["id"]
    headers = {"Authorization": f"Bearer {customer['token']}", "Content-Type": "application/json"}
    for escaped in ("a\\u0000b", "\\ud800"):
        r = await api.http.put(
            f"/v1/projects/{pid}/quality",
            content='{"answer_field": "' + escaped + '"}',
            headers=headers,
        )
        assert r.status_code == 422, r.text
        assert r.json()["error"]["details"]["field"] == "answer_field"
        query = (
            '{"query": "mutation($p: ID!, $f: String) { setQualityPolicy(projectId: $p,'
            ' input: {answerField: $f}) { answerField } }", "variables": {"p": "'
            + pid
            + '", "f": "'
            + escaped
            + '"}}'
        )
        r = await api.http.post("/graphql", content=query, headers=headers)
        body = r.json()
        assert [e["extensions"]["code"] for e in body["errors"]] == ["BAD_INPUT"], body


async def test_malformed_bodies_are_explained_without_python_internals(api: Api) -> None:
    customer = await api.create_customer()
    headers = {"Authorization": f"Bearer {customer['token']}", "Content-Type": "application/json"}
    for raw in ('{"name": "x", "tasks": [', '{"name": ' + "9" * 5000 + "}", "[" * 100_000):
        r = await api.http.post("/v1/projects", content=raw, headers=headers)
        assert r.status_code == 422, r.text
        message = r.json()["error"]["message"]
        assert "malformed JSON" in message
        assert "sys." not in message and "int()" not in message and "Expecting" not in message
