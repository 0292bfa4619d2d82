"""Assembles the strawberry Schema with its extensions."""

from __future__ import annotations

import datetime
from typing import Any

import strawberry
from strawberry.extensions.disable_introspection import DisableIntrospection
from strawberry.tools import merge_types

from .accounts import AccountCreationMutation, AccountsMutation, AccountsQuery
from .batches import BatchesMutation, BatchesQuery
from .claims import ClaimsMutation
from .customer_views import CustomerViewsQuery
from .instructions import InstructionsMutation
from .ledger import LedgerMutation, LedgerQuery
from .limits import MAX_ALIASES, MAX_DEPTH, MAX_TOKENS, SAFE_DATETIME
from .pipeline import PipelineSchema, RequestPipeline
from .project_views import ForecastMutation, ForecastQuery, ForecastSubscription
from .projects import ProjectsMutation, ProjectsQuery
from .quality import QualityMutation, QualityQuery
from .quotes import QuotesQuery
from .realtime import RealtimeSubscription
from .routing import RoutingQuery
from .webhooks import WebhooksMutation, WebhooksQuery

# Each area of the API contributes its own root types; they are merged into one schema.
QUERIES: tuple[type, ...] = (
    ProjectsQuery,
    QuotesQuery,
    BatchesQuery,
    QualityQuery,
    ForecastQuery,
    LedgerQuery,
    CustomerViewsQuery,
    RoutingQuery,
    AccountsQuery,
    WebhooksQuery,
)
MUTATIONS: tuple[type, ...] = (
    AccountCreationMutation,
    ProjectsMutation,
    ClaimsMutation,
    BatchesMutation,
    QualityMutation,
    ForecastMutation,
    LedgerMutation,
    AccountsMutation,
    WebhooksMutation,
    InstructionsMutation,
)
SUBSCRIPTIONS: tuple[type, ...] = (RealtimeSubscription, ForecastSubscription)

__all__ = ["MAX_ALIASES", "MAX_DEPTH", "MAX_TOKENS", "build_schema"]


def build_schema(introspection: bool = True) -> strawberry.Schema:
    # One extension for every rule around an operation (see pipeline.py for why one).
    extensions: list[Any] = [RequestPipeline]
    if not introspection:
        extensions.append(DisableIntrospection)
    return PipelineSchema(
        query=merge_types("Query", QUERIES),
        mutation=merge_types("Mutation", MUTATIONS),
        subscription=merge_types("Subscription", SUBSCRIPTIONS) if SUBSCRIPTIONS else None,
        extensions=extensions,
        scalar_overrides={datetime.datetime: SAFE_DATETIME},
    )
