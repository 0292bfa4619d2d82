"""GraphQL document limits (depth, aliases, tokens, fields), built so the validation cache can
work.

strawberry's QueryDepthLimiter and MaxAliasesLimiter create a new validation rule class in
every instance; used as per-request factories (as strawberry asks), every request brings new
rule classes, a validation cache (keyed by document and rules) never hits, and every request
is validated from scratch. Here the rule classes are made once and reused by every request;
schema/pipeline.py applies them.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import re

import dateutil.parser
from graphql import (
    DocumentNode,
    FieldNode,
    FloatValueNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    Visitor,
    visit,
)
from graphql.validation import ASTValidationRule
from strawberry.extensions import MaxAliasesLimiter, QueryDepthLimiter
from strawberry.schema.types.base_scalars import DateTimeDefinition, wrap_parser

MAX_DEPTH = 12
MAX_TOKENS = 5000
MAX_ALIASES = 30
# Fields one operation selects, counted with every repetition and every fragment spread
# expanded: depth, alias and token limits alone let `{ a a a ... }` or a fragment spread
# many times multiply the work. The dashboard's largest query selects about 120.
MAX_FIELDS = 1000


class MaxFields(ASTValidationRule):
    """Refuses an operation that selects more than MAX_FIELDS fields in all."""

    def enter_operation_definition(self, node: OperationDefinitionNode, *_: object) -> None:
        fragments = {f.name.value: f for f in self.context.document.definitions
                     if isinstance(f, FragmentDefinitionNode)}  # fmt: skip
        memo: dict[str, int] = {}

        def count(selection_set: SelectionSetNode | None, seen: frozenset[str]) -> int:
            total = 0
            for sel in selection_set.selections if selection_set else ():
                if isinstance(sel, FieldNode):
                    total += 1 + count(sel.selection_set, seen)
                elif isinstance(sel, InlineFragmentNode):
                    total += count(sel.selection_set, seen)
                elif isinstance(sel, FragmentSpreadNode):
                    name = sel.name.value
                    if name in seen or name not in fragments:
                        continue  # cycles and unknown fragments: other rules report them
                    if name not in memo:
                        memo[name] = count(fragments[name].selection_set, seen | {name})
                    total += memo[name]
                if total > MAX_FIELDS:
                    return total  # enough to refuse: stop walking
            return total

        if count(node.selection_set, frozenset()) > MAX_FIELDS:
            self.report_error(
                GraphQLError(
                    f"the operation selects more than {MAX_FIELDS} fields",
                    node,
                    extensions={"code": "BAD_INPUT"},
                )
            )


@functools.cache
def _rules() -> tuple[type[ASTValidationRule], ...]:
    return (
        *QueryDepthLimiter(max_depth=MAX_DEPTH).validation_rules,
        *MaxAliasesLimiter(max_alias_count=MAX_ALIASES).validation_rules,
        MaxFields,
    )


def validation_rules() -> tuple[type[ASTValidationRule], ...]:
    """Depth, alias and field-count rules, the same classes for every request."""
    return _rules()


# A number literal longer than this is refused while parsing: graphql-core converts Int
# literals with int(), which raises (and answered INTERNAL) past Python's 4300-digit limit, and
# no field takes a number anywhere near this long.
MAX_NUMBER_DIGITS = 40
_LONG_DIGITS = re.compile(rf"\d{{{MAX_NUMBER_DIGITS + 1},}}")


def check_number_literals(query: str, document: DocumentNode) -> None:
    """Refuses a document with an absurdly long number literal (a request error)."""
    if not _LONG_DIGITS.search(query):
        return  # the common case: one regex scan, no walk
    for node in _number_literals(document):
        if len(node.value) > MAX_NUMBER_DIGITS:
            raise GraphQLError(
                f"number literals are limited to {MAX_NUMBER_DIGITS} characters",
                node,
                extensions={"code": "BAD_INPUT"},
            )


def _number_literals(document: DocumentNode) -> list[IntValueNode | FloatValueNode]:
    found: list[IntValueNode | FloatValueNode] = []

    class Collect(Visitor):
        def enter_int_value(self, node: IntValueNode, *_: object) -> None:
            found.append(node)

        def enter_float_value(self, node: FloatValueNode, *_: object) -> None:
            found.append(node)

    visit(document, Collect())
    return found


def _instant_in_range(value: str) -> datetime.datetime:
    parsed: datetime.datetime = dateutil.parser.isoparse(value)
    if parsed.tzinfo is not None:
        # Year 1 at +14:00 and year 9999 at -14:00 cannot be turned into UTC: the driver
        # raised on them deep inside a resolver (INTERNAL).
        try:
            parsed.astimezone(datetime.UTC)
        except OverflowError as exc:
            raise ValueError("out of range") from exc
    return parsed


# Every DateTime argument is parsed by this: a client's instant is refused as BAD_INPUT at
# the boundary when Postgres could not hold it, whatever field it is sent to.
SAFE_DATETIME = dataclasses.replace(
    DateTimeDefinition, parse_value=wrap_parser(_instant_in_range, "DateTime")
)
