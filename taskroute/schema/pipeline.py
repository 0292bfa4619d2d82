"""What runs around every GraphQL operation, as one strawberry extension.

strawberry builds, for every request, one context manager per hook of every extension (a
`contextlib` wrapper made with `functools.wraps` each time) and instantiates every extension:
with eight extensions that was ~10% of a server process's CPU on the hot path (py-spy,
bench/load.py). Here each stage has one hook that calls the rules in order; the rules
themselves live with what they protect (limits.py, errors.py, accounts.py).

- operation: the token limit for the parser and the depth/alias/field validation rules; after
  it, every error gets an `extensions.code` (errors.code_errors).
- parse: an LRU cache of parsed documents (the hot path sends the same few documents over and
  over), then number literals too long for graphql-core (limits.check_number_literals).
- validate: an LRU cache of validation results, keyed by schema, document and rules (the rule
  classes are made once: limits.validation_rules).
- execute: before it, a mutation marks the context so a read-only token is refused
  (accounts.mark_writing); after it, admin mutations are audited (accounts.audit_admin_mutations).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from graphql import parse
from strawberry.extensions import SchemaExtension
from strawberry.schema.schema import validate_document

from .accounts import audit_admin_mutations, mark_writing
from .errors import code_errors
from .limits import MAX_TOKENS, check_number_literals, validation_rules

# Distinct documents kept parsed and validated: the UI, the dashboards and the experts' tools
# send a few dozen; the bound keeps arbitrary clients from growing the caches.
DOCUMENT_CACHE = 256

parse_cached: Callable[..., Any] = functools.lru_cache(maxsize=DOCUMENT_CACHE)(parse)
_validate: Callable[..., Any] = functools.lru_cache(maxsize=DOCUMENT_CACHE)(validate_document)


class RequestPipeline(SchemaExtension):
    def on_operation(self) -> Iterator[None]:
        ctx = self.execution_context
        ctx.parse_options["max_tokens"] = MAX_TOKENS
        ctx.validation_rules = ctx.validation_rules + validation_rules()
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
        ctx.pre_execution_errors = _validate(
            ctx.schema._schema, ctx.graphql_document, ctx.validation_rules
        )
        yield

    async def on_execute(self) -> AsyncIterator[None]:
        mark_writing(self.execution_context)
        yield
        await audit_admin_mutations(self.execution_context)
