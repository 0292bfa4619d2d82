"""GraphQL over HTTP (the GraphQL-over-HTTP specification) on top of strawberry's ASGI view.

What strawberry 0.341 does by itself, and what this module changes:
- It always answers `application/json` with status 200, even for parse and validation errors.
  Here the response media type is negotiated from `Accept`: `application/graphql-response+json`
  when the client accepts it (then a request error -> 400), else `application/json` (status 200
  for every well-formed request, as the spec asks for that legacy media type).
- A request error (the document did not parse or validate, or variables did not coerce) carries
  no `data` entry, as the GraphQL spec says; strawberry sends `"data": null`.
- A mutation through GET: strawberry answers 400; the spec requires 405 (with `Allow: POST`).
- A POST whose body is not `application/json`: strawberry answers 400; here 415.
- Malformed requests (bad JSON, no query, ...) get a JSON body `{"errors": [...]}` in the
  negotiated media type instead of strawberry's plain text.
- No acceptable media type (`Accept: text/csv`) -> 406.
- Authentication comes first: a request without a valid bearer token is refused (401
  UNAUTHENTICATED) before its body is read, parsed or validated, so anonymous clients cannot
  make the server parse and validate large documents (the lookup is an in-process cache hit
  or one indexed query). The GraphiQL page itself (GET, `Accept: text/html`) stays open.
- A document with several operations and no `operationName` is a request error (the spec;
  strawberry ran the first one); a non-string `operationName` is a 400.
- Subscriptions are served over WebSocket and, for dashboards behind proxies that block
  WebSockets, over HTTP streams: GraphQL over SSE (`Accept: text/event-stream`, distinct
  connections mode) and multipart subscriptions (`Accept: multipart/mixed;
  subscriptionSpec="1.0"`), both strawberry's opt-in `subscription_protocols`, authenticated like
  every request and counted in the same subscription budget. A subscription sent with any
  other `Accept` is a 400 naming the ways to subscribe (it used to fail as INTERNAL).
- Every 405 carries `Allow`, and every error body is the JSON error shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Mapping
from typing import Any

from cross_web import HTTPException
from graphql import FieldNode, GraphQLError, OperationDefinitionNode, OperationType
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData, process_result
from strawberry.http.streaming import HTTPStreamTransport
from strawberry.schema.exceptions import (
    CannotGetOperationTypeError,
    InvalidOperationTypeError,
)
from strawberry.subscriptions import (
    GRAPHQL_SSE_PROTOCOL,
    GRAPHQL_TRANSPORT_WS_PROTOCOL,
    GRAPHQL_WS_PROTOCOL,
    MULTIPART_SUBSCRIPTION_PROTOCOL,
)
from strawberry.types import ExecutionResult

from taskroute.db.admission import Priority
from taskroute.errors import TaskrouteError, Unavailable
from taskroute.resolvers import claims
from taskroute.resolvers.accounts.authentication import authenticate
from taskroute.resolvers.accounts.credential_cache import CredentialCache, StreamEnd
from taskroute.resolvers.accounts.credentials import Viewer, hash_token, parse_bearer
from taskroute.rest.pages import graphiql_page
from taskroute.schema.claims import CLAIM_OPS
from taskroute.schema.limits import MAX_TOKENS
from taskroute.schema.pipeline import parse_cached

GRAPHQL_RESPONSE = "application/graphql-response+json"
SUBSCRIPTIONS_OVER_WS = (
    "subscriptions are served over WebSocket (graphql-transport-ws) at /graphql, or over HTTP "
    "with Accept: text/event-stream (GraphQL over SSE) or "
    'multipart/mixed;subscriptionSpec="1.0"'
)
JSON = "application/json"

# Error codes that mean "the server could not serve this right now": clients may retry.
RETRYABLE_CODES = frozenset({"UNAVAILABLE"})


def _accept_entries(header: str) -> list[tuple[str, float]]:
    entries = []
    for part in header.split(","):
        fields = [f.strip() for f in part.split(";")]
        media = fields[0].lower()
        if not media:
            continue
        q = 1.0
        for param in fields[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        entries.append((media, q))
    return entries


def negotiate(accept: str | None) -> str | None:
    """The response media type for an `Accept` header; None when nothing we serve is acceptable.

    Explicitly listed types win over wildcards; `*/*` alone keeps the legacy `application/json`
    so existing clients (and curl) see no change.
    """
    if not accept or not accept.strip():
        return JSON
    best: dict[str, float] = {}
    wildcard = 0.0
    for media, q in _accept_entries(accept):
        if media in (GRAPHQL_RESPONSE, JSON):
            best[media] = max(best.get(media, 0.0), q)
        elif media in ("*/*", "application/*"):
            wildcard = max(wildcard, q)
    if best.get(GRAPHQL_RESPONSE, 0.0) > 0 and best[GRAPHQL_RESPONSE] >= best.get(JSON, 0.0):
        return GRAPHQL_RESPONSE
    if best.get(JSON, 0.0) > 0 or wildcard > 0:
        return JSON
    return None


def _is_request_error(result: ExecutionResult) -> bool:
    """Parse, validation and variable-coercion errors: execution never started.

    Field errors always carry a `path`; request errors never do.
    """
    return (
        bool(result.errors)
        and result.data is None
        and all(e.path is None for e in result.errors or ())
    )


def _retry_after(errors: list[GraphQLError] | None) -> int:
    """The longest wait any retryable error asks for (admission.py grows it with the load)."""
    waits = [
        int((e.extensions or {}).get("retryAfter", 1))
        for e in errors or ()
        if (e.extensions or {}).get("code") in RETRYABLE_CODES
    ]
    return max(waits, default=1)


def _codes(errors: list[GraphQLError] | None) -> set[str]:
    return {str((e.extensions or {}).get("code")) for e in errors or []}


class SpecSubResponse(Response):
    """strawberry's per-request sub-response, plus what this request negotiated and produced."""

    media_type_chosen: str = JSON
    request_error_status: int | None = None
    retryable: bool = False
    retry_after: int = 1


