"""Answer schemas: a project, or one item, says what an answer is (JSON Schema).

The schema is checked when it is declared (a wrong schema is BAD_INPUT naming where it is
wrong), gold answers are checked against it when they are stored, and `submit` refuses an
answer that does not conform with BAD_INPUT naming the answer's JSON path, before anything is
written (the lease stays; the expert corrects and submits again).

Schemas never change once stored (a project's at creation, an item's with the item): changing
what an answer is halfway through would make answers already given non-conforming. That is
why compiled validators may be cached per process without any invalidation, keyed by the
schema's canonical text (a project's items usually share one).

No remote `$ref` is ever fetched: jsonschema's `referencing` resolves only what the schema
itself contains (and the standard meta-schemas), so a schema cannot make the server call out.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from jsonschema.protocols import Validator

from taskroute.errors import BadInput

MAX_SCHEMA_BYTES = 64 * 1024
_CACHE_SIZE = 1024
_compiled: OrderedDict[str, Validator] = OrderedDict()


def _path(parts: Any) -> str:
    """`$.a[0].b`: the JSONPath jsonschema reports, for messages and `extensions.path`."""
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _field(where: str, path: str) -> str:
    return where + path[1:]  # "answer" + ".label" -> "answer.label"


def check_schema(schema: Any, where: str) -> dict[str, Any] | bool:
    """The declared schema itself, or BAD_INPUT naming where (in the schema) it is wrong."""
    from taskroute.resolvers.json_values import json_value

    if not isinstance(schema, dict | bool):
        raise BadInput(f"{where} must be a JSON Schema (an object)", field=where)
    json_value(schema, where, MAX_SCHEMA_BYTES)
    cls = validators.validator_for(schema, default=Draft202012Validator)
    try:
        # true/false are valid schemas too (jsonschema accepts them; its stubs say Mapping)
        cls.check_schema(schema)  # type: ignore[arg-type]
    except SchemaError as exc:
        path = _path(exc.absolute_path)
        raise BadInput(
            f"{where} is not a valid JSON Schema at {path}: {exc.message}",
            field=_field(where, path),
            path=path,
        ) from exc
    return schema


def _validator(schema: Any) -> Validator:
    key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    found = _compiled.get(key)
    if found is not None:
        _compiled.move_to_end(key)
        return found
    cls = validators.validator_for(schema, default=Draft202012Validator)
    compiled = cls(schema)
    _compiled[key] = compiled
    if len(_compiled) > _CACHE_SIZE:
        _compiled.popitem(last=False)
    return compiled


def error_of(schema: Any, value: Any) -> ValidationError | None:
    """The most relevant way `value` breaks `schema`, or None when it conforms."""
    found: ValidationError | None = best_match(_validator(schema).iter_errors(value))
    return found


def check(schema: Any, value: Any, where: str) -> None:
    """BAD_INPUT naming the JSON path (e.g. `$.label`) where `value` breaks `schema`."""
    if schema is None:
        return
    error = error_of(schema, value)
    if error is None:
        return
    path = _path(error.absolute_path)
    raise BadInput(
        f"{where} does not match the answer schema at {path}: {error.message}",
        field=_field(where, path),
        path=path,
    )


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
