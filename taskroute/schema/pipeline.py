"""What runs around every GraphQL operation, as one strawberry extension.

strawberry builds, for every request, one context manager per hook of every extension (a
`contextlib` wrapper made with `functools.wraps` each time) and instantiates every extension, which
is a noticeable share of the hot path's CPU. Here each stage has one hook that calls the rules in
order; the rules themselves live with what they protect (limits.py, errors.py, accounts.py).

- operation: the token limit for the parser; after it, every error gets an `extensions.code`
  (errors.code_errors).
- parse: the document length limit, then an LRU cache of parsed documents (the hot path
  sends the same few documents over and over), then number literals too long for
  graphql-core (limits.check_number_literals).
- validate: first the depth, alias and field-count limits (limits.cost_errors, linear in the
  document: a refused document is not validated at all), then an LRU cache of validation
  results, keyed by schema, document and rules.
- execute: before it, a mutation marks the context so a read-only token is refused
  (mutation_hooks.mark_writing); after it, admin mutations are audited
  (mutation_hooks.audit_admin_mutations).

`PipelineSchema.execute` runs the same stages without strawberry's extension runner for an
operation already known good (see its docstring); everything else goes through the extension.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any, cast

from graphql import (
    DocumentNode,
    GraphQLError,
    OperationDefinitionNode,
    execute,
    parse,
    specified_rules,
)
from graphql.execution import ExecutionResult as GraphQLExecutionResult
from graphql.execution import MiddlewareManager
from strawberry.execution.is_awaitable import optimized_is_awaitable
from strawberry.extensions import SchemaExtension
from strawberry.schema._graphql_core import execution_context_class_kwargs
from strawberry.schema.schema import validate_document
from strawberry.types import ExecutionResult
from strawberry.types.execution import PreExecutionError
from strawberry.types.graphql import OperationType
from strawberry.utils.await_maybe import await_maybe

from .errors import TaskrouteSchema, code_errors
from .limits import MAX_TOKENS, check_document_length, check_number_literals, cost_errors
from .mutation_hooks import audit_admin_mutations, mark_writing

# Distinct documents kept parsed and validated: the UI, the dashboards and the experts' tools
# send a few dozen; the bound keeps arbitrary clients from growing the caches.
DOCUMENT_CACHE = 256

_parsed: OrderedDict[tuple[Any, ...], DocumentNode] = OrderedDict()


def parse_cached(query: Any, **options: Any) -> Any:
    """graphql-core's parse, cached, for documents within the length limit (GraphQLError
    otherwise, before the lexer or the cache's hash reads the text)."""
    check_document_length(query)
    key = (query, *sorted(options.items()))
    found = _parsed.get(key)
    if found is not None:
        _parsed.move_to_end(key)
        return found
    document = parse(query, **options)
    # A document over the cost limits is refused every time: kept out of the cache it is
    # freed at once, not left for full garbage collections to walk (a flood of distinct
    # refused documents made those pause the loop for 100+ ms).
    if not cost_errors(document):
        _parsed[key] = document
        if len(_parsed) > DOCUMENT_CACHE:
            _parsed.popitem(last=False)
    return document


_validate: Callable[..., Any] = functools.lru_cache(maxsize=DOCUMENT_CACHE)(validate_document)


class RequestPipeline(SchemaExtension):
    def on_operation(self) -> Iterator[None]:
        ctx = self.execution_context
        ctx.parse_options["max_tokens"] = MAX_TOKENS
        yield
        code_errors(ctx.result)

    def on_parse(self) -> Iterator[None]:
        ctx = self.execution_context
        ctx.graphql_document = parse_cached(ctx.query, **ctx.parse_options)
        yield
        if ctx.graphql_document is not None:
            check_number_literals(ctx.query or "", ctx.graphql_document)

    def on_validate(self) -> Iterator[None]:
        ctx = self.execution_context
        document = ctx.graphql_document
        assert document is not None  # strawberry validates only what parsed
        ctx.pre_execution_errors = cost_errors(document) or _validate(
            ctx.schema._schema, document, ctx.validation_rules
        )
        yield

    async def on_execute(self) -> AsyncIterator[None]:
        mark_writing(self.execution_context)
        yield
        await audit_admin_mutations(self.execution_context)


