"""GraphQL document limits (depth, aliases, tokens, fields), known before validation.

The token limit bounds parsing. Depth, aliases and fields are counted by `cost_errors` in one
pass over the document, each fragment once (its cost multiplied by its spreads), and a refused
document is never validated: strawberry's QueryDepthLimiter and MaxAliasesLimiter (validation
rules) expanded every spread anew, so a small document of fragments each spreading the next
twice took seconds of CPU before any limit refused it. schema/pipeline.py applies the check
wherever a document is validated.
"""

from __future__ import annotations

import dataclasses
import datetime
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
from strawberry.schema.types.base_scalars import DateTimeDefinition, wrap_parser

MAX_DEPTH = 12
MAX_TOKENS = 5000
MAX_ALIASES = 30
# Fields one operation selects, counted with every repetition and every fragment spread
# expanded: depth, alias and token limits alone let `{ a a a ... }` or a fragment spread
# many times multiply the work. The dashboard's largest query selects about 120.
MAX_FIELDS = 1000
# Characters of one document. The token limit does not bound the bytes the lexer reads
# (comments, whitespace and string literals are read a character at a time, in Python): a
# body-limit document of one comment held the event loop for seconds. The largest document
# our clients send is a few KB; their data travels in variables.
MAX_DOCUMENT_CHARS = 100_000


def check_document_length(query: object) -> None:
    """Refuses a document too long to lex cheaply (a request error), before it is read."""
    if isinstance(query, str) and len(query) > MAX_DOCUMENT_CHARS:
        raise GraphQLError(
            f"documents are limited to {MAX_DOCUMENT_CHARS} characters",
            extensions={"code": "BAD_INPUT"},
        )


# Counts saturate here: a fan-out of spreads multiplies them, and nothing past a limit
# needs the exact figure.
_CAP = 10**9


@dataclasses.dataclass(slots=True)
class _Summary:
    """One operation's or fragment's own selections, its spreads not expanded."""

    fields: int = 0
    aliases: int = 0
    depth: int = 0
    # spread fragment -> (how many times, deepest level; -1: only under introspection fields,
    # which the depth limit does not count)
    spreads: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)


def _summarise(selection_set: SelectionSetNode) -> _Summary:
    summary = _Summary()
    # (selection set, selection-bearing fields above it, under an introspection field)
    stack: list[tuple[SelectionSetNode, int, bool]] = [(selection_set, 0, False)]
    while stack:
        current, level, ignored = stack.pop()
        for sel in current.selections:
            if isinstance(sel, FieldNode):
                summary.fields += 1
                summary.aliases += sel.alias is not None
                if sel.selection_set is not None:
                    skip = ignored or sel.name.value.startswith("__")
                    if not skip:
                        summary.depth = max(summary.depth, level + 1)
                    stack.append((sel.selection_set, level + 1, skip))
            elif isinstance(sel, InlineFragmentNode):
                stack.append((sel.selection_set, level, ignored))
            elif isinstance(sel, FragmentSpreadNode):
                times, deepest = summary.spreads.get(sel.name.value, (0, -1))
                summary.spreads[sel.name.value] = (
                    times + 1,
                    deepest if ignored else max(deepest, level),
                )
    return summary


@dataclasses.dataclass(frozen=True, slots=True)
class Cost:
    """What an operation selects with every fragment spread expanded (saturating at _CAP)."""

    fields: int
    aliases: int
    depth: int


def _costs(document: DocumentNode) -> dict[OperationDefinitionNode, Cost]:
    """Every operation's cost, in one pass over the document: each fragment's cost is
    computed once and multiplied by its spreads, so a fan-out of spreads costs its size, not
    its expansion. A spread of a fragment being expanded (a cycle) or of no fragment adds
    nothing: validation reports both."""
    summaries: dict[str, _Summary] = {}
    operations: list[tuple[OperationDefinitionNode, _Summary]] = []
    for definition in document.definitions:
        if isinstance(definition, FragmentDefinitionNode):
            summaries.setdefault(definition.name.value, _summarise(definition.selection_set))
        elif isinstance(definition, OperationDefinitionNode):
            operations.append((definition, _summarise(definition.selection_set)))
    done: dict[str, Cost] = {}

    def total(summary: _Summary) -> Cost:
        fields, aliases, depth = summary.fields, summary.aliases, summary.depth
        for name, (times, level) in summary.spreads.items():
            cost = done.get(name)
            if cost is None:
                continue  # a cycle, or no such fragment
            fields = min(_CAP, fields + times * cost.fields)
            aliases = min(_CAP, aliases + times * cost.aliases)
            if level >= 0:
                depth = max(depth, level + cost.depth)
        return Cost(fields, aliases, depth)

    # Fragments in dependency order, without recursion (a long chain of spreads would
    # exhaust Python's stack).
    expanding: set[str] = set()
    for root in summaries:
        if root in done:
            continue
        expanding.add(root)
        stack = [(root, iter(summaries[root].spreads))]
        while stack:
            name, pending = stack[-1]
            child = next((c for c in pending if c in summaries and c not in done
                          and c not in expanding), None)  # fmt: skip
            if child is not None:
                expanding.add(child)
                stack.append((child, iter(summaries[child].spreads)))
                continue
            stack.pop()
            expanding.discard(name)
            done[name] = total(summaries[name])
    return {op: total(summary) for op, summary in operations}


def cost_errors(document: DocumentNode) -> list[GraphQLError]:
    """The depth, alias and field-count refusals of a document, in O(its size): run before
    validation, so a refused document costs nothing more."""
    errors = []
    aliases = 0
    for op, cost in _costs(document).items():
        name = op.name.value if op.name else "anonymous"
        if cost.depth > MAX_DEPTH:
            errors.append(
                GraphQLError(
                    f"'{name}' exceeds maximum operation depth of {MAX_DEPTH}",
                    op,
                    extensions={"code": "BAD_INPUT"},
                )
            )
        if cost.fields > MAX_FIELDS:
            errors.append(
                GraphQLError(
                    f"the operation selects more than {MAX_FIELDS} fields",
                    op,
                    extensions={"code": "BAD_INPUT"},
                )
            )
        aliases = min(_CAP, aliases + cost.aliases)
    if aliases > MAX_ALIASES:
        found = f"{aliases}" if aliases < _CAP else f"over {_CAP}"
        errors.append(
            GraphQLError(
                f"{found} aliases found. Allowed: {MAX_ALIASES}",
                extensions={"code": "BAD_INPUT"},
            )
        )
    return errors


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
