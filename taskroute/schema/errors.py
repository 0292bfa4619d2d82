"""Every GraphQL error gets an `extensions.code`; unexpected ones are masked."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from graphql.error import GraphQLError
from strawberry.extensions import SchemaExtension

from taskroute.errors import TaskrouteError

log = logging.getLogger(__name__)


def _coded(error: GraphQLError) -> GraphQLError:
    original = error.original_error
    if isinstance(original, TaskrouteError):
        return error  # graphql-core already copied `original.extensions` (with the code)
    if original is None or isinstance(original, GraphQLError):
        # Parse, validation and variable errors (graphql-core wraps a variable's coercion
        # error as the original error): the request itself is wrong.
        code = (error.extensions or {}).get("code", "BAD_INPUT")
        return GraphQLError(
            error.message,
            error.nodes,
            error.source,
            error.positions,
            error.path,
            None,
            {**(error.extensions or {}), "code": code},
        )
    log.error("unexpected error in %s", error.path, exc_info=original)
    return GraphQLError(
        "Unexpected error.",
        error.nodes,
        error.source,
        error.positions,
        error.path,
        None,
        {"code": "INTERNAL"},
    )


class ErrorCodes(SchemaExtension):
    def on_operation(self) -> Iterator[None]:
        yield
        result = self.execution_context.result
        if result is not None and getattr(result, "errors", None):
            result.errors = [_coded(e) for e in result.errors]