class PipelineSchema(TaskrouteSchema):
    """The schema, with the pipeline's stages run in line for documents already known good.

    strawberry's `Schema.execute` instantiates the extensions and builds an extension runner,
    four hook context managers (each checks its hook with `inspect` and wraps it with
    `contextlib`), and a middleware manager, for every operation: with parsing and validation
    cached, that framing costs about as much as graphql-core's execution of the hot path's
    mutations. Here, when the schema's
    only extension is RequestPipeline and the document (with its operation name) parses,
    passes the number-literal check and validates without errors (all three cached, as the
    hooks cache them), with exactly one operation of an allowed type other than a
    subscription, the same stages run in the same
    order as the hooks run them: mark_writing, graphql-core's execute (as strawberry calls
    it), errors processed, audit_admin_mutations, code_errors. Any other request (first
    sight of a document, errors before execution, subscriptions, operation extensions)
    goes through strawberry and the extension, which answer as before.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_line = list(self.extensions) == [RequestPipeline] and not self.directives
        self._known: dict[tuple[str, str | None], tuple[DocumentNode, OperationType]] = {}
        self._no_middleware = MiddlewareManager()
        # the rules strawberry validates with by default (graphql-core's)
        self._rules = tuple(specified_rules)

    def _known_good(
        self, query: str | None, operation_name: str | None
    ) -> tuple[DocumentNode, OperationType] | None:
        if not self._in_line or not isinstance(query, str):
            return None
        try:
            return self._known[(query, operation_name)]
        except KeyError:
            pass
        try:
            document = parse_cached(query, max_tokens=MAX_TOKENS)
            check_number_literals(query, document)
        except (GraphQLError, RecursionError):
            return None
        operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
        if len(operations) != 1:
            return None
        operation = operations[0]
        name = operation.name.value if operation.name else None
        kind = OperationType(operation.operation.value)
        if (
            (operation_name is not None and name != operation_name)
            or kind == OperationType.SUBSCRIPTION
            or cost_errors(document)
            or _validate(self._schema, document, self._rules)
        ):
            return None
        known = (document, kind)
        if len(self._known) >= DOCUMENT_CACHE:
            self._known.clear()
        self._known[(query, operation_name)] = known
        return known

    async def execute(  # noqa: PLR0917
        self,
        query: str | None,
        variable_values: dict[str, Any] | None = None,
        context_value: Any | None = None,
        root_value: Any | None = None,
        operation_name: str | None = None,
        allowed_operation_types: Iterable[OperationType] | None = None,
        operation_extensions: dict[str, Any] | None = None,
    ) -> ExecutionResult:
        known = self._known_good(query, operation_name) if operation_extensions is None else None
        if (
            known is None
            or allowed_operation_types is None
            or known[1] not in allowed_operation_types
        ):
            return await super().execute(
                query, variable_values, context_value, root_value, operation_name,
                allowed_operation_types, operation_extensions,
            )  # fmt: skip
        ctx = self._create_execution_context(
            query=query,
            allowed_operation_types=allowed_operation_types,
            variable_values=variable_values,
            context_value=context_value,
            root_value=root_value,
            operation_name=operation_name,
            operation_extensions=operation_extensions,
        )
        ctx.graphql_document = known[0]
        try:
            mark_writing(ctx)
            raw = execute(
                self._schema,
                known[0],
                root_value=root_value,
                middleware=self._no_middleware,
                variable_values=variable_values,
                operation_name=operation_name,
                context_value=context_value,
                is_awaitable=cast(Any, optimized_is_awaitable),
                **execution_context_class_kwargs(self.execution_context_class),
                operation_extensions=operation_extensions,
            )
            done = cast(GraphQLExecutionResult, await await_maybe(raw))
            ctx.result = done
            if done.errors:
                ctx.pre_execution_errors = done.errors
                self._process_errors(done.errors, ctx)
            await audit_admin_mutations(ctx)
            result = ExecutionResult(data=done.data, errors=done.errors, extensions={})
        except Exception as exc:  # as strawberry answers an exception raised by a hook
            error = (
                exc if isinstance(exc, GraphQLError) else GraphQLError(str(exc), original_error=exc)
            )
            ctx.pre_execution_errors = [error]
            self._process_errors([error], ctx)
            result = PreExecutionError(data=None, errors=[error], extensions={})
        ctx.result = result
        code_errors(result)
        return result
