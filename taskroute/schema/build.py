"""Assembles the strawberry Schema with its extensions."""

from __future__ import annotations

from typing import Any

import strawberry
from graphql.error import GraphQLError
from strawberry.extensions import (
    MaxAliasesLimiter,
    MaxTokensLimiter,
    ParserCache,
    QueryDepthLimiter,
    ValidationCache,
)
from strawberry.extensions.disable_introspection import DisableIntrospection
from strawberry.tools import merge_types

from .core_mutation import CoreMutation
from .core_query import CoreQuery
from .customer_views import CustomerViewsQuery
from .errors import ErrorCodes
from .ledger import LedgerMutation, LedgerQuery
from .project_views import ForecastMutation, ForecastQuery, ForecastSubscription
from .quality import QualityMutation, QualityQuery

# Each area of the API contributes its own root types; they are merged into one schema.
QUERIES: tuple[type, ...] = (
    CoreQuery,
    QualityQuery,
    ForecastQuery,
    LedgerQuery,
    CustomerViewsQuery,
)
MUTATIONS: tuple[type, ...] = (CoreMutation, QualityMutation, ForecastMutation, LedgerMutation)
SUBSCRIPTIONS: tuple[type, ...] = (ForecastSubscription,)

MAX_DEPTH = 12
MAX_TOKENS = 5000
MAX_ALIASES = 30


class Schema(strawberry.Schema):
    def process_errors(self, errors: list[GraphQLError], execution_context: Any = None) -> None:
        # Expected errors (bad input, not found, expired lease) are answers, not incidents;
        # ErrorCodes logs the unexpected ones with their traceback.
        return


def build_schema(introspection: bool = True) -> strawberry.Schema:
    extensions: list = [
        ErrorCodes,
        ParserCache,
        ValidationCache,
        lambda: QueryDepthLimiter(max_depth=MAX_DEPTH),
        lambda: MaxTokensLimiter(max_token_count=MAX_TOKENS),
        lambda: MaxAliasesLimiter(max_alias_count=MAX_ALIASES),
    ]
    if not introspection:
        extensions.append(DisableIntrospection)
    return Schema(
        query=merge_types("Query", QUERIES),
        mutation=merge_types("Mutation", MUTATIONS),
        subscription=merge_types("Subscription", SUBSCRIPTIONS) if SUBSCRIPTIONS else None,
        extensions=extensions,
    )
