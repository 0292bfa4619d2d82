"""The ASGI application: GraphQL, REST, health, and the background jobs in its lifespan."""

from __future__ import annotations

import contextlib
import datetime
import logging
from collections.abc import AsyncIterator
from typing import Any, cast

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry import Schema
from strawberry.exceptions import ConnectionRejectionError
from strawberry.types.unset import UNSET, UnsetType

from taskroute import rest
from taskroute.config import Settings
from taskroute.db.admission import Admission
from taskroute.db.migrate import migrate_url
from taskroute.db.pool import Database, create_pool
from taskroute.errors import PayloadTooLarge, TaskrouteError, Unavailable
from taskroute.observability.loop_lag import watch_event_loop
from taskroute.realtime.backend import PostgresNotifyBackend
from taskroute.realtime.budget import SubscriptionBudget
from taskroute.realtime.hub import Hub
from taskroute.realtime.notify import NOTIFIER
from taskroute.realtime.tickets import WakeTickets
from taskroute.resolvers import payloads
from taskroute.resolvers.accounts.credential_cache import CREDENTIALS_CHANNEL, CredentialCache
from taskroute.resolvers.held_claims import HeldClaims
from taskroute.resolvers.jobs import ingest, retention
from taskroute.resolvers.jobs.auto_approval import auto_approve_pass
from taskroute.resolvers.jobs.deadline_alerts import alerts_pass
from taskroute.resolvers.jobs.routing import RoutingPolicy, routing_once
from taskroute.resolvers.jobs.sweeper import sweep_pass
from taskroute.resolvers.jobs.table_hygiene import hygiene_once
from taskroute.resolvers.jobs.task_counts import compact_once
from taskroute.resolvers.jobs.webhooks import WebhookSender
from taskroute.schema.build import build_schema
from taskroute.schema.context import Context
from taskroute.schema.realtime_ws import LegacyWS, TaskAvailablePlans, TransportWS
from taskroute.schema.socket_watch import watch_websocket
from taskroute.server import gc_tuning
from taskroute.server.drain import Drain, DrainWebSockets
from taskroute.server.graphql_http import SpecGraphQL
from taskroute.server.health import healthz, readyz
from taskroute.server.jobs import Jobs
from taskroute.server.metrics import metrics_endpoint
from taskroute.server.requests import RequestContext
from taskroute.server.services import ServerServices
from taskroute.storage import open_blob_store
from taskroute.storage.payload_links import PayloadUrls

log = logging.getLogger(__name__)


class GraphQLApp(SpecGraphQL):
    # graphql-transport-ws, with `taskAvailable` served without strawberry's executor
    graphql_transport_ws_handler_class = TransportWS
    # legacy graphql-ws, with the connection_init deadline and an answer to every frame
    graphql_ws_handler_class = LegacyWS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.task_available_plans = TaskAvailablePlans(cast(Schema, self.schema)._schema)

    async def get_context(self, request: Request | WebSocket, response: Any) -> Context:
        services: ServerServices = request.state.services
        return Context(services, request.headers.get("authorization"), request, response)

    async def on_ws_connect(self, context: Context) -> UnsetType | dict[str, object] | None:
        """Authenticate a WebSocket from `connection_init` {"Authorization": "Bearer ..."}
        (falling back to the upgrade request's header); refuse it otherwise (4403)."""
        params = context.connection_params or {}
        header = params.get("Authorization", params.get("authorization"))
        if header is not None:
            if not isinstance(header, str):
                raise ConnectionRejectionError(
                    {"code": "UNAUTHENTICATED", "message": "Authorization must be a string"}
                )
            context.authorization = header
        try:
            viewer = await context.viewer()
        except Unavailable:
            # The database is busy, not the credential wrong: accept, and authenticate again
            # when an operation starts (it then fails with UNAVAILABLE if still busy).
            return cast(UnsetType, UNSET)
        except TaskrouteError as exc:
            raise ConnectionRejectionError({"code": exc.code, "message": exc.message}) from exc
        # closed (4403) when the token is revoked, expires, or its expert is deactivated
        watch_websocket(context, viewer)
        return cast(UnsetType, UNSET)


class BodyLimit:
    """Refuses request bodies over `limit` bytes, before buffering them whole."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await rest.error_response(self._too_large())(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise self._too_large()
            return message

        await self.app(scope, limited, send)

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(f"request body is larger than {self.limit} bytes")


async def _taskroute_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TaskrouteError)
    return rest.error_response(exc)


class TaskrouteErrors:
    """The app's TaskrouteError handler as Starlette's exception middleware applies it, for
    the GraphQL requests that skip the stack (App): a TaskrouteError raised by the view (a body
    over the limit, found by BodyLimit while the view reads it) is answered in REST's error
    shape, unless the response has started."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def sender(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, sender)
        except TaskrouteError as exc:
            if started:
                raise RuntimeError(
                    "Caught handled exception, but response already started."
                ) from exc
            await rest.error_response(exc)(scope, receive, sender)


