"""A token never exceeds its scope: what each kind of token may do with credentials and
accounts (admin, account-wide customer, project-limited customer, read-only, read-only
project-limited, expert, another customer's).

The matrix test derives the fields to cover from the schema (and the REST routes), so a
credential or account field added later fails it until the matrix says who may use it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from graphql import GraphQLObjectType

from taskroute import rest
from taskroute.schema.accounts import AccountCreationMutation, AccountsMutation, AccountsQuery
from taskroute.schema.build import build_schema

from ..helpers import ADMIN_TOKEN, Api, tasks_of

KINDS = ("admin", "customer", "project", "read_only", "read_only_project", "expert", "other")
OK = "ok"

CREATE = """mutation($c: ID, $p: ID, $r: Boolean! = false) {
  createCredential(customerId: $c, projectId: $p, readOnly: $r, label: "m") {
    token credential { id projectId readOnly customerId } } }"""
REVOKE = "mutation($i: ID!) { revokeCredential(id: $i) { id revokedAt projectId } }"
ROTATE = """mutation($i: ID!) { rotateCredential(id: $i, graceSeconds: 0) {
  token credential { id projectId readOnly customerId } } }"""
LIST = "query($c: ID) { credentials(customerId: $c) { id projectId customerId expertId } }"
ME = """{ me { role projectId readOnly customer { id projectsSummary {
  projects active completed canceled tasks done remaining } } } }"""


@dataclass
class World:
    api: Api
    customer: dict[str, str]  # id, token (account-wide)
    one: str  # a project of the customer (the project tokens' project)
    two: str  # another project of the customer
    expert: dict[str, str]
    other: dict[str, str]
    tokens: dict[str, str] = field(default_factory=dict)

    async def issue(self, project: str | None = None, read_only: bool = False) -> dict[str, Any]:
        """A credential of the customer, issued by the admin (a target, or a token to use)."""
        variables = {"c": self.customer["id"], "p": project, "r": read_only}
        data = await self.api.gql(CREATE, variables, ADMIN_TOKEN)
        issued: dict[str, Any] = data["createCredential"]
        return issued


async def build_world(api: Api) -> World:
    customer = await api.create_customer("acme")
    one = (await api.create_project(customer["token"], tasks_of("grading", 1)))["project"]["id"]
    two = (await api.create_project(customer["token"], tasks_of("grading", 2)))["project"]["id"]
    w = World(
        api,
        customer,
        one,
        two,
        await api.create_expert(["grading"]),
        await api.create_customer("other"),
    )
    w.tokens = {
        "admin": ADMIN_TOKEN,
        "customer": customer["token"],
        "project": (await w.issue(one))["token"],
        "read_only": (await w.issue(read_only=True))["token"],
        "read_only_project": (await w.issue(one, read_only=True))["token"],
        "expert": w.expert["token"],
        "other": w.other["token"],
    }
    return w


async def outcome(api: Api, doc: str, variables: dict[str, Any], token: str) -> tuple[str, Any]:
    body = await api.gql_raw(doc, variables, token)
    if body.get("errors"):
        return str(body["errors"][0].get("extensions", {}).get("code")), body["errors"]
    return OK, body["data"]


# --- the cases ----------------------------------------------------------------------------

Prepare = Callable[[World], Awaitable[tuple[str, dict[str, Any]]]]
Check = Callable[[World, str, Any], None]


@dataclass(frozen=True)
class Case:
    what: str
    prepare: Prepare  # run before each call (fresh targets: calls may revoke or disable)
    expect: dict[str, str]
    check: Check | None = None  # on an allowed call: what it returned stays within scope


def admin_only(mutation: bool) -> dict[str, str]:
    """The admins' fields: not found for everyone else; a read-only token is refused every
    mutation before anything else (FORBIDDEN)."""
    refused = {k: "NOT_FOUND" for k in KINDS if k != "admin"}
    if mutation:
        refused |= {"read_only": "FORBIDDEN", "read_only_project": "FORBIDDEN"}
    return {"admin": OK, **refused}


def fixed(doc: str, variables: dict[str, Any] | None = None) -> Prepare:
    async def prepare(w: World) -> tuple[str, dict[str, Any]]:
        return doc, variables or {}

    return prepare


def with_target(doc: str, project: Callable[[World], str | None]) -> Prepare:
    """`doc` on a fresh credential of the customer (account-wide when `project` gives None)."""

    async def prepare(w: World) -> tuple[str, dict[str, Any]]:
        target = await w.issue(project(w))
        return doc, {"i": target["credential"]["id"]}

    return prepare


async def new_expert(w: World, disabled: bool = False) -> str:
    e = await w.api.create_expert(["grading"], name=f"target-{uuid.uuid4().hex[:6]}")
    if disabled:
        await w.api.gql(
            'mutation($e: ID!) { deactivateExpert(expertId: $e, reason: "t") { leasesReleased } }',
            {"e": e["id"]},
            ADMIN_TOKEN,
        )
    return e["id"]


def on_expert(doc: str, disabled: bool = False) -> Prepare:
    async def prepare(w: World) -> tuple[str, dict[str, Any]]:
        return doc, {"e": await new_expert(w, disabled)}

    return prepare


def scoped_to(kind: str, w: World) -> str | None:
    return w.one if kind in ("project", "read_only_project") else None


def check_me(w: World, kind: str, data: Any) -> None:
    me = data["me"]
    assert me["projectId"] == scoped_to(kind, w)
    if kind in ("customer", "read_only"):
        assert me["customer"]["projectsSummary"]["projects"] == 2
        assert me["customer"]["projectsSummary"]["tasks"] == 3
    if kind in ("project", "read_only_project"):
        # the project token's summary counts its own project only
        assert me["customer"]["projectsSummary"] == {
            "projects": 1, "active": 1, "completed": 0, "canceled": 0,
            "tasks": 1, "done": 0, "remaining": 1,
        }  # fmt: skip


def check_listed(w: World, kind: str, data: Any) -> None:
    rows = data["credentials"]
    assert rows
    assert all(r["customerId"] == w.customer["id"] for r in rows)
    limit = scoped_to(kind, w)
    if limit is not None:
        assert {r["projectId"] for r in rows} == {limit}, rows
    else:
        assert None in {r["projectId"] for r in rows}  # the account-wide ones too


def check_same_scope(project: Callable[[World], str | None]) -> Check:
    def check(w: World, kind: str, data: Any) -> None:
        issued = next(iter(data.values()))
        assert issued["credential"]["projectId"] == project(w), issued
        assert issued["credential"]["readOnly"] is False

    return check


def creation(project: Callable[[World], str | None]) -> Prepare:
    async def prepare(w: World) -> tuple[str, dict[str, Any]]:
        return CREATE, {"c": w.customer["id"], "p": project(w)}

    return prepare


def acct(w: World) -> str | None:
    return None


def one(w: World) -> str | None:
    return w.one


def two(w: World) -> str | None:
    return w.two


def credential_write(what: str, project: Callable[[World], str | None]) -> dict[str, str]:
    """Who may create / revoke / rotate a credential of the customer limited to `project`."""
    expect = {
        "admin": OK,
        "customer": OK,
        "read_only": "FORBIDDEN",
        "read_only_project": "FORBIDDEN",
        "expert": "NOT_FOUND",
        "other": "NOT_FOUND",
    }
    # a project token: its own project's credentials only; an account-wide one would widen
    # its scope, another project's is out of sight
    if what == "createCredential" and project is acct:
        expect["project"] = "FORBIDDEN"
    else:
        expect["project"] = OK if project is one else "NOT_FOUND"
    return expect


SCOPES = {"account-wide": acct, "project one": one, "project two": two}

MATRIX: dict[str, list[Case]] = {
    "me": [Case("me", fixed(ME), dict.fromkeys(KINDS, OK), check_me)],
    "credentials": [
        Case(
            "the customer's credentials",
            lambda w: fixed(LIST, {"c": w.customer["id"]})(w),
            {**dict.fromkeys(KINDS, OK), "expert": "NOT_FOUND", "other": "NOT_FOUND"},
            check_listed,
        ),
        Case(
            "their own credentials",
            fixed("{ credentials { id customerId expertId } }"),
            {**dict.fromkeys(KINDS, OK), "admin": "BAD_INPUT"},
        ),
    ],
    "customers": [Case("list", fixed("{ customers { edges { cursor } } }"), admin_only(False))],
    "experts": [Case("list", fixed("{ experts { edges { cursor } } }"), admin_only(False))],
    "expert": [
        Case("one", on_expert("query($e: ID!) { expert(id: $e) { id } }"), admin_only(False))
    ],
    "adminAudit": [Case("audit", fixed("{ adminAudit { edges { cursor } } }"), admin_only(False))],
    "createCustomer": [
        Case("create", fixed('mutation { createCustomer(name: "n") { id } }'), admin_only(True))
    ],
    "createExpert": [
        Case(
            "create",
            fixed('mutation { createExpert(name: "n", skills: [{skill: "s"}]) { id } }'),
            admin_only(True),
        )
    ],
    "grantSkill": [
        Case(
            "grant",
            on_expert('mutation($e: ID!) { grantSkill(expertId: $e, skill: "new") { id } }'),
            admin_only(True),
        )
    ],
    "removeSkill": [
        Case(
            "remove",
            on_expert('mutation($e: ID!) { removeSkill(expertId: $e, skill: "grading") { id } }'),
            admin_only(True),
        )
    ],
    "setStartingQuality": [
        Case(
            "set",
            on_expert(
                'mutation($e: ID!) { setStartingQuality(expertId: $e, skill: "grading",'
                " quality: 0.5) { id } }"
            ),
            admin_only(True),
        )
    ],
    "setCapabilities": [
        Case(
            "set",
            on_expert(
                "mutation($e: ID!) { setCapabilities(expertId: $e, capabilities: []) { id } }"
            ),
            admin_only(True),
        )
    ],
    "deactivateExpert": [
        Case(
            "deactivate",
            on_expert(
                'mutation($e: ID!) { deactivateExpert(expertId: $e, reason: "r")'
                " { leasesReleased } }"
            ),
            admin_only(True),
        )
    ],
    "reactivateExpert": [
        Case(
            "reactivate",
            on_expert("mutation($e: ID!) { reactivateExpert(expertId: $e) { id } }", True),
            admin_only(True),
        )
    ],
    "createCredential": [
        Case(
            f"{name} credential",
            creation(project),
            credential_write("createCredential", project),
            check_same_scope(project),
        )
        for name, project in SCOPES.items()
    ],
    "revokeCredential": [
        Case(
            f"{name} credential",
            with_target(REVOKE, project),
            credential_write("revokeCredential", project),
        )
        for name, project in SCOPES.items()
    ],
    "rotateCredential": [
        Case(
            f"{name} credential",
            with_target(ROTATE, project),
            credential_write("rotateCredential", project),
            check_same_scope(project),  # a rotation never widens (nor narrows) the scope
        )
        for name, project in SCOPES.items()
    ],
}

# Everything that touches credentials or accounts: fields named so, and every field of the
# accounts module's root types.
NAMED = re.compile(r"credential|customer|account|token|^me$", re.IGNORECASE)
REST_NAMED = re.compile(r"credential|customer|account|token|/me\b", re.IGNORECASE)
REST_MATRIX: dict[str, list[Case]] = {}  # no REST route touches credentials or accounts


def _camel(name: str) -> str:
    head, *rest_ = name.split("_")
    return head + "".join(p.title() for p in rest_)


def account_fields() -> set[str]:
    schema = build_schema()._schema
    roots = [schema.query_type, schema.mutation_type, schema.subscription_type]
    named = {n for root in roots if root is not None for n in root.fields if NAMED.search(n)}
    owned = {
        _camel(f.python_name)
        for cls in (AccountsQuery, AccountsMutation, AccountCreationMutation)
        for f in cls.__strawberry_definition__.fields  # type: ignore[attr-defined]
    }
    return named | owned


def test_the_matrix_covers_every_credential_and_account_field() -> None:
    """A new credential or account field (or REST route) fails here until the matrix below
    says who may use it; so does a new field on `Me` or `Customer` (what `me` shows)."""
    assert set(MATRIX) == account_fields()
    routes = {getattr(r, "path", "") for r in rest.routes}
    assert {p for p in routes if REST_NAMED.search(p)} == set(REST_MATRIX)
    for case in (c for cases in MATRIX.values() for c in cases):
        assert set(case.expect) == set(KINDS), case.what
    schema = build_schema()._schema
    shown = {
        name: set(t.fields)
        for name in ("Me", "Customer", "ProjectsSummary")
        if isinstance(t := schema.type_map[name], GraphQLObjectType)
    }
    # each of these is scoped (or checked by check_me): a new one needs a look first
    assert shown == {
        "Me": {"role", "id", "name", "credentialId", "readOnly", "projectId", "expiresAt",
               "expert", "customer"},
        "Customer": {"id", "name", "createdAt", "projectsSummary"},
        "ProjectsSummary": {"projects", "active", "completed", "canceled", "tasks", "done",
                            "remaining"},
    }  # fmt: skip


async def test_every_kind_of_token_against_every_credential_and_account_field(api: Api) -> None:
    w = await build_world(api)
    seen: list[str] = []
    for name, cases in sorted(MATRIX.items()):
        for case in cases:
            for kind in KINDS:
                doc, variables = await case.prepare(w)
                got, data = await outcome(api, doc, variables, w.tokens[kind])
                assert got == case.expect[kind], (name, case.what, kind, data)
                if got == OK and case.check is not None:
                    case.check(w, kind, data)
                seen.append(f"{name}/{case.what}/{kind}")
    assert len(seen) == len(KINDS) * sum(len(c) for c in MATRIX.values())
    # the customer's own tokens all still work (no call above touched them)
    for kind, token in w.tokens.items():
        assert (await outcome(api, "{ me { role } }", {}, token))[0] == OK, kind


# --- the findings, one by one ----------------------------------------------------------------


async def test_project_token_cannot_rotate_or_revoke_the_account_wide_credential(
    api: Api,
) -> None:
    w = await build_world(api)
    token = w.tokens["project"]
    me = (await api.gql("{ me { credentialId } }", token=w.customer["token"]))["me"]
    wide = me["credentialId"]
    assert (await outcome(api, ROTATE, {"i": wide}, token))[0] == "NOT_FOUND"
    assert (await outcome(api, REVOKE, {"i": wide}, token))[0] == "NOT_FOUND"
    # the account-wide token still works, and nothing was issued from it
    listed = (await api.gql(LIST, {"c": w.customer["id"]}, ADMIN_TOKEN))["credentials"]
    assert (await outcome(api, "{ me { role } }", {}, w.customer["token"]))[0] == OK
    assert len(listed) == 4  # initial, project, read-only, read-only project
    # its own credential rotates into a token as narrow as itself
    own = (await api.gql("{ me { credentialId } }", token=token))["me"]["credentialId"]
    rotated = (await api.gql(ROTATE, {"i": own}, token))["rotateCredential"]
    assert rotated["credential"]["projectId"] == w.one
    new = rotated["token"]
    project = "query($p: ID!) { project(id: $p) { id } }"
    assert (await outcome(api, project, {"p": w.two}, new))[0] == "NOT_FOUND"
    mine = (await api.gql("{ credentials { projectId } }", token=new))["credentials"]
    assert {c["projectId"] for c in mine} == {w.one}
    # and it issues no account-wide token either
    assert (await outcome(api, CREATE, {"p": None}, new))[0] == "FORBIDDEN"


async def test_project_token_summary_counts_its_project_only(api: Api) -> None:
    w = await build_world(api)
    got = await api.gql(ME, token=w.tokens["project"])
    summary = got["me"]["customer"]["projectsSummary"]
    assert (summary["projects"], summary["tasks"], summary["remaining"]) == (1, 1, 1)
    wide = await api.gql(ME, token=w.customer["token"])
    assert wide["me"]["customer"]["projectsSummary"]["projects"] == 2
    admin_view = await api.gql(
        "{ customers { edges { node { id projectsSummary { projects tasks } } } } }",
        token=ADMIN_TOKEN,
    )
    acme = next(
        e["node"] for e in admin_view["customers"]["edges"] if e["node"]["id"] == w.customer["id"]
    )
    assert acme["projectsSummary"] == {"projects": 2, "tasks": 3}
