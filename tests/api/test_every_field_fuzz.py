"""Every field of the schema, every role, arguments drawn from the argument types plus nasty
strings and numbers: no response is a 5xx or carries INTERNAL, and the server logs no error.

Schema-driven: the operations are built from the GraphQL schema itself, so a new field is
fuzzed the day it is added. Values come from a seeded generator (reproducible); CI runs a
fixed budget. For a longer local run:

    export TASKROUTE_FUZZ_EXAMPLES=40 TASKROUTE_FUZZ_SEED=7
    .venv/bin/pytest tests/api/test_every_field_fuzz.py

Ids are drawn from real objects of a small world (so the code behind the authorization checks
is reached too), random UUIDs and garbage.
"""

from __future__ import annotations

import json
import logging
import os
import random
import uuid
from typing import Any

import pytest
from graphql import (
    GraphQLEnumType,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    get_named_type,
)

from taskroute.schema.build import build_schema

from ..helpers import ADMIN_TOKEN, Api, tasks_of

EXAMPLES = int(os.environ.get("TASKROUTE_FUZZ_EXAMPLES", "6"))
SEED = int(os.environ.get("TASKROUTE_FUZZ_SEED", "20261130"))

NASTY_TEXT = ["", " ", "\x00", "a\x00b", "\ud800", "\u202e", "'; DROP TABLE tasks; --", "%s%n",
              "²", "٣", "9" * 30, "A" * 3000, "\U0001f600", "null", "-1", "1e999"]  # fmt: skip
NASTY_INT = [0, -1, 1, 2**31 - 1, -(2**31), 7, 1000, 100_000]
NASTY_FLOAT = [0.0, -1.0, 1e308, -1e308, 0.5, 1e-300, 2.0]
NASTY_TIME = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "2026-11-30T12:00:00Z",
              "2026-11-30T12:00:00", "not a date", "2026-02-30T00:00:00Z"]  # fmt: skip
NASTY_JSON: list[Any] = [None, 1, "x", [], {}, {"a": [1, {"b": None}]}, [[[]]], 10**30,
                         {"\x00": 1}, "A" * 2000]  # fmt: skip


class Values:
    """Argument values for a GraphQL input type."""

    def __init__(self, rng: random.Random, ids: list[str]) -> None:
        self.rng = rng
        self.ids = ids

    def of(self, t: GraphQLInputType, depth: int = 0) -> Any:
        if isinstance(t, GraphQLNonNull):
            return self.of(t.of_type, depth)
        if self.rng.random() < 0.08:
            return None  # a null where the type allows it (and sometimes where it does not)
        if isinstance(t, GraphQLList):
            return [self.of(t.of_type, depth + 1) for _ in range(self.rng.choice([0, 1, 2, 3]))]
        if isinstance(t, GraphQLEnumType):
            return self.rng.choice([*t.values, "NOT_A_VALUE"])
        if isinstance(t, GraphQLInputObjectType):
            if depth > 3:
                return {}
            return {
                name: self.of(field.type, depth + 1)
                for name, field in t.fields.items()
                if isinstance(field.type, GraphQLNonNull) or self.rng.random() < 0.6
            }
        assert isinstance(t, GraphQLScalarType)
        return self.scalar(t.name)

    def scalar(self, name: str) -> Any:
        r = self.rng
        if name == "ID":
            return r.choice([*self.ids, str(uuid.uuid4()), r.choice(NASTY_TEXT)])
        if name == "Int":
            return r.choice(NASTY_INT)
        if name == "Float":
            return r.choice(NASTY_FLOAT)
        if name == "Boolean":
            return r.choice([True, False])
        if name == "DateTime":
            return r.choice(NASTY_TIME)
        if name == "JSON":
            return r.choice(NASTY_JSON)
        return r.choice([*NASTY_TEXT, "grading", "s", f"tr_x_{uuid.uuid4().hex}"])


def _selection(t: Any, depth: int = 0) -> str:
    named = get_named_type(t)
    if not isinstance(named, GraphQLObjectType) or depth > 1:
        return ""
    scalars = [
        name
        for name, f in named.fields.items()
        if not isinstance(get_named_type(f.type), GraphQLObjectType) and not f.args
    ][:6]
    return "{ __typename " + " ".join(scalars) + " }"


def _operations() -> list[tuple[str, str, dict[str, GraphQLInputType]]]:
    schema = build_schema()._schema
    ops = []
    for kind, root in (("query", schema.query_type), ("mutation", schema.mutation_type)):
        assert root is not None
        for name, field in sorted(root.fields.items()):
            args = {a: f.type for a, f in field.args.items()}
            decl = ", ".join(f"${a}: {t}" for a, t in args.items())
            call = ", ".join(f"{a}: ${a}" for a in args)
            doc = (
                f"{kind}{f'({decl})' if decl else ''} {{ {name}"
                f"{f'({call})' if call else ''} {_selection(field.type)} }}"
            )
            ops.append((name, doc, args))
    return ops


async def test_every_field_every_role_no_internal_error(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    customer = await api.create_customer()
    expert = await api.create_expert(["grading"])
    created = await api.create_project(customer["token"], tasks_of("grading", 3))
    claim = await api.claim(expert["token"])
    assert claim is not None
    ids = [customer["id"], expert["id"], created["project"]["id"], claim["assignmentId"],
           claim["task"]["id"]]  # fmt: skip
    tokens = {"admin": ADMIN_TOKEN, "customer": customer["token"], "expert": expert["token"]}
    rng = random.Random(SEED)
    values = Values(rng, ids)
    failures: list[str] = []
    sent = 0
    caplog.set_level(logging.ERROR)
    for name, doc, args in _operations():
        for role, token in tokens.items():
            for _ in range(EXAMPLES):
                variables = {a: values.of(t) for a, t in args.items()}
                body = json.dumps({"query": doc, "variables": variables})
                r = await api.http.post(
                    "/graphql",
                    content=body,
                    headers={
                        "Authorization": f"Bearer {token}",
                        "Content-Type": "application/json",
                    },  # fmt: skip
                )
                sent += 1
                codes = {
                    (e.get("extensions") or {}).get("code") for e in (r.json().get("errors") or [])
                }
                if r.status_code >= 500 and codes != {"UNAVAILABLE"} or "INTERNAL" in codes:
                    failures.append(f"{name} as {role}: {r.status_code} {body[:300]} -> "
                                    f"{r.text[:300]}")  # fmt: skip
    errors = [rec.getMessage()[:200] for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert not failures, f"{len(failures)} of {sent} requests failed:\n" + "\n".join(failures[:15])
    assert not errors, f"the server logged errors: {errors[:10]}"
    assert sent >= len(tokens) * EXAMPLES * 20  # the schema really was walked