class App(Starlette):
    """The Starlette app, with GraphQL's requests to /graphql taken before its own stack.

    An idle WebSocket keeps every ASGI frame it was called through alive for its whole life:
    Starlette's error and exception middlewares (and the WebSocket object the latter makes),
    the router, the route, BodyLimit. Thousands of idle `taskAvailable` subscribers pay for
    each of them, so GraphQL's WebSockets go through only what they need: RequestContext (ids,
    access log, metrics) and DrainWebSockets (1001 on SIGTERM), then the GraphQL view.
    GraphQL's HTTP requests (every expert's claim, heartbeat and submit) go through
    RequestContext, BodyLimit and TaskrouteErrors (what the exception middleware did for them):
    the rest of the stack is measurable CPU per request on the hot path. Every other request,
    WebSockets to other paths included, takes the full stack."""

    def __init__(self, graphql_websockets: ASGIApp, graphql_http: ASGIApp, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.graphql_websockets = graphql_websockets
        self.graphql_http = graphql_http
        self.graphql_route = next(
            r for r in self.routes if isinstance(r, WebSocketRoute) and r.path == "/graphql"
        )
        self.graphql_http_route = next(
            r for r in self.routes if isinstance(r, Route) and r.path == "/graphql"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "websocket" or kind == "http":
            path: str = scope["path"]
            root = scope.get("root_path", "")
            if root and path.startswith(root):
                path = path[len(root) :]
            if path == "/graphql":
                scope["app"] = self
                # as the router sets them (the access log reads the route)
                scope["router"] = self.router
                if kind == "http":
                    scope["route"] = self.graphql_http_route
                    scope["endpoint"] = self.graphql_http_route.endpoint
                    scope["path_params"] = {}
                    await self.graphql_http(scope, receive, send)
                else:
                    scope["route"] = self.graphql_route
                    await self.graphql_websockets(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings.from_env()
    routing_policy = RoutingPolicy.from_settings(settings)  # bad shares fail at startup
    graphql = GraphQLApp(
        build_schema(introspection=settings.introspection),
        allowed_origins=settings.allowed_origins,
        connection_init_wait_timeout=datetime.timedelta(
            seconds=settings.ws_connection_init_timeout
        ),
    )
    # SIGTERM: WebSockets closed with 1001, jobs stopped at a safe point, then uvicorn's own
    # graceful shutdown (drain.py)
    drain = Drain()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        url = settings.database_url
        embedded = None
        if not url:
            from taskroute.server.embedded import start_embedded_postgres

            url, embedded = start_embedded_postgres(settings.data_dir)
        # Requests go through `url` (possibly PgBouncer in transaction mode); what needs a
        # session of its own (migrations' advisory lock, LISTEN) goes to Postgres directly.
        direct_url = settings.session_url(url) if settings.database_url else url
        await migrate_url(direct_url)
        pool = await create_pool(
            url, settings.pool_min, settings.pool_max, settings.pool_statement_cache(url)
        )
        admission = Admission(
            settings.pool_max,
            settings.admission_queue,
            settings.admission_claim_queue,
            settings.admission_claim_wait,
        )
        # Connections of their own for the held-claim probe (claims.holds_claim): answering
        # "does this expert hold a claim?" must not wait for the pool it would be refused from.
        probes = settings.probe_pool_size
        probe_pool = await create_pool(url, probes, probes, settings.pool_statement_cache(url))
        services = ServerServices(
            Database(pool, settings.pool_timeout, admission, probe_pool=probe_pool), settings
        )
        services.held_claims = HeldClaims(settings.held_claim_memo_seconds)
        services.subscriptions = SubscriptionBudget(
            settings.ws_max_subscriptions_per_socket,
            settings.ws_max_subscriptions_per_credential,
            settings.ws_max_subscriptions_per_account,
        )
        listener = PostgresNotifyBackend(
            direct_url,
            probe_interval=settings.listen_probe_interval,
            probe_timeout=settings.listen_probe_timeout,
        )
        tickets = None
        if settings.wake_coordination:
            tickets = WakeTickets(
                services.db.for_jobs(),  # never refused by admission: a refusal would cost
                # a duplicate wake-up (the local fallback), not a lost one
                ack_seconds=settings.wake_ack_seconds,
                max_announcements=settings.wake_max_announcements,
                take_timeout=settings.wake_take_timeout,
            )
        hub = Hub(listener, services.db, tickets=tickets)
        await hub.start()
        services.hub = hub
        # A deactivated expert's waiters leave the wake-up rotation as the notice arrives.
        await hub.listen(CREDENTIALS_CHANNEL, hub.expert_status_changed)
        # Trusted only through the hub's LISTEN connection: attached (and so used) only once
        # revocations reach it; see credential_cache.py. Made even when it may remember no
        # token (size 0): it is also what ends the streams of revoked credentials.
        cache = CredentialCache(settings.credential_cache_size, settings.credential_cache_max_age)
        await hub.listen(CREDENTIALS_CHANNEL, cache.invalidate, cache.resync)
        cache.attach(hub)
        services.credentials = cache
        # Subscriptions would miss events while the listener is down: not ready then.
        services.readiness["listener"] = hub.ready
        # A draining process is not ready, so load balancers that probe stop sending to it.
        services.readiness["accepting"] = drain.ready
        services.drain = drain
        jobs_db = services.db.for_jobs()  # never refused by admission (db/admission.py)
        NOTIFIER.start(jobs_db)
        jobs = Jobs()
        drain.on_drain(jobs.request_stop)

        async def routing() -> None:
            await routing_once(jobs_db, routing_policy)

        async def compaction() -> None:
            await compact_once(jobs_db)

        async def hygiene() -> None:
            await hygiene_once(jobs_db)

        jobs.spawn("event-loop lag", watch_event_loop(jobs.pause, lambda: jobs.stopping))
        jobs.every("lease sweeper", settings.sweep_interval, lambda: sweep_pass(jobs_db))
        # on_review work past its auto-approval delay, beside the sweeper
        jobs.every("auto-approval", settings.sweep_interval, lambda: auto_approve_pass(jobs_db))
        jobs.every(
            "deadline alerts", settings.forecast_interval, lambda: alerts_pass(jobs_db, settings)
        )
        jobs.every("routing", settings.routing_interval, routing)
        jobs.every("task-count compaction", settings.counts_interval, compaction)
        jobs.every("table hygiene", settings.hygiene_interval, hygiene)

        async def credential_expiry() -> None:
            await cache.expire_pass(jobs_db)

        # tokens expiring by the database's clock end their streams within about a second
        jobs.every("credential expiry", min(1.0, settings.sweep_interval), credential_expiry)
        blobs = open_blob_store(settings.blob_url, settings.data_dir, settings.blob_concurrency)
        services.blobs = blobs
        secret = await payloads.load_secret(services.db, settings.url_secret)
        services.payload_urls = PayloadUrls(secret, settings.payload_url_ttl)
        worker = ingest.IngestWorker(services.db, blobs, settings)
        services.wake_ingest = worker.wake
        jobs.spawn("ingest worker", worker.run(), on_stop=worker.stop_at_safe_point)
        jobs.every(
            "payload retention",
            settings.retention_interval,
            lambda: retention.retention_pass(jobs_db, blobs),
        )
        sender = WebhookSender(jobs_db, settings)
        jobs.spawn("webhook sender", sender.run(), on_stop=sender.stop_at_safe_point)
        log.info("payloads in %s; ingest worker and retention job started", blobs.url)
        drain.hook_signals()
        gc_tuning.tune_for_serving()
        try:
            yield {"services": services}
        finally:
            await jobs.stop(settings.shutdown_grace)
            await blobs.close()  # after the jobs: the ingest worker writes until then
            await NOTIFIER.stop()
            await hub.stop()
            await pool.close()
            await probe_pool.close()
            del embedded  # pgserver stops it when the last handle goes

    routes = [
        # every method reaches the view, which answers a JSON 405 with Allow for the others
        Route("/graphql", graphql),
        WebSocketRoute("/graphql", graphql),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics_endpoint),
        *rest.routes,
    ]
    app = App(
        # the same RequestContext, DrainWebSockets and BodyLimit as the full stack below
        RequestContext(DrainWebSockets(graphql, drain=drain)),
        RequestContext(BodyLimit(TaskrouteErrors(graphql), limit=settings.max_body_bytes)),
        routes=routes,
        lifespan=lifespan,
        exception_handlers={TaskrouteError: _taskroute_error},
    )
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(DrainWebSockets, drain=drain)
    app.add_middleware(RequestContext)  # outermost: ids and access logs cover every response
    return app