# WebSocket first (the workbench, the dashboard, the worker client), then the HTTP streams.
SUBSCRIPTION_PROTOCOLS = (
    GRAPHQL_TRANSPORT_WS_PROTOCOL,
    GRAPHQL_WS_PROTOCOL,
    GRAPHQL_SSE_PROTOCOL,
    MULTIPART_SUBSCRIPTION_PROTOCOL,
)


# Distinct Accept headers whose stream transport is remembered (clients send a handful).
ACCEPT_CACHE = 64


class SpecGraphQL(GraphQL[Any, None]):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("subscription_protocols", SUBSCRIPTION_PROTOCOLS)
        super().__init__(*args, **kwargs)
        self._transport_by_accept: dict[str, Any] = {}

    async def render_graphql_ide(self, request: Request) -> Response:
        return graphiql_page()

    def _get_stream_transport_from_headers(self, headers: Mapping[str, str]) -> Any:
        # strawberry asks each stream transport whether it accepts the `Accept` header, the
        # multipart one through email.message's header parser, twice per request: ~5% of a
        # server process's CPU on the hot path (py-spy, bench/load.py). The answer depends on
        # the header alone, so it is remembered per distinct header.
        accept = headers.get("accept") or ""
        try:
            return self._transport_by_accept[accept]
        except KeyError:
            transport = super()._get_stream_transport_from_headers({"accept": accept})
            if len(self._transport_by_accept) < ACCEPT_CACHE:
                self._transport_by_accept[accept] = transport
            return transport

    # Not `async`: a WebSocket goes straight to strawberry's view, without a frame of this
    # call kept for the connection's life (realtime_ws.py, app.App).
    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Coroutine[Any, Any, None]:
        if scope["type"] != "http":
            return super().__call__(scope, receive, send)
        return self._http(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        streaming = self._get_stream_transport_from_headers(request.headers) is not None
        media = negotiate(request.headers.get("accept"))
        wants_ide = self.should_render_graphql_ide(self.request_adapter_class(request))
        if streaming and media is None:
            media = JSON  # the stream's own media type; errors before it starts are JSON
        if media is None and not wants_ide:
            response = _error_response(
                406, f"Accept must allow {GRAPHQL_RESPONSE} or {JSON}", JSON, "NOT_ACCEPTABLE"
            )
            await response(scope, receive, send)
            return
        request.state.graphql_media = media or JSON
        if request.method not in ("GET", "POST"):
            response = _error_response(405, "use GET or POST", media or JSON, "METHOD_NOT_ALLOWED")
            response.headers["Allow"] = "GET, POST"
            await response(scope, receive, send)
            return
        if not wants_ide:
            refused = await self._authenticate(request) or await self._claim_refusal(request)
            if refused is not None:
                await refused(scope, receive, send)
                return
        # A stream ends when its credential stops authenticating, as a WebSocket closes.
        end = _watch_stream(request) if streaming and not wants_ide else None
        request.state.stream_end = end
        try:
            try:
                response = await self.run(request)
            except HTTPException as exc:
                response = self._http_error(request, exc)
            await response(scope, receive, send)
        finally:
            if end is not None:
                end.unwatch()

    async def _authenticate(self, request: Request) -> Response | None:
        """Authenticate before anything else (see the module doc); the viewer is kept for the
        request's context. Returns the refusal, or None to go on."""
        services = request.state.services
        try:
            request.state.viewer = await authenticate(
                services.db,
                services.settings.admin_token,
                request.headers.get("authorization"),
                cache=services.credentials,
            )
        except TaskrouteError as exc:
            response = _error_response(
                exc.http_status, exc.message, request.state.graphql_media, exc.code
            )
            if exc.code == "UNAUTHENTICATED":
                response.headers["WWW-Authenticate"] = "Bearer"
            if isinstance(exc, Unavailable):
                response.headers["Retry-After"] = str(exc.retry_after)
            return response
        return None

    async def _claim_refusal(self, request: Request) -> Response | None:
        """An expert's claim that the admission gate would refuse now is answered before
        strawberry runs, with the answer the resolver would have given (`claimNextTask: null`,
        UNAVAILABLE / overloaded with `retryAfter`). Past capacity most requests are such
        claims, and executing each one only to refuse it cost the server a request's work
        (bench/load.py at 2,000 experts: a refused claim for every cycle served). An expert
        who holds a live claim is never refused (one index probe, outside the claim line): the
        resolver answers with that claim (claims.claim_next), as does one this process handed
        a claim to within the memo's window (the resolver asks the database first)."""
        services = request.state.services
        gate = services.db.admission
        viewer = request.state.viewer
        if (
            gate is None
            or request.method != "POST"
            or viewer.role != "expert"
            or not gate.would_refuse(Priority.CLAIM)
        ):
            return None
        fields = _claim_fields(await request.body(), self.parse_json)
        if not fields:
            return None
        memo = services.held_claims
        if memo is not None and memo.get(viewer.expert_id) is not None:
            return None
        try:
            if await claims.holds_claim(services.db, viewer.expert_id):
                return None
        except Unavailable:
            pass  # unanswered, or even work in progress is refused now: so is this
        refusal = gate.refusal(Priority.CLAIM)
        if refusal is None:
            return None
        errors = [
            GraphQLError(refusal.message, node, path=[key], extensions=refusal.extensions)
            for key, node in fields
        ]
        media = request.state.graphql_media
        body = {"data": {key: None for key, _ in fields}, "errors": [e.formatted for e in errors]}
        content_type = f"{media}; charset=utf-8" if media == GRAPHQL_RESPONSE else JSON
        headers = {"content-type": content_type, "Retry-After": str(refusal.retry_after)}
        return Response(json.dumps(body), headers=headers)

    def _http_error(self, request: Request, exc: HTTPException) -> Response:
        media = request.state.graphql_media
        # GraphQL-over-HTTP: a mutation through GET MUST be answered with 405.
        if isinstance(exc.__cause__, InvalidOperationTypeError) and request.method == "GET":
            response = _error_response(405, exc.reason, media, "METHOD_NOT_ALLOWED")
            response.headers["Allow"] = "POST"
            return response
        if isinstance(exc.__cause__, CannotGetOperationTypeError):
            # A request error (which operation?): 200 for the legacy media type, 400 otherwise.
            status = 400 if media == GRAPHQL_RESPONSE else 200
            return _error_response(status, exc.reason, media, "BAD_INPUT")
        code = {405: "METHOD_NOT_ALLOWED", 415: "UNSUPPORTED_MEDIA_TYPE"}.get(
            exc.status_code, "BAD_REQUEST"
        )
        return _error_response(exc.status_code, exc.reason, media, code)

    def parse_json(self, data: str | bytes) -> Any:
        # strawberry catches only JSONDecodeError; Python's json also raises ValueError (ints
        # over 4300 digits, bad UTF-8) and RecursionError (absurd nesting): all are a 400.
        try:
            return super().parse_json(data)
        except (ValueError, RecursionError) as exc:
            raise HTTPException(400, "Unable to parse request body as JSON") from exc

    async def parse_http_body(self, request: Any) -> Any:
        parsed: GraphQLRequestData
        if request.method == "POST":
            content_type = (request.content_type or "").split(";")[0].strip().lower()
            if content_type != JSON:
                raise HTTPException(415, f"POST bodies must be {JSON}")
            parsed = self._json_request(
                self.parse_json(await request.get_body()),
                self._get_stream_transport_from_headers(request.headers),
            )
        else:
            try:
                data = await super().parse_http_body(request)
            except (AttributeError, TypeError) as exc:
                # strawberry calls `.get` on whatever arrived.
                raise HTTPException(400, "the body must be a JSON object") from exc
            if isinstance(data, list):  # strawberry refuses batches first (batching is off)
                raise HTTPException(400, "Batching is not enabled")
            parsed = data
        name = parsed.operation_name
        if name is not None and not isinstance(name, str):
            raise HTTPException(400, "operationName must be a string")
        if isinstance(parsed.query, str):
            operations = _operations(parsed.query)
            if name is None and len(operations) > 1:
                # The spec: with several operations the client must say which one to run.
                raise HTTPException(400, "the document has several operations: set operationName")
            chosen = [op for op in operations if name is None or op[0] == name]
            if (
                chosen
                and chosen[0][1] == OperationType.SUBSCRIPTION
                and parsed.protocol == "http"  # not asked for as an SSE or multipart stream
            ):
                raise HTTPException(400, SUBSCRIPTIONS_OVER_WS)
        return parsed

    @staticmethod
    def _json_request(data: Any, transport: Any) -> GraphQLRequestData:
        """A POST's JSON body as strawberry's request data, checked as strawberry checks it
        (same messages). strawberry's own path parses the Content-Type again with
        email.message (checked above already); batching is off here."""
        if isinstance(data, list):
            raise HTTPException(400, "Batching is not enabled")
        if not isinstance(data, dict):
            raise HTTPException(400, "the body must be a JSON object")
        query = data.get("query")
        if not isinstance(query, (str, type(None))):
            raise HTTPException(
                400, "The GraphQL operation's `query` must be a string or null, if provided."
            )
        for key in ("variables", "extensions"):
            if not isinstance(data.get(key), (dict, type(None))):
                raise HTTPException(
                    400, f"The GraphQL operation's `{key}` must be an object or null, if provided."
                )
        return GraphQLRequestData(
            query=query,
            variables=data.get("variables"),
            operation_name=data.get("operationName"),
            extensions=data.get("extensions"),
            protocol=transport.protocol if transport else "http",
        )

    async def create_streaming_response(
        self,
        request: Request | WebSocket,
        stream: Callable[[], AsyncIterator[str]],
        sub_response: Response,
        headers: Mapping[str, str],
    ) -> Response:
        end: StreamEnd | None = getattr(request.state, "stream_end", None)
        transport = self._get_stream_transport_from_headers(request.headers)
        if end is not None and transport is not None:
            stream = _until_ended(stream, end, transport, self.encode_json_string)
        return await super().create_streaming_response(request, stream, sub_response, headers)

    async def get_sub_response(self, request: Request) -> Response:  # type: ignore[override]
        sub = SpecSubResponse()
        sub.status_code = None  # type: ignore[assignment]
        del sub.headers["content-length"]
        sub.media_type_chosen = getattr(request.state, "graphql_media", JSON)
        request.state.graphql_sub_response = sub
        return sub

    async def process_result(
        self, request: Request, result: ExecutionResult
    ) -> GraphQLHTTPResponse:
        data = process_result(result)
        sub: SpecSubResponse | None = getattr(request.state, "graphql_sub_response", None)
        codes = _codes(result.errors)
        if sub is not None and codes & RETRYABLE_CODES:
            sub.retryable = True
            sub.retry_after = _retry_after(result.errors)
        if _is_request_error(result):
            # No `data` entry: the request failed before execution (GraphQL spec, 7.1.2).
            data.pop("data", None)
            if sub is not None:
                sub.request_error_status = 503 if codes & RETRYABLE_CODES else 400
                if "INTERNAL" in codes:
                    sub.request_error_status = 500
        return data

    def create_response(
        self,
        response_data: GraphQLHTTPResponse | list[GraphQLHTTPResponse],
        sub_response: Response,
    ) -> Response:
        response = super().create_response(response_data, sub_response)
        if not isinstance(sub_response, SpecSubResponse):
            return response
        media = sub_response.media_type_chosen
        response.headers["content-type"] = (
            f"{media}; charset=utf-8" if media == GRAPHQL_RESPONSE else JSON
        )
        if (
            media == GRAPHQL_RESPONSE
            and sub_response.request_error_status is not None
            and not sub_response.status_code
        ):
            response.status_code = sub_response.request_error_status
        if sub_response.retryable:
            response.headers.setdefault("Retry-After", str(sub_response.retry_after))
        return response


_OPERATION_KEYWORD = re.compile(r"\b(?:query|mutation|subscription)\b")


def _operations(query: str) -> list[tuple[str | None, OperationType]]:
    """The (name, type) of each operation of a document; [] when it does not parse (strawberry
    then reports the syntax error as usual). Documents with at most one operation keyword and
    no `subscription` (every hot-path request) are not parsed here at all."""
    keywords = _OPERATION_KEYWORD.findall(query, 0, 100_000)
    if len(keywords) < 2 and "subscription" not in keywords:
        return []
    try:
        document = parse_cached(query, max_tokens=MAX_TOKENS)  # the pipeline's cache
    except GraphQLError:
        return []
    return [
        (d.name.value if d.name else None, d.operation)
        for d in document.definitions
        if isinstance(d, OperationDefinitionNode)
    ]


def _claim_fields(body: bytes, parse_json: Any) -> list[tuple[str, FieldNode]]:
    """The root fields of a request that is one mutation selecting only `claimNextTask`
    (response key, node); [] for anything else, which then takes the normal path (and its
    errors: bad JSON, syntax, directives, other fields)."""
    try:
        data = parse_json(body)
    except HTTPException:
        return []
    query = data.get("query") if isinstance(data, dict) else None
    if not isinstance(query, str):
        return []
    try:
        document = parse_cached(query, max_tokens=MAX_TOKENS)
    except GraphQLError:
        return []
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if len(operations) != 1 or len(document.definitions) != 1:
        return []
    operation = operations[0]
    name = data.get("operationName")
    if operation.operation != OperationType.MUTATION or (
        name is not None and (operation.name is None or operation.name.value != name)
    ):
        return []
    fields = []
    for node in operation.selection_set.selections:
        if not isinstance(node, FieldNode) or node.name.value not in CLAIM_OPS or node.directives:
            return []
        fields.append((node.alias.value if node.alias else node.name.value, node))
    return fields


def _watch_stream(request: Request) -> StreamEnd | None:
    """Watch a subscription stream's credential (see credential_cache.py); None for the
    admin token (held in memory: nothing revokes it) or without a credential cache."""
    cache: CredentialCache | None = request.state.services.credentials
    viewer: Viewer = request.state.viewer
    token = parse_bearer(request.headers.get("authorization"))
    if cache is None or viewer.credential_id is None or token is None:
        return None
    return cache.watch_stream(request.state.services.db, hash_token(token), viewer)


def _until_ended(
    stream: Callable[[], AsyncIterator[str]],
    end: StreamEnd,
    transport: HTTPStreamTransport,
    encode_json: Callable[[object], str],
) -> Callable[[], AsyncGenerator[str, None]]:
    """`stream`, until `end` says its credential no longer authenticates: then the coded
    error and the transport's end, as a subscription that failed (and the stream's own
    generators are closed, which ends the subscription and frees its slot)."""

    async def until_ended() -> AsyncGenerator[str, None]:
        chunks = aiter(stream())
        ended = asyncio.ensure_future(end.ended.wait())
        step: asyncio.Future[str] | None = None
        try:
            while True:
                step = asyncio.ensure_future(anext(chunks))
                await asyncio.wait((step, ended), return_when=asyncio.FIRST_COMPLETED)
                if ended.done():
                    error = {"message": end.reason, "extensions": {"code": "UNAUTHENTICATED"}}
                    yield transport.encode_next({"data": None, "errors": [error]}, encode_json)
                    yield transport.encode_complete()
                    return
                try:
                    yield step.result()
                except StopAsyncIteration:
                    return
        finally:
            ended.cancel()
            if step is not None and not step.done():
                # ends the stream's generator (a pending step cannot be closed otherwise)
                step.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await step
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()

    return until_ended


def _error_response(status: int, message: str, media: str, code: str) -> Response:
    body = {"errors": [{"message": message, "extensions": {"code": code}}]}
    content_type = f"{media}; charset=utf-8" if media == GRAPHQL_RESPONSE else JSON
    return Response(json.dumps(body), status_code=status, headers={"content-type": content_type})
