"""Layouts: how the workbench presents a project's tasks, built on its answer schema.

- GENERIC: a form from the answer schema (any schema, or none).
- GRADE: a rubric. The schema is an object whose properties are criteria, each an integer
  with `minimum` and `maximum` (a scale) or an `enum` of scalars; one optional string
  property `comment`.
- PAIRWISE: two candidates side by side (payload keys `candidate_keys`, default a and b).
  The schema is an object with a `winner` property whose `enum` holds "a" and "b" and maybe
  "tie"; every other property is a string (reasons). Answers always name candidates a / b,
  whatever side the expert saw them on (the order is drawn per assignment and recorded).
- REVIEW: a long document (the payload's `document` or `text`, or the payload itself when it
  is a string; large payloads by link) scrolled beside the form. The schema is an object whose
  properties are scalars (enum, string, number, integer, boolean): the form beside it.

`check` runs at project creation: a schema that does not fit is BAD_INPUT naming the mismatch.
"""

from __future__ import annotations

from typing import Any

from taskroute.errors import BadInput

LAYOUTS = ("GENERIC", "GRADE", "PAIRWISE", "REVIEW")
DEFAULT_CANDIDATE_KEYS = ("a", "b")
PAIRWISE_WINNERS = ("a", "b", "tie")
GRADE_MAX_STEPS = 100  # points on an integer scale (a rubric, not a free number)
ENUM_MAX = 20
KEY_MAX = 64


def _refuse(layout: str, why: str) -> BadInput:
    return BadInput(f"layout {layout}: {why}", field="answer_schema")


def _properties(layout: str, schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise _refuse(layout, 'the answer schema must be an object schema ("type": "object")')
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        raise _refuse(layout, "the answer schema must declare its properties")
    return props


def _scalar_enum(node: Any) -> bool:
    values = node.get("enum") if isinstance(node, dict) else None
    return (
        isinstance(values, list)
        and 0 < len(values) <= ENUM_MAX
        and all(isinstance(v, str | int | float | bool) for v in values)
    )


def _is_string(node: Any) -> bool:
    return isinstance(node, dict) and node.get("type") == "string"


def _grade(schema: Any) -> None:
    criteria = 0
    for name, node in _properties("GRADE", schema).items():
        if name == "comment" and _is_string(node):
            continue
        if _scalar_enum(node):
            criteria += 1
            continue
        if isinstance(node, dict) and node.get("type") == "integer":
            lo, hi = node.get("minimum"), node.get("maximum")
            if not isinstance(lo, int) or not isinstance(hi, int) or isinstance(lo, bool):
                raise _refuse("GRADE", f"criterion {name!r} needs an integer minimum and maximum")
            if not 0 < hi - lo <= GRADE_MAX_STEPS:
                raise _refuse(
                    "GRADE", f"criterion {name!r}: a scale of 2 to {GRADE_MAX_STEPS + 1} points"
                )
            criteria += 1
            continue
        raise _refuse(
            "GRADE",
            f"criterion {name!r} must be an integer with minimum and maximum, or an enum"
            " (only 'comment' may be a string)",
        )
    if not criteria:
        raise _refuse("GRADE", "the rubric needs at least one criterion")


def _pairwise(schema: Any) -> None:
    props = _properties("PAIRWISE", schema)
    winner = props.get("winner")
    if not isinstance(winner, dict) or not _scalar_enum(winner):
        raise _refuse("PAIRWISE", "the answer schema needs a 'winner' property with an enum")
    values = set(winner["enum"])
    if not {"a", "b"} <= values or not values <= set(PAIRWISE_WINNERS):
        raise _refuse("PAIRWISE", "winner's enum must hold 'a' and 'b', and maybe 'tie'")
    for name, node in props.items():
        if name != "winner" and not _is_string(node):
            raise _refuse("PAIRWISE", f"property {name!r} must be a string (a reason)")


def _review(schema: Any) -> None:
    for name, node in _properties("REVIEW", schema).items():
        if _scalar_enum(node):
            continue
        if isinstance(node, dict) and node.get("type") in (
            "string", "number", "integer", "boolean"
        ):  # fmt: skip
            continue
        raise _refuse("REVIEW", f"property {name!r} must be a scalar (enum, string, number,"
                      " integer or boolean) to sit in the form beside the document")  # fmt: skip


def check(layout: str, schema: Any) -> None:
    """BAD_INPUT unless `schema` (the project's answer schema) fits `layout`."""
    if layout == "GRADE":
        _grade(schema)
    elif layout == "PAIRWISE":
        _pairwise(schema)
    elif layout == "REVIEW":
        _review(schema)


def candidate_keys(raw: Any, layout: str) -> list[str] | None:
    """PAIRWISE's payload keys of the two candidates (None: a and b)."""
    if raw is None:
        return None
    if layout != "PAIRWISE":
        raise BadInput("candidate_keys is for the PAIRWISE layout", field="candidate_keys")
    if (
        not isinstance(raw, list)
        or len(raw) != 2
        or not all(isinstance(k, str) and 0 < len(k) <= KEY_MAX for k in raw)
        or raw[0] == raw[1]
    ):
        raise BadInput(
            f"candidate_keys must be two different payload keys of 1-{KEY_MAX} characters",
            field="candidate_keys",
        )
    return list(raw)
