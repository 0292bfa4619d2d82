"""Every GraphQL error gets an `extensions.code`; unexpected ones are masked."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from typing import Any

import strawberry
from graphql.error import GraphQLError
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.types import ExecutionContext, ExecutionResult
from strawberry.types.execution import PreExecutionError

from taskroute.errors import TaskrouteError

log = logging.getLogger(__name__)


def _coded(error: GraphQLError) -> GraphQLError:
    original = error.original_error
    if isinstance(original, TaskrouteError):
        return error  # graphql-core already copied `original.extensions` (with the code)
    if (error.extensions or {}).get("code") and not isinstance(original, Exception):
        return error  # already coded (this runs again as a safety net after code_errors)
    if isinstance(original, InvalidOperationTypeError | CannotGetOperationTypeError):
        # A query sent as a legacy graphql-ws `start` (subscriptions only), or a document
        # whose operation is not named: the request is wrong, not the server.
        return GraphQLError(
            error.message,
            error.nodes,
            error.source,
            error.positions,
            error.path,
            None,
            {"code": "BAD_INPUT"},
        )
    if isinstance(original, RecursionError):
        # A document or value nested deeply enough to exhaust the parser's stack.
        return GraphQLError(
            "the request is nested too deeply",
            error.nodes,
            error.source,
            error.positions,
            error.path,
            None,
            {"code": "BAD_INPUT"},
        )
    if original is None or isinstance(original, GraphQLError):
        # Parse, validation and variable errors (graphql-core wraps variable coercion failures
        # in a GraphQLError): the request itself is wrong, and the message says how.
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


def code_errors(result: object) -> None:
    """Every error of an operation's result gets a code (run after each operation)."""
    if isinstance(result, ExecutionResult) and result.errors:
        result.errors = [_coded(e) for e in result.errors]


class TaskrouteSchema(strawberry.Schema):
    """strawberry logs every error with its stack trace; ours are expected answers.

    Errors carrying a TaskrouteError (NOT_FOUND, UNAVAILABLE, ...) and request errors (bad
    documents) are logged at debug level; unexpected exceptions are logged by code_errors.
    """

    async def execute(self, *args: Any, **kwargs: Any) -> ExecutionResult:
        result = await super().execute(*args, **kwargs)
        # code_errors does this after each operation, but strawberry skips that hook's exit
        # for some request errors (a parse error raised while parsing): code them here too.
        if result.errors:
            result.errors = [_coded(e) for e in result.errors]
        return result

    async def stream(self, query: str | None, *args: Any, **kwargs: Any) -> Any:
        """Subscriptions (WebSocket): every error carries a code, and a document that does not
        parse is an `error` message for the operation. The pipeline's cached parse raises
        the syntax error out of `stream`, and the transports then sent only `complete` (or
        nothing, legacy graphql-ws) and logged an unhandled exception."""
        try:
            source = await super().stream(query, *args, **kwargs)
        except GraphQLError as error:
            return _one(_document_error(error))
        return _coded_results(source)

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        for error in errors:
            log.debug("graphql error: %s (%s)", error.message, error.extensions)


async def _one(result: ExecutionResult) -> AsyncGenerator[ExecutionResult, None]:
    yield result


def _document_error(error: GraphQLError) -> PreExecutionError:
    # A plain GraphQLError (not GraphQLSyntaxError): an `error` message, not a socket close.
    coded = GraphQLError(error.message, extensions={"code": "BAD_INPUT"})
    return PreExecutionError(data=None, errors=[coded])


async def _coded_results(source: Any) -> AsyncGenerator[Any, None]:
    """The stream's results with a code on every error (validation errors of a subscription
    arrive as its first result; a syntax error is raised by the first step)."""
    first = True
    try:
        async for result in source:
            first = False
            if isinstance(result, ExecutionResult) and result.errors:
                result.errors = [_coded(e) for e in result.errors]
            yield result
    except GraphQLError as error:
        if not first:
            raise
        yield _document_error(error)
    finally:
        aclose = getattr(source, "aclose", None)
        if aclose is not None:
            await aclose()
