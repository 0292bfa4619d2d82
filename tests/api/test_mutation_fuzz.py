"""Property-based fuzzing of every mutation (and REST route): random and malformed operations
must never produce a 5xx or an INTERNAL error, and must never break a database invariant.

The server runs as a subprocess (`python -m taskroute serve`) so the test can stay synchronous
for hypothesis; the invariants are checked over a direct connection afterwards.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..helpers import ADMIN_TOKEN
from ..procs import ServeProcess

pytestmark = pytest.mark.timeout(240)

MUTATIONS: dict[str, tuple[str, dict[str, str]]] = {
    "createCustomer": ("createCustomer(name: $name) { id }", {"name": "String!"}),
    "createExpert": (
        "createExpert(name: $name, skills: $skills, capabilities: $caps) { id }",
        {"name": "String!", "skills": "[SkillInput!]!", "caps": "[String!]"},
    ),
    "createProject": (
        "createProject(input: $input) { accepted project { id } }",
        {"input": "CreateProjectInput!"},
    ),
    "cancelProject": ("cancelProject(id: $id) { id status }", {"id": "ID!"}),
    "claimNextTask": ("claimNextTask(skills: $skills) { assignmentId }", {"skills": "[String!]"}),
    "heartbeat": ("heartbeat(assignmentId: $id) { leaseUntil }", {"id": "ID!"}),
    "submit": (
        "submit(assignmentId: $id, answer: $answer) { id }",
        {"id": "ID!", "answer": "JSON!"},
    ),
}

ROLE_FOR = {
    "createCustomer": "admin",
    "createExpert": "admin",
    "createProject": "customer",
    "cancelProject": "customer",
    "claimNextTask": "expert",
    "heartbeat": "expert",
    "submit": "expert",
}

# Strings that have broken services before: NUL, lone surrogates (sent as JSON escapes),
# direction overrides, SQL and format-string lookalikes, escaped-looking text, huge ones.
NASTY = ["\x00", "a\x00b", "\ud800", "x\udfff", "\u202e", "'; DROP TABLE tasks; --", "%s%n",
         "\\u0000", " ", "A" * 5000, "\U0001f600", "null"]  # fmt: skip
texts = st.one_of(
    st.text(max_size=30),
    st.sampled_from(NASTY),
    st.builds(lambda a, b: a + b, st.text(max_size=8), st.sampled_from(NASTY)),
)
# JSON values, including NaN and Infinity (json.dumps sends them as bare tokens).
json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | texts
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
skills = st.sampled_from(["s", "t", "", " ", "a" * 65, "ok.skill:1", "bad skill", "x\x00"])


class World:
    """Credentials and ids created once, so the fuzzer can hit real objects too."""

    tokens: dict[str, str] = {}
    ids: list[str] = []


def ids() -> st.SearchStrategy[str]:
    return st.one_of(
        st.uuids().map(str),
        texts,
        st.sampled_from(World.ids or ["00000000-0000-0000-0000-000000000000"]),
    )


def valid_like(var: str) -> st.SearchStrategy[Any]:
    if var == "name":
        return texts
    if var == "skills":
        return st.lists(
            st.fixed_dictionaries(
                {"skill": skills},
                optional={"quality": st.floats() | st.integers() | st.just("high")},
            ),
            max_size=5,
        ) | st.lists(skills, max_size=5)
    if var == "caps":
        return st.none() | st.lists(skills, max_size=3)
    if var == "input":
        task = st.fixed_dictionaries(
            {"skill": skills, "payload": json_values},
            optional={
                "priority": st.integers(),
                "externalId": texts | st.none(),
                "gold": json_values,
            },
        )
        return st.fixed_dictionaries(
            {"name": texts, "tasks": st.lists(task, max_size=4)},
            optional={
                "deadline": texts
                | st.datetimes(timezones=st.timezones()).map(str)
                | st.sampled_from(["2030-01-01T00:00:00Z", "0001-01-01T00:00:00+14:00"]),
                "priority": st.integers(),
                "leaseSeconds": st.integers(),
                "payCents": st.integers(),
                "minQuality": st.floats() | st.integers(),
                "redundancy": st.integers(),
                "maxRetries": st.integers(),
            },
        )
    if var == "id":
        return ids()
    return json_values


@st.composite
def operations(draw: st.DrawFn) -> tuple[str, dict[str, Any], str | None]:
    name = draw(st.sampled_from(sorted(MUTATIONS)))
    selection, var_types = MUTATIONS[name]
    decl = ", ".join(f"${v}: {t}" for v, t in var_types.items())
    query = f"mutation({decl}) {{ {selection} }}"
    # Mostly well-typed variables (so requests get past GraphQL validation into our code),
    # sometimes anything at all, sometimes missing.
    variables = {
        v: draw(json_values if draw(st.integers(0, 4)) == 0 else valid_like(v))
        for v in var_types
        if draw(st.integers(0, 9)) > 0
    }
    if draw(st.integers(0, 9)) == 0:  # damage the document
        cut = draw(st.integers(0, len(query)))
        query = query[:cut] + draw(st.text(max_size=5)) + query[cut + 1 :]
    # Mostly the role the mutation is for, so validation and the database are reached.
    role = draw(
        st.sampled_from([ROLE_FOR[name]] * 6 + ["admin", "customer", "expert2", None, "garbage"])
    )
    garbage = draw(st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1))
    token = {None: None, "garbage": garbage}.get(role, World.tokens.get(role))
    return query, variables, token


def post(http: httpx.Client, query: str, variables: Any, token: str | None) -> httpx.Response:
    headers = {"Accept": "application/graphql-response+json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = json.dumps({"query": query, "variables": variables}).encode()
    return http.post(
        "/graphql", content=body, headers={**headers, "Content-Type": "application/json"}
    )


def assert_clean(r: httpx.Response) -> None:
    assert r.status_code < 500, r.text
    if r.status_code == 204:  # REST's "nothing to claim": no body, by contract
        assert r.content == b"" and r.headers["retry-after"]
        return
    body = r.json()
    for error in body.get("errors", []) if isinstance(body, dict) else []:
        assert error.get("extensions", {}).get("code") != "INTERNAL", r.text
    if isinstance(body, dict) and "error" in body:
        assert body["error"]["code"] != "INTERNAL", r.text


def gql(http: httpx.Client, query: str, variables: dict[str, Any], token: str) -> dict[str, Any]:
    r = post(http, query, variables, token)
    assert r.status_code == 200 and "errors" not in r.json(), r.text
    return r.json()["data"]


async def _invariants(dsn: str) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        broken = []
        checks = {
            "claimed task without its live assignment": """
                SELECT t.id FROM tasks t LEFT JOIN assignments a ON a.id = t.assignment_id
                WHERE t.status = 'claimed' AND (a.id IS NULL OR a.status <> 'active'
                                                OR a.task_id <> t.id)""",
            "done task without a submitted assignment": """
                SELECT t.id FROM tasks t LEFT JOIN assignments a ON a.id = t.assignment_id
                WHERE t.status = 'done' AND (a.id IS NULL OR a.status <> 'submitted')""",
            "submitted assignment not paid exactly once": """
                SELECT a.id FROM assignments a LEFT JOIN payouts p ON p.assignment_id = a.id
                WHERE a.status = 'submitted' GROUP BY a.id HAVING count(p.id) <> 1""",
            "payment without a submitted assignment": """
                SELECT p.id FROM payouts p LEFT JOIN assignments a ON a.id = p.assignment_id
                WHERE p.kind = 'payment' AND (a.id IS NULL OR a.status <> 'submitted')""",
            "more tasks than redundancy per item": """
                SELECT i.id FROM items i JOIN projects p ON p.id = i.project_id
                JOIN tasks t ON t.item_id = i.id GROUP BY i.id, p.redundancy
                HAVING count(*) <> p.redundancy""",
            "open task in a canceled project": """
                SELECT t.id FROM tasks t JOIN projects p ON p.id = t.project_id
                WHERE p.status = 'canceled' AND t.status = 'open'""",
            "project outside validated ranges": """
                SELECT id FROM projects WHERE priority NOT BETWEEN -1000 AND 1000
                OR pay_cents > 10000000 OR min_quality NOT BETWEEN 0 AND 1""",
        }
        for what, sql in checks.items():
            if await conn.fetch(sql):
                broken.append(what)
        return broken
    finally:
        await conn.close()


def invariants(dsn: str) -> list[str]:
    # asyncpg from a synchronous test: run it on a private loop in another thread.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _invariants(dsn)).result(timeout=60)


def test_fuzz_every_mutation(database_url: str, tmp_path: Path) -> None:
    server = ServeProcess(
        database_url,
        tmp_path / "serve.log",
        TASKROUTE_ADMIN_TOKEN=ADMIN_TOKEN,
        TASKROUTE_SWEEP_INTERVAL="0.5",
        TASKROUTE_MAX_TASKS_PER_REQUEST="10",
    )
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            World.tokens["admin"] = ADMIN_TOKEN
            cust = gql(http, 'mutation { createCustomer(name: "c") { token } }', {}, ADMIN_TOKEN)
            World.tokens["customer"] = cust["createCustomer"]["token"]
            for role in ("expert", "expert2"):
                q = 'mutation { createExpert(name: "e", skills: [{skill: "s"}]) { token } }'
                World.tokens[role] = gql(http, q, {}, ADMIN_TOKEN)["createExpert"]["token"]
            q = "mutation($i: CreateProjectInput!) { createProject(input: $i) { project { id } } }"
            tasks = [{"skill": "s", "payload": {"n": i}} for i in range(8)]
            data = gql(http, q, {"i": {"name": "p", "tasks": tasks, "redundancy": 2}},
                       World.tokens["customer"])  # fmt: skip
            World.ids.append(data["createProject"]["project"]["id"])
            claim = gql(http, "mutation { claimNextTask { assignmentId } }", {},
                        World.tokens["expert"])  # fmt: skip
            World.ids.append(claim["claimNextTask"]["assignmentId"])

            @settings(
                max_examples=400,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            )
            @given(operations())
            def fuzz(op: tuple[str, dict[str, Any], str | None]) -> None:
                query, variables, token = op
                assert_clean(post(http, query, variables, token))

            fuzz()

            @settings(max_examples=80, deadline=None)
            @given(
                st.sampled_from(["/v1/projects", "/v1/tasks/next",
                                 f"/v1/assignments/{World.ids[-1]}/heartbeat",
                                 f"/v1/assignments/{World.ids[-1]}/submit"]),
                st.one_of(json_values.map(lambda v: json.dumps(v).encode()),
                          st.binary(max_size=50)),
                st.sampled_from(["customer", "expert", "admin"]),
            )  # fmt: skip
            def fuzz_rest(path: str, body: bytes, role: str) -> None:
                r = http.post(path, content=body, headers={
                    "Authorization": f"Bearer {World.tokens[role]}",
                    "Content-Type": "application/json"})  # fmt: skip
                assert_clean(r)

            fuzz_rest()
    finally:
        server.stop()
    assert invariants(database_url) == []
    log = (tmp_path / "serve.log").read_text()
    assert "unexpected error" not in log and "unhandled error" not in log
