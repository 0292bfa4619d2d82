"""Fuzz the REST API (from /openapi.json) and GraphQL (from its published schema) against a
real `taskroute serve` on a fresh database, as admin, customer and expert; no answer may be a
5xx, and no GraphQL error INTERNAL.

    .venv/bin/pip install -e '.[test,fuzz]'
    .venv/bin/python bench/fuzz.py --seconds 240 [--examples 60] [--pg postgresql://...]

Prints the counts: operations, cases, answers by status class, failures (each with a curl line
to replay it). Exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import graphql
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers import ADMIN_TOKEN, Api, tasks_of  # noqa: E402
from tests.procs import ServeProcess  # noqa: E402


def _register_scalars() -> None:
    """Our custom scalars, as GraphQL literals: JSON (any value) and DateTime (ISO or not)."""
    nodes = schemathesis.graphql.nodes
    leaves = st.one_of(
        st.text(max_size=20).map(nodes.String),
        st.integers(-(2**40), 2**40).map(nodes.Int),
        st.floats(allow_nan=False, allow_infinity=False).map(nodes.Float),
        st.booleans().map(nodes.Boolean),
    )
    json_nodes = st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4).map(nodes.List),
            st.dictionaries(st.from_regex(r"\A[a-z_]{1,8}\Z"), inner, max_size=4).map(
                lambda d: nodes.Object(
                    [
                        graphql.ObjectFieldNode(name=graphql.NameNode(value=k), value=v)
                        for k, v in d.items()
                    ]
                )
            ),
        ),
        max_leaves=8,
    )
    schemathesis.graphql.scalar("JSON", json_nodes)
    instants = st.datetimes(timezones=st.timezones()).map(lambda t: t.isoformat())
    schemathesis.graphql.scalar(
        "DateTime", st.one_of(instants, st.text(max_size=30)).map(nodes.String)
    )


@dataclass
class Tally:
    deadline: float
    operations: int = 0
    cases: int = 0
    classes: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)

    def record(self, case: Any, response: Any, role: str, graphql: bool) -> None:
        self.cases += 1
        status = response.status_code
        self.classes[f"{status // 100}xx"] += 1
        problem = f"{status}" if status >= 500 else None
        if graphql and problem is None:
            try:
                body = json.loads(response.content or b"{}")
            except ValueError:
                body = {}
            codes = {
                (e.get("extensions") or {}).get("code")
                for e in (body.get("errors") or [])
                if isinstance(e, dict)
            }
            if "INTERNAL" in codes:
                problem = "INTERNAL"
        if problem is not None:
            key = f"{case.operation.label} {problem}"
            if key not in self.seen:  # one line per operation and kind
                self.seen.add(key)
                self.failures.append(
                    f"[{role}] {key}: {response.content[:300]!r}\n    {case.as_curl_command()}"
                )


def fuzz_schema(
    schema: Any, tokens: dict[str, str], tally: Tally, examples: int, graphql: bool
) -> None:
    for result in schema.get_all_operations():
        op = result.ok()
        tally.operations += 1
        strategy = op.as_strategy()
        for role, token in tokens.items():
            if time.monotonic() > tally.deadline:
                return
            headers = {"Authorization": f"Bearer {token}"}

            with contextlib.suppress(Unsatisfiable):  # a schema no case satisfies
                _run(strategy, examples, role, headers, tally, graphql)


def _run(
    strategy: Any, examples: int, role: str, headers: dict[str, str], tally: Tally, graphql: bool
) -> None:
    @given(case=strategy)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        if time.monotonic() > tally.deadline:
            return
        response = case.call(headers=headers, timeout=30)
        tally.record(case, response, role, graphql)

    run()


async def world(url: str) -> dict[str, str]:
    """Tokens of each kind, and something for them to find: a project with tasks, one claimed
    and one answered."""
    async with Api(url) as api:
        customer = await api.create_customer()
        expert = await api.create_expert(["grading"])
        await api.create_project(customer["token"], tasks_of("grading", 5), name="fuzz")
        claim = await api.claim(expert["token"])
        assert claim is not None
        await api.submit(expert["token"], claim["assignmentId"], {"grade": 1})
        await api.claim(expert["token"])
    return {"admin": ADMIN_TOKEN, "customer": customer["token"], "expert": expert["token"]}


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=240, help="time budget for cases")
    parser.add_argument("--examples", type=int, default=60, help="cases per operation and role")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--only", choices=["rest", "graphql"], default=None)
    args = parser.parse_args()
    _register_scalars()

    name = f"taskroute_fuzz_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(args.pg)
    await admin.execute(f'CREATE DATABASE "{name}"')
    log = ROOT / "test-output" / f"fuzz-{name}.log"
    server = ServeProcess(args.pg.rsplit("/", 1)[0] + f"/{name}", log)
    try:
        server.start()
        tokens = await world(server.url)
        t0 = time.monotonic()
        tally = Tally(deadline=t0 + args.seconds)
        parts = ["rest", "graphql"] if args.only is None else [args.only]
        for part in parts:
            if part == "rest":
                schema: Any = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
            else:
                auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
                schema = schemathesis.graphql.from_url(f"{server.url}/graphql", headers=auth)
            # GraphQL's share of the budget starts when REST's ends
            await asyncio.to_thread(
                fuzz_schema, schema, tokens, tally, args.examples, part == "graphql"
            )
            print(f"{part}: done at {time.monotonic() - t0:.0f} s", flush=True)
        print(f"operations: {tally.operations}")
        print(f"cases: {tally.cases}")
        print("status classes: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.classes.items())))
        print(f"failures: {len(tally.failures)}")
        for line in tally.failures:
            print("  " + line)
        print(f"server log: {log}")
        return 1 if tally.failures else 0
    finally:
        server.stop()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
