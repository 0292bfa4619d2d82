"""GraphQL document limits (depth, aliases, tokens, fields), built so the validation cache can
work.

strawberry's QueryDepthLimiter and MaxAliasesLimiter create a new validation rule class in
every instance; used as per-request factories (as strawberry asks), every request brings new
rule classes, the ValidationCache (keyed by document and rules) never hits, and every request
is validated from scratch. Here the rule classes are made once and reused by every request.
"""

from __future__ import annotations

import functools

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
)
from graphql.validation import ASTValidationRule
from strawberry.extensions import AddValidationRules, MaxAliasesLimiter, QueryDepthLimiter

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


class DepthAndAliasLimits(AddValidationRules):
    def __init__(self) -> None:
        super().__init__(list(_rules()))
