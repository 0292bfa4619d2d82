"""Answer schemas: a project, or one item, says what an answer is (JSON Schema).

The schema is checked when it is declared (a wrong schema is BAD_INPUT naming where it is
wrong), gold answers are checked against it when they are stored, and `submit` refuses an
answer that does not conform with BAD_INPUT naming the answer's JSON path, before anything is
written (the lease stays; the expert corrects and submits again).

Schemas never change once stored (a project's at creation, an item's with the item): changing
what an answer is halfway through would make answers already given non-conforming. That is
why compiled validators may be cached per process without any invalidation, keyed by the
schema's canonical text (a project's items usually share one).

Customers write these schemas, so each one must cost a bounded amount whoever wrote it:
- no network, ever: a `$ref` outside the schema is refused when declared, and the validator
  runs offline (it has no way to fetch);
- regexes (`pattern`, `patternProperties`) run on a finite-automaton engine (Rust `regex`,
  linear time; backreferences and lookaround are refused when declared);
- `uniqueItems` is hashed (jsonschema-rs), not pairwise;
- a `$ref` cycle that never descends into the answer is refused, and so is a schema whose
  worst case applies more than MAX_EVALUATIONS subschemas to one JSON value (`allOf` of two
  refs to `allOf` of two refs ... doubles at every level);
- a large answer is validated in a worker process, so the event loop is never held, and one
  that takes longer than VALIDATION_DEADLINE is refused.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import multiprocessing
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, NoReturn

import jsonschema_rs

from taskroute.errors import BadInput

MAX_SCHEMA_BYTES = 64 * 1024
# JSON nesting of the schema document: each subschema level is one or two JSON levels
# (`items` is one, `properties.name` two); real answer schemas stay well below.
MAX_SCHEMA_DEPTH = 32
# Subschemas the worst case applies to one JSON value of an answer (enum entries count one
# each): keeps the cost of a value small and rules out schemas that double at every level.
MAX_EVALUATIONS = 4096
# Answers up to this many bytes (canonical JSON) are validated in the event loop; larger ones
# (or schemas with a large per-value cost) in the worker process.
INLINE_COST = 64 * 1024
VALIDATION_DEADLINE = 2.0
# Answer nesting is bounded by validation.MAX_JSON_DEPTH; the cost walk goes that deep.
_ANSWER_DEPTH = 64

_CACHE_SIZE = 1024
_compiled: OrderedDict[str, _Compiled] = OrderedDict()

_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
_DESCEND_ONE = (
    "additionalProperties",
    "items",
    "additionalItems",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_DESCEND_MAP = ("properties", "patternProperties")
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


@dataclass(frozen=True)
class _Compiled:
    validator: jsonschema_rs.Validator
    per_value: int  # the worst-case number of subschemas applied to one JSON value


def _path(parts: Any) -> str:
    """`$.a[0].b`: the JSONPath of a validation error, for messages and `extensions.path`."""
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _field(where: str, path: str) -> str:
    return where + path[1:]  # "answer" + ".label" -> "answer.label"


def _refuse(where: str, parts: list[str | int], why: str) -> NoReturn:
    path = _path(parts)
    raise BadInput(
        f"{where} is not a valid JSON Schema at {path}: {why}", field=_field(where, path), path=path
    )


def _compile(schema: Any) -> jsonschema_rs.Validator:
    return jsonschema_rs.validator_for(
        schema,
        offline=True,  # no retriever: a reference outside the schema fails, never fetches
        pattern_options=jsonschema_rs.RegexOptions(),
        validate_formats=False,
    )


def check_schema(schema: Any, where: str) -> dict[str, Any] | bool:
    """The declared schema itself, or BAD_INPUT naming where (in the schema) it is wrong."""
    from taskroute.resolvers.json_values import json_value

    if not isinstance(schema, dict | bool):
        raise BadInput(f"{where} must be a JSON Schema (an object)", field=where)
    json_value(schema, where, MAX_SCHEMA_BYTES)
    _check_depth(schema, where)
    _check_refs(schema, where)
    try:
        jsonschema_rs.meta.validate(schema)
        compiled = _compile(schema)
    except jsonschema_rs.ValidationError as exc:
        _refuse(where, list(exc.instance_path), exc.message)
    except (ValueError, jsonschema_rs.ReferencingError) as exc:
        raise BadInput(f"{where} is not a valid JSON Schema: {exc}", field=where) from exc
    per_value = _Cost(schema, where).per_value()
    _remember(_key(schema), _Compiled(compiled, per_value))
    return schema


def _check_depth(schema: Any, where: str) -> None:
    stack: list[tuple[Any, list[str | int]]] = [(schema, [])]
    while stack:
        node, parts = stack.pop()
        if len(parts) > MAX_SCHEMA_DEPTH:
            _refuse(where, parts, f"nested deeper than {MAX_SCHEMA_DEPTH} levels")
        if isinstance(node, dict):
            stack.extend((v, [*parts, k]) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, [*parts, i]) for i, v in enumerate(node))


def _subschemas(node: dict[str, Any]) -> Iterator[tuple[list[str | int], Any, bool]]:
    """(relative path, subschema, descends into the value) for every subschema keyword."""
    for key in _IN_PLACE_ONE:
        if key in node:
            yield [key], node[key], False
    for key in _IN_PLACE_MANY:
        if isinstance(node.get(key), list):
            for i, sub in enumerate(node[key]):
                yield [key, i], sub, False
    deps = node.get("dependentSchemas")
    if isinstance(deps, dict):
        for name, sub in deps.items():
            yield ["dependentSchemas", name], sub, False
    for key in _DESCEND_ONE:
        if isinstance(node.get(key), dict | bool):
            yield [key], node[key], True
    for key in ("items", "prefixItems"):  # draft 4-7 tuple `items`, 2020-12 `prefixItems`
        if isinstance(node.get(key), list):
            for i, sub in enumerate(node[key]):
                yield [key, i], sub, True
    for key in _DESCEND_MAP:
        if isinstance(node.get(key), dict):
            for name, sub in node[key].items():
                yield [key, name], sub, True
    old_deps = node.get("dependencies")  # draft 4-7: a schema form applies to the object
    if isinstance(old_deps, dict):
        for name, sub in old_deps.items():
            if isinstance(sub, dict | bool):
                yield ["dependencies", name], sub, False
    for key in ("$defs", "definitions"):
        if isinstance(node.get(key), dict):
            for name, sub in node[key].items():
                yield [key, name], sub, True  # not applied by itself; walked for its refs


def _schema_nodes(schema: Any) -> Iterator[tuple[list[str | int], dict[str, Any]]]:
    stack: list[tuple[list[str | int], Any]] = [([], schema)]
    while stack:
        parts, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield parts, node
        stack.extend(([*parts, *rel], sub) for rel, sub, _ in _subschemas(node))


def _check_refs(schema: Any, where: str) -> None:
    """Every reference stays inside the schema: no fetch, and no second base URI (a nested
    `$id`) that would make `#/...` mean another document."""
    for parts, node in _schema_nodes(schema):
        if parts and "$id" in node:
            _refuse(where, [*parts, "$id"], "an embedded $id is not supported")
        for key in _REF_KEYS:
            ref = node.get(key)
            if isinstance(ref, str) and not ref.startswith("#"):
                _refuse(
                    where,
                    [*parts, key],
                    f"{key} {ref!r} points outside the schema (only #... references are allowed)",
                )


class _Cost:
    """How many subschemas the worst case applies to one JSON value of an answer.

    Subschemas are nodes; keywords that apply in place (`allOf`, `$ref`, ...) and keywords that
    descend into a member or item (`properties`, `items`, ...) are edges. A cycle of in-place
    edges never terminates (refused); otherwise the count for a value at depth d is the number
    of paths from the root with d descending edges, worst case over d up to the answer's
    maximum depth (every descending edge assumed to reach the same child)."""

    def __init__(self, schema: Any, where: str) -> None:
        self.where = where
        self.nodes: dict[str, tuple[list[str | int], dict[str, Any]]] = {}
        self.anchors: dict[str, str] = {}
        for parts, node in _schema_nodes(schema):
            ptr = _pointer(parts)
            self.nodes[ptr] = (parts, node)
            for key in ("$anchor", "$dynamicAnchor"):
                if isinstance(node.get(key), str):
                    self.anchors[node[key]] = ptr
        self.in_place: dict[str, list[str]] = {}
        self.descend: dict[str, list[str]] = {}
        for ptr, (parts, node) in self.nodes.items():
            inner: list[str] = []
            down: list[str] = []
            for rel, sub, descends in _subschemas(node):
                if rel[0] in ("$defs", "definitions") or not isinstance(sub, dict):
                    continue
                (down if descends else inner).append(_pointer([*parts, *rel]))
            for key in _REF_KEYS:
                if isinstance(node.get(key), str):
                    inner.append(self._target(node[key], [*parts, key]))
            self.in_place[ptr] = inner
            self.descend[ptr] = down

    def _target(self, ref: str, parts: list[str | int]) -> str:
        fragment = ref[1:]
        if fragment == "" or fragment.startswith("/"):
            ptr = "#" + _unescape(fragment)
        elif fragment in self.anchors:
            ptr = self.anchors[fragment]
        else:
            _refuse(self.where, parts, f"{ref!r} names nothing in the schema")
        if ptr not in self.nodes:
            # a reference to a non-schema location, or `true`/`false`: nothing to expand
            return ""
        return ptr

    def _order(self) -> list[str]:
        """The nodes in topological order of in-place edges; BAD_INPUT on a cycle."""
        order: list[str] = []
        state: dict[str, int] = {}  # 1: on the stack, 2: done
        for start in self.nodes:
            if state.get(start):
                continue
            stack: list[tuple[str, Iterator[str]]] = [(start, iter(self.in_place[start]))]
            state[start] = 1
            while stack:
                ptr, children = stack[-1]
                child = next(children, None)
                if child is None:
                    stack.pop()
                    state[ptr] = 2
                    order.append(ptr)
                elif child == "":
                    continue
                elif state.get(child) == 1:
                    parts = self.nodes[ptr][0]
                    _refuse(
                        self.where,
                        parts,
                        "a $ref cycle that never descends into the answer (it cannot terminate)",
                    )
                elif not state.get(child):
                    state[child] = 1
                    stack.append((child, iter(self.in_place[child])))
        order.reverse()  # parents before children
        return order

    def per_value(self) -> int:
        order = self._order()
        worst = 0
        paths: dict[str, int] = {"#": 1}
        for _ in range(_ANSWER_DEPTH + 1):
            for ptr in order:  # spread the counts along in-place edges
                n = paths.get(ptr, 0)
                if n:
                    for child in self.in_place[ptr]:
                        if child:
                            paths[child] = min(paths.get(child, 0) + n, MAX_EVALUATIONS + 1)
            here = sum(n * _weight(self.nodes[p][1]) for p, n in paths.items() if p in self.nodes)
            worst = max(worst, here)
            if worst > MAX_EVALUATIONS:
                raise BadInput(
                    f"{self.where} is too costly: its worst case applies more than"
                    f" {MAX_EVALUATIONS} subschemas to one value of an answer",
                    field=self.where,
                    path="$",
                )
            below: dict[str, int] = {}
            for p, n in paths.items():
                for child in self.descend.get(p, []):
                    below[child] = min(below.get(child, 0) + n, MAX_EVALUATIONS + 1)
            if not below:
                break
            paths = below
        return max(worst, 1)


def _weight(node: dict[str, Any]) -> int:
    enum = node.get("enum")
    return 1 + (len(enum) if isinstance(enum, list) else 0)


def _pointer(parts: list[str | int]) -> str:
    return "#" + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _unescape(fragment: str) -> str:
    from urllib.parse import unquote

    return unquote(fragment)


def _key(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def _remember(key: str, compiled: _Compiled) -> None:
    _compiled[key] = compiled
    _compiled.move_to_end(key)
    if len(_compiled) > _CACHE_SIZE:
        _compiled.popitem(last=False)


def _compiled_for(schema: Any) -> _Compiled:
    key = _key(schema)
    found = _compiled.get(key)
    if found is not None:
        _compiled.move_to_end(key)
        return found
    # Stored schemas were checked when declared; checking again costs little and keeps a
    # schema stored before these limits from running unbounded.
    check_schema(schema, "answer_schema")
    return _compiled[key]


def _first_error(validator: jsonschema_rs.Validator, value: Any) -> tuple[str, str] | None:
    """(JSON path, message) of the first way `value` breaks the schema, or None. The first
    error, not all of them: listing every failing branch of nested `anyOf`s is exponential."""
    try:
        validator.validate(value)
    except jsonschema_rs.ValidationError as exc:
        return _path(exc.instance_path), exc.message
    return None


def error_of(schema: Any, value: Any) -> tuple[str, str] | None:
    """(JSON path, message) of the first way `value` breaks `schema`, or None when it conforms."""
    return _first_error(_compiled_for(schema).validator, value)


def _raise(where: str, found: tuple[str, str] | None) -> None:
    if found is None:
        return
    path, message = found
    raise BadInput(
        f"{where} does not match the answer schema at {path}: {message}",
        field=_field(where, path),
        path=path,
    )


def check(schema: Any, value: Any, where: str) -> None:
    """BAD_INPUT naming the JSON path (e.g. `$.label`) where `value` breaks `schema`."""
    if schema is None:
        return
    _raise(where, error_of(schema, value))


async def check_answer(schema: Any, value: Any, encoded: str, where: str) -> None:
    """`check` for a submitted answer (`encoded`: its canonical JSON): in the event loop when
    it is small, else in the worker process, so a costly answer never holds the loop."""
    if schema is None:
        return
    compiled = _compiled_for(schema)
    if len(encoded) * compiled.per_value <= INLINE_COST:
        _raise(where, _first_error(compiled.validator, value))
        return
    _raise(where, await _in_worker(_key(schema), encoded, where))


# --- the worker process -------------------------------------------------------------------

_pool: ProcessPoolExecutor | None = None


def _worker_check(schema_text: str, encoded: str) -> tuple[str, str] | None:
    """In the worker: the schema arrives as text (checked when declared, compiled once)."""
    compiled = _compiled.get(schema_text)
    if compiled is None:
        compiled = _Compiled(_compile(json.loads(schema_text)), 1)
        _remember(schema_text, compiled)
    return _first_error(compiled.validator, json.loads(encoded))


def _executor() -> ProcessPoolExecutor:
    global _pool
    if _pool is None:
        # spawn: forking a process that runs an event loop and threads is unsafe
        _pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    return _pool


def _discard_pool() -> None:
    """Kill the worker (a validation past its deadline): the next check starts a new one."""
    global _pool
    pool, _pool = _pool, None
    if pool is None:
        return
    for proc in list(getattr(pool, "_processes", {}).values()):
        proc.kill()
    pool.shutdown(wait=False, cancel_futures=True)


atexit.register(_discard_pool)


async def _in_worker(schema_text: str, encoded: str, where: str) -> tuple[str, str] | None:
    loop = asyncio.get_running_loop()
    pool = _executor()
    try:
        return await asyncio.wait_for(
            loop.run_in_executor(pool, _worker_check, schema_text, encoded), VALIDATION_DEADLINE
        )
    except TimeoutError:
        if _pool is pool:
            _discard_pool()
        raise BadInput(
            f"{where} is too costly to check against the answer schema", field=where
        ) from None
    except BrokenProcessPool:
        if _pool is pool:
            _discard_pool()
        raise BadInput(
            f"{where} could not be checked against the answer schema (try again)", field=where
        ) from None


def check_gold_items(raw_tasks: Any, project_schema: Any) -> None:
    """addGoldItems (raw task dicts): every gold answer matches the project's schema. Gold
    items added this way cannot carry their own schema (their insert, in quality/gold.py, stores
    none): saying so beats dropping it silently. Shapes are checked later, by task_specs."""
    if not isinstance(raw_tasks, list):
        return
    for i, raw in enumerate(raw_tasks):
        if not isinstance(raw, dict):
            continue
        if raw.get("answer_schema") is not None:
            raise BadInput(
                f"tasks[{i}].answer_schema: gold items added on their own follow the project's"
                " answer schema (give an item its own schema in createProject or addTasks)",
                field=f"tasks[{i}].answer_schema",
            )
        if raw.get("gold") is not None:
            check(project_schema, raw["gold"], f"tasks[{i}].gold")
