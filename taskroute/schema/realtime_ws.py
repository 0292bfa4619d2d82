"""graphql-transport-ws with a lean path for the one subscription thousands of clients hold.

Every idle expert holds a `taskAvailable` subscription. Through strawberry each one kept
~19 KiB for its whole life (bench/RESULTS.md): the operation contexts of the schema's
extensions, graphql-core's subscription executor and its result mapping, strawberry's own
stream generators. The subscription's answer is three scalars, so a `subscribe` whose document
is exactly a `taskAvailable` selection (optionally aliased, fields among skill, projectId,
recheck and __typename, no fragments or directives) that validates against the schema is
served here: variables and arguments are coerced by graphql-core's own functions, then the
hub's waiter (`realtime.TaskSubscription`, the resolver's own code) is read and each hint is sent
as the `next` message strawberry would send. Everything else (other subscriptions, queries
over the socket, any document this does not recognise, bad variables) goes to strawberry,
which answers its errors as before. The protocol itself (connection_init, ping, complete,
duplicate ids, close codes) stays strawberry's: only `run_operation` is replaced.

Errors are the ones strawberry sends for an error raised by the subscription's generator: a
`next` with `data: null` and the coded error, then `complete`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any, cast

from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLError,
    GraphQLFormattedError,
    GraphQLSchema,
    OperationDefinitionNode,
    OperationType,
    parse,
    validate,
)
from graphql.execution.values import get_argument_values, get_variable_values
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
    Operation,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import (
    ConnectionInitMessage,
    Message,
    NextMessagePayload,
)
from strawberry.subscriptions.protocols.graphql_ws.handlers import BaseGraphQLWSHandler
from strawberry.subscriptions.protocols.graphql_ws.types import (
    ConnectionInitMessage as LegacyInitMessage,
)
from strawberry.subscriptions.protocols.graphql_ws.types import OperationMessage

from taskroute.errors import TaskrouteError
from taskroute.realtime.hub import Hint

from .context import Context
from .limits import MAX_DOCUMENT_CHARS, MAX_TOKENS, cost_errors
from .realtime import TaskSubscription

log = logging.getLogger(__name__)

_FIELDS = frozenset({"skill", "projectId", "recheck", "__typename"})


@dataclass(frozen=True, slots=True)
class TaskAvailablePlan:
    """A validated `taskAvailable` document: what to coerce and which keys to answer."""

    operation: OperationDefinitionNode
    field: FieldNode
    key: str  # the root field's response key (its alias, if any)
    fields: tuple[tuple[str, str], ...]  # (response key, field name), in document order

    def data(self, hint: Hint) -> dict[str, Any]:
        values = {
            "skill": hint.skill,
            "projectId": hint.project_id,
            "recheck": hint.project_id is None,
            "__typename": "TaskAvailable",
        }
        return {self.key: {key: values[name] for key, name in self.fields}}


class TaskAvailablePlans:
    """Documents already looked at (the same few strings come from every client), bounded."""

    def __init__(self, schema: GraphQLSchema, size: int = 256) -> None:
        self.schema = schema
        self.size = size
        self._plans: dict[tuple[str, str | None], TaskAvailablePlan | None] = {}

    def plan(self, query: object, operation_name: object) -> TaskAvailablePlan | None:
        if (
            not isinstance(query, str)
            or len(query) > MAX_DOCUMENT_CHARS  # strawberry's path refuses it; never kept
            or not (operation_name is None or isinstance(operation_name, str))
        ):
            return None
        key = (query, operation_name)
        try:
            return self._plans[key]
        except KeyError:
            pass
        plan = self._make(query, operation_name)
        if len(self._plans) >= self.size:
            self._plans.clear()  # a client sending ever new documents: start over
        self._plans[key] = plan
        return plan

    def _make(self, query: str, operation_name: str | None) -> TaskAvailablePlan | None:
        try:
            document = parse(query, max_tokens=MAX_TOKENS)
        except (GraphQLError, RecursionError):
            return None
        plan = _shape(document, operation_name)
        # Past a limit strawberry's path answers the refusal; validating first cost more.
        if plan is None or cost_errors(document) or validate(self.schema, document):
            return None
        return plan

    def arguments(self, plan: TaskAvailablePlan, variables: object) -> dict[str, Any] | None:
        """The root field's coerced arguments; None when the variables do not coerce (strawberry
        then answers the error it always answered)."""
        if variables is None:
            variables = {}
        if not isinstance(variables, dict):
            return None
        coerced = get_variable_values(
            self.schema, plan.operation.variable_definitions or (), variables
        )
        if isinstance(coerced, list):
            return None
        subscription = self.schema.subscription_type
        assert subscription is not None  # validated against it
        try:
            return get_argument_values(subscription.fields["taskAvailable"], plan.field, coerced)
        except GraphQLError:
            return None


def _shape(document: DocumentNode, operation_name: str | None) -> TaskAvailablePlan | None:
    """The plan if the document has exactly the lean shape, else None."""
    if len(document.definitions) != 1:
        return None
    op = document.definitions[0]
    if not isinstance(op, OperationDefinitionNode) or op.operation != OperationType.SUBSCRIPTION:
        return None
    if op.directives:
        return None
    if operation_name is not None and (op.name is None or op.name.value != operation_name):
        return None
    roots = op.selection_set.selections
    if len(roots) != 1 or not isinstance(roots[0], FieldNode):
        return None
    root = roots[0]
    if root.name.value != "taskAvailable" or root.directives or root.selection_set is None:
        return None
    if any(a.name.value != "skills" for a in root.arguments or ()):
        return None
    fields: list[tuple[str, str]] = []
    for sel in root.selection_set.selections:
        if (
            not isinstance(sel, FieldNode)
            or sel.name.value not in _FIELDS
            or sel.arguments
            or sel.directives
            or sel.selection_set is not None
        ):
            return None
        fields.append(((sel.alias or sel.name).value, sel.name.value))
    return TaskAvailablePlan(op, root, (root.alias or root.name).value, tuple(fields))


def operation_problem(message: Any, kind: str) -> str | None:
    """What is wrong with a `subscribe` (graphql-transport-ws) or `start` (graphql-ws) message,
    None if it has the shape both protocols require: a string id and a payload object with a
    string query, optional object variables and optional string operationName. strawberry
    indexes into it as it is, and a null payload or a list of variables escaped as an
    unhandled exception (the socket dropped) or reached execution (INTERNAL)."""
    if not isinstance(message.get("id"), str):
        return f"a `{kind}` message needs a string `id`"
    payload = message.get("payload")
    if not isinstance(payload, dict):
        return f"a `{kind}` message needs a `payload` object"
    if not isinstance(payload.get("query"), str):
        return "the payload's `query` must be a string"
    if not isinstance(payload.get("variables"), dict | None):
        return "the payload's `variables` must be an object or null"
    if not isinstance(payload.get("operationName"), str | None):
        return "the payload's `operationName` must be a string or null"
    if not isinstance(payload.get("extensions"), dict | None):
        return "the payload's `extensions` must be an object or null"
    return None


class TransportWS(BaseGraphQLTransportWSHandler[Context, None]):
    """strawberry's graphql-transport-ws handler; `taskAvailable` runs on the lean path, and a
    malformed message closes the socket with 4400 as the protocol says (strawberry let a
    message that is not an object, or a `subscribe` with a null payload, escape as an
    exception that dropped the socket)."""

    async def handle_message(self, message: Message) -> None:
        raw: Any = message
        if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
            await self.handle_invalid_message("messages must be objects with a string `type`")
            return
        if raw["type"] == "subscribe" and self.connection_acknowledged:
            problem = operation_problem(raw, "subscribe")
            if problem is not None:
                await self.handle_invalid_message(problem)
                return
        await super().handle_message(message)

    @property
    def plans(self) -> TaskAvailablePlans:
        plans: TaskAvailablePlans = getattr(self.view, "task_available_plans")  # noqa: B009
        return plans

    async def handle_connection_init(self, message: ConnectionInitMessage) -> None:
        await super().handle_connection_init(message)
        # Both were needed once: the payload by on_ws_connect (authentication), the timer
        # until now (it is cancelled; the loop finishes it without us).
        self.context.connection_params = None
        self.connection_init_timeout_task = None

    async def run_operation(self, operation: Operation[Context, None]) -> None:
        plan = self.plans.plan(operation.query, operation.operation_name)
        args = self.plans.arguments(plan, operation.variables) if plan is not None else None
        if plan is None or args is None:
            await super().run_operation(operation)
            return
        # Nothing of the request is needed any more: do not keep it for the socket's life.
        skills, args, operation.variables = args.get("skills"), None, None
        # One frame for the subscription's life (this one): no helper coroutines below it.
        sending = False
        try:
            try:
                async with TaskSubscription(self.context, skills) as waiter:
                    skills = None
                    while True:
                        hint = await waiter.next()
                        sending = True
                        await operation.send_operation_message(
                            {
                                "id": operation.id,
                                "type": "next",
                                "payload": {"data": plan.data(hint)},
                            }
                        )
                        sending = False
            except Exception as exc:
                if sending:
                    raise
                if isinstance(exc, TaskrouteError):
                    error = {"message": exc.message, "extensions": exc.extensions}
                else:
                    log.error("unexpected error in taskAvailable", exc_info=exc)
                    error = {"message": "Unexpected error.", "extensions": {"code": "INTERNAL"}}
            # What strawberry sends when the subscription's generator raises.
            failed: NextMessagePayload = {
                "data": None,
                "errors": [cast(GraphQLFormattedError, error)],
            }
            await operation.send_operation_message(
                {"id": operation.id, "type": "next", "payload": failed}
            )
            await operation.send_operation_message({"id": operation.id, "type": "complete"})
        except Exception as error:  # a message that could not be sent: as strawberry does
            await self.handle_task_exception(error)
            with contextlib.suppress(Exception):
                await operation.send_operation_message({"id": operation.id, "type": "complete"})
            self.operations.pop(operation.id, None)
            raise


class LegacyWS(BaseGraphQLWSHandler[Context, None]):
    """strawberry's legacy graphql-ws (subscriptions-transport-ws) handler, with what its
    graphql-transport-ws handler has: a socket that does not send `connection_init` within
    the view's `connection_init_wait_timeout` is closed (4408), and every frame is answered.
    A malformed `start`, a message that is not an object, or an unknown type gets an `error`
    message (for its id when it has one) instead of an exception that dropped the socket;
    queries and mutations sent as `start` get the coded error of the operation type."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.init_received = False
        self.init_deadline: asyncio.Task[None] | None = None

    async def handle(self) -> None:
        self.init_deadline = asyncio.create_task(self._close_unless_initialised())
        try:
            await super().handle()
        finally:
            self._cancel_deadline()

    async def _close_unless_initialised(self) -> None:
        await asyncio.sleep(self.view.connection_init_wait_timeout.total_seconds())
        if not self.init_received:
            with contextlib.suppress(Exception):  # the client may be gone already
                await self.websocket.close(code=4408, reason="Connection initialisation timeout")

    def _cancel_deadline(self) -> None:
        # Dropped once done with: no timer kept for an idle subscriber's life.
        deadline, self.init_deadline = self.init_deadline, None
        if deadline is not None:
            deadline.cancel()

    async def handle_message(self, message: OperationMessage) -> None:
        raw: Any = message
        if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
            await self._error(None, "messages must be objects with a string `type`")
            return
        kind = raw["type"]
        op_id = raw.get("id") if isinstance(raw.get("id"), str) else None
        if kind == "start" and self.connection_acknowledged:
            problem = operation_problem(raw, "start")
            if problem is not None:
                await self._error(op_id, problem)
                return
        elif kind == "stop" and op_id is None:
            await self._error(None, "a `stop` message needs a string `id`")
            return
        elif kind not in ("connection_init", "connection_terminate", "start", "stop"):
            await self._error(op_id, f"unknown message type {kind!r}")
            return
        await super().handle_message(message)

    async def handle_connection_init(self, message: LegacyInitMessage) -> None:
        self.init_received = True
        self._cancel_deadline()
        await super().handle_connection_init(message)
        self.context.connection_params = None  # read by on_ws_connect, never again

    async def _error(self, op_id: str | None, text: str) -> None:
        error = {"message": text, "extensions": {"code": "BAD_INPUT"}}
        message: dict[str, Any] = {"type": "error", "payload": error}
        if op_id is not None:
            message["id"] = op_id
        await self.websocket.send_json(message)
