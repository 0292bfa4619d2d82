"""Assembles the strawberry Schema with its extensions."""

from __future__ import annotations

import strawberry
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
from .errors import ErrorCodes
from .routing import RoutingQuery

# Each area of the API contributes its own root types; they are merged into one schema.
QUERIES: tuple[type, ...] = (CoreQuery, RoutingQuery)
MUTATIONS: tuple[type, ...] = (CoreMutation,)
SUBSCRIPTIONS: tuple[type, ...] = ()

MAX_DEPTH = 12
MAX_TOKENS = 5000
MAX_ALIASES = 30


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
    return strawberry.Schema(
        query=merge_types("Query", QUERIES),
        mutation=merge_types("Mutation", MUTATIONS),
        subscription=merge_types("Subscription", SUBSCRIPTIONS) if SUBSCRIPTIONS else None,
        extensions=extensions,
    )
