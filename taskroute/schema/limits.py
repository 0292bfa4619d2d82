"""GraphQL document limits (depth, aliases, tokens), built so the validation cache can work.

strawberry's QueryDepthLimiter and MaxAliasesLimiter create a new validation rule class in
every instance; used as per-request factories (as strawberry asks), every request brings new
rule classes, the ValidationCache (keyed by document and rules) never hits, and every request
is validated from scratch. Here the rule classes are made once and reused by every request.
"""

from __future__ import annotations

import functools

from graphql.validation import ASTValidationRule
from strawberry.extensions import AddValidationRules, MaxAliasesLimiter, QueryDepthLimiter

MAX_DEPTH = 12
MAX_TOKENS = 5000
MAX_ALIASES = 30


@functools.cache
def _rules() -> tuple[type[ASTValidationRule], ...]:
    return (
        *QueryDepthLimiter(max_depth=MAX_DEPTH).validation_rules,
        *MaxAliasesLimiter(max_alias_count=MAX_ALIASES).validation_rules,
    )


class DepthAndAliasLimits(AddValidationRules):
    def __init__(self) -> None:
        super().__init__(list(_rules()))
