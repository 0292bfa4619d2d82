"""Answer schemas: what the worst schema-and-answer pairs within the caps cost.

Run by hand (never part of the test suite's pass/fail); prints figures:

    PYTHONPATH=. .venv/bin/python bench/answer_schema.py            # libraries, then the server
    PYTHONPATH=. .venv/bin/python bench/answer_schema.py --no-server

1. Libraries: each (candidate, case) runs in its own subprocess with a time limit, and prints
   ms per validation (best of a few). Candidates: python `jsonschema` as the service used it,
   python `jsonschema` with `pattern`/`patternProperties` on google-re2 and a hashed
   `uniqueItems`, and `jsonschema-rs` as taskroute.resolvers.answer_schema configures it
   (Rust `regex` engine, offline). Cases stay within the caps (schema <= 64 KB, answer <= 256 KB).
2. Server: `taskroute serve` on a fresh database; experts submit the costly answers in a loop
   while a probe measures /healthz latency (p50/p99/max); the acceptance is max < 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

LIMIT_S = 20.0


def cases() -> dict[str, tuple[Any, Any]]:
    """name -> (schema, answer): the worst pairs found within the caps."""
    out: dict[str, tuple[Any, Any]] = {}
    out["pattern ^(a+)+$, 24 a + !"] = ({"type": "string", "pattern": "^(a+)+$"}, "a" * 24 + "!")
    out["pattern ^(a+)+$, 200k a + !"] = (
        {"type": "string", "pattern": "^(a+)+$"},
        "a" * 200_000 + "!",
    )
    pp = {f"^(x+)+y{i}$": {"type": "integer"} for i in range(300)}
    out["300 patternProperties, 4000 keys"] = (
        {"type": "object", "patternProperties": pp},
        {"x" * 40 + f"!{i}": i for i in range(4000)},
    )
    out["uniqueItems, 8000 objects"] = (
        {"type": "array", "uniqueItems": True},
        [{"k": i, "v": "x"} for i in range(8000)],
    )
    out["uniqueItems, 40000 ints"] = ({"type": "array", "uniqueItems": True}, list(range(40000)))
    nested: Any = {"type": "integer"}
    for _ in range(15):
        nested = {"type": "array", "items": nested}
    answer: Any = 1
    for _ in range(15):
        answer = [answer, answer]  # 2^15 leaves
    out["15 nested items, 32k leaves"] = (nested, answer)
    out["enum of 4000, 25000 misses"] = (
        {"type": "array", "items": {"enum": [f"v{i:06d}" for i in range(4000)]}},
        ["zzzzzzz"] * 25000,
    )
    out["anyOf 2000 consts, 25000 items"] = (
        {"type": "array", "items": {"anyOf": [{"const": f"v{i}"} for i in range(2000)]}},
        ["v1999"] * 25000,
    )
    defs: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(300)}
    defs["d300"] = {"type": "array", "items": {"type": "integer"}}
    out["chain of 300 refs, 40000 ints"] = (
        {"$defs": defs, "$ref": "#/$defs/d0"},
        list(range(40000)),
    )
    tree = {
        "$defs": {
            "n": {
                "type": "object",
                "properties": {"c": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
            }
        },
        "$ref": "#/$defs/n",
    }
    node: Any = {"c": []}
    for _ in range(12):
        node = {"c": [node, node]}
    out["recursive tree, 8k nodes"] = (tree, node)
    return out


def candidate(name: str) -> Any:
    """A function validating (schema, answer) -> error or None, as each candidate would."""
    if name == "jsonschema":
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import best_match

        def py(schema: Any, value: Any) -> Any:
            return best_match(Draft202012Validator(schema).iter_errors(value))

        return py
    if name == "jsonschema+re2":
        import re2
        from jsonschema import Draft202012Validator, validators
        from jsonschema._keywords import patternProperties as _unused  # noqa: F401
        from jsonschema.exceptions import ValidationError, best_match

        def pattern(v: Any, patrn: str, instance: Any, schema: Any) -> Any:
            if isinstance(instance, str) and not re2.search(patrn, instance):
                yield ValidationError(f"{instance!r} does not match {patrn!r}")

        def pattern_properties(v: Any, pats: Any, instance: Any, schema: Any) -> Any:
            if not isinstance(instance, dict):
                return
            for p, sub in pats.items():
                rx = re2.compile(p)
                for k, val in instance.items():
                    if rx.search(k):
                        yield from v.descend(val, sub, path=k, schema_path=p)

        def unique(v: Any, uniq: bool, instance: Any, schema: Any) -> Any:
            if uniq and isinstance(instance, list):
                keys = [json.dumps(x, sort_keys=True) for x in instance]
                if len(set(keys)) != len(keys):
                    yield ValidationError("has non-unique elements")

        cls = validators.extend(
            Draft202012Validator,
            {"pattern": pattern, "patternProperties": pattern_properties, "uniqueItems": unique},
        )

        def py_re2(schema: Any, value: Any) -> Any:
            return best_match(cls(schema).iter_errors(value))

        return py_re2
    if name == "jsonschema-rs":
        from taskroute.resolvers import answer_schema

        def rs(schema: Any, value: Any) -> Any:
            return answer_schema.error_of(schema, value)

        return rs
    raise ValueError(name)


CANDIDATES = ("jsonschema", "jsonschema+re2", "jsonschema-rs")


def one(cand: str, case: str) -> None:
    """In a subprocess: ms per validation (best of 3, the compile cached where it is)."""
    schema, value = cases()[case]
    validate = candidate(cand)
    best = float("inf")
    verdict = None
    for _ in range(3):
        t0 = time.perf_counter()
        try:
            verdict = validate(schema, value)
        except Exception as exc:  # a refused schema is an outcome too
            print(f"refused: {str(exc)[:70]}")
            return
        best = min(best, time.perf_counter() - t0)
    print(f"{best * 1000:10.2f} ms  {'invalid' if verdict else 'valid'}")


def libraries() -> None:
    names = list(cases())
    print(
        f"{'case':<36} {'schema KB':>9} {'answer KB':>9}  "
        + "  ".join(f"{c:>22}" for c in CANDIDATES)
    )
    for case in names:
        schema, value = cases()[case]
        kb = (len(json.dumps(schema)) / 1024, len(json.dumps(value)) / 1024)
        row = f"{case:<36} {kb[0]:9.1f} {kb[1]:9.1f}  "
        for cand in CANDIDATES:
            try:
                out = subprocess.run(
                    [sys.executable, __file__, "--one", cand, case],
                    capture_output=True,
                    text=True,
                    timeout=LIMIT_S,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                )
                cell = (out.stdout.strip() or out.stderr.strip().splitlines()[-1])[:22]
            except subprocess.TimeoutExpired:
                cell = f"> {LIMIT_S:.0f} s"
            row += f"{cell:>22}  "
        print(row, flush=True)


async def server(seconds: float) -> None:
    import httpx
    from claim import ADMIN_TOKEN, drop_db, start_server, temp_db

    admin = os.environ.get("PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")
    name, dsn = await temp_db(admin, "answer_schema")
    proc, port = await start_server(dsn, 1, 8)
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=url, timeout=120) as http:

            async def gql(q: str, v: dict[str, Any], token: str) -> Any:
                r = await http.post(
                    "/graphql",
                    json={"query": q, "variables": v},
                    headers={"Authorization": f"Bearer {token}"},
                )
                return r.json()

            cust = await gql('mutation { createCustomer(name: "c") { token } }', {}, ADMIN_TOKEN)
            token = cust["data"]["createCustomer"]["token"]
            exp = await gql(
                'mutation($s: [SkillInput!]!) { createExpert(name: "e", skills: $s) { token } }',
                {"s": [{"skill": "g"}]},
                ADMIN_TOKEN,
            )
            etoken = exp["data"]["createExpert"]["token"]
            pairs = [
                cases()[k]
                for k in (
                    "pattern ^(a+)+$, 200k a + !",
                    "uniqueItems, 8000 objects",
                    "anyOf 2000 consts, 25000 items",
                    "300 patternProperties, 4000 keys",
                )
            ]
            for i, (schema, _) in enumerate(pairs):
                r = await gql(
                    "mutation($i: CreateProjectInput!) { createProject(input: $i) { accepted } }",
                    {
                        "i": {
                            "name": f"p{i}",
                            "tasks": [{"skill": "g", "payload": i}],
                            "answerSchema": schema,
                        }
                    },
                    token,
                )
                assert "errors" not in r, r
            claim = "mutation { claimNextTask { assignmentId } }"
            aids = []
            for _ in pairs:
                r = await gql(claim, {}, etoken)
                aids.append(r["data"]["claimNextTask"]["assignmentId"])
            submit = "mutation($a: ID!, $x: JSON!) { submit(assignmentId: $a, answer: $x) { id } }"
            submits = 0
            submit_times: list[float] = []
            stop = time.monotonic() + seconds

            async def submitter(k: int) -> None:
                nonlocal submits
                while time.monotonic() < stop:
                    # the answers break the schema (refused, lease kept), so they can repeat
                    t0 = time.perf_counter()
                    await gql(submit, {"a": aids[k], "x": _breaking(pairs[k][1])}, etoken)
                    submit_times.append(time.perf_counter() - t0)
                    submits += 1

            lat: list[float] = []

            async def probe() -> None:
                async with httpx.AsyncClient(base_url=url, timeout=30) as h:
                    while time.monotonic() < stop:
                        t0 = time.perf_counter()
                        r = await h.get("/healthz")
                        lat.append(time.perf_counter() - t0)
                        assert r.status_code == 200
                        await asyncio.sleep(0.01)

            await asyncio.gather(probe(), *(submitter(k) for k in range(len(pairs))))
            lat.sort()
            submit_times.sort()
            print(
                f"server: {submits} costly submits in {seconds:.0f} s"
                f" (p50 {1000 * submit_times[len(submit_times) // 2]:.1f} ms);"
                f" /healthz n={len(lat)} p50 {1000 * lat[len(lat) // 2]:.1f} ms"
                f" p99 {1000 * lat[int(len(lat) * 0.99)]:.1f} ms max {1000 * lat[-1]:.1f} ms"
                f" (acceptance: max < 100 ms: {'met' if lat[-1] < 0.1 else 'NOT met'})"
            )
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        await drop_db(admin, name)


def _breaking(answer: Any) -> Any:
    """A version of `answer` the schema refuses (so the lease stays and it can be resent)."""
    if isinstance(answer, str):
        return answer  # the `!` already breaks the pattern
    if isinstance(answer, list):
        return [*answer, answer[0]] if isinstance(answer[0], dict) else [*answer, "nope"]
    return {**answer, "x" * 40 + "y7": "not an integer"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", nargs=2)
    ap.add_argument("--no-server", action="store_true")
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    if args.one:
        one(*args.one)
        return
    import platform

    print(f"python {platform.python_version()}, {os.cpu_count()} cores")
    libraries()
    if not args.no_server:
        asyncio.run(server(args.seconds))


if __name__ == "__main__":
    main()
