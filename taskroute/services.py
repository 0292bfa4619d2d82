"""What the app's lifespan builds once and every request shares (the pool, settings, caches).

Its own module, below every layer that reads it: GraphQL's context, REST handlers, the domain's
batch functions and the health and metrics endpoints all take it without importing upward.
Every collaborator is a typed field; None where this process runs without it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from taskroute.blobs import BlobStore
from taskroute.config import Settings
from taskroute.credential_cache import CredentialCache
from taskroute.db.pool import Database
from taskroute.drain import Drain
from taskroute.payload_links import PayloadUrls
from taskroute.realtime.budget import SubscriptionBudget
from taskroute.realtime.hub import Hub
from taskroute.realtime.shared import SharedEvaluations

# True when ready; /readyz runs every check of `Services.readiness`
ReadinessCheck = Callable[[], Awaitable[bool]]


def _no_ingest_worker() -> None:
    """Without a worker in this process a queued batch waits for one elsewhere."""


@dataclass
class Services:
    """What the app's lifespan builds once and every request shares."""

    db: Database
    settings: Settings
    # token hash -> viewer (None: every request looks its token up in the database)
    credentials: CredentialCache | None = None
    subscriptions: SubscriptionBudget | None = None
    # the LISTEN connection and its subscribers (taskAvailable, progress, forecasts)
    hub: Hub | None = None
    # where payloads live (folder or S3), and the signer of links to the large ones
    blobs: BlobStore | None = None
    payload_urls: PayloadUrls | None = None
    # tells this process's ingest worker a batch was queued (it also polls)
    wake_ingest: Callable[[], None] = _no_ingest_worker
    # SIGTERM handling: WebSockets closed with 1001, jobs stopped, readiness off
    drain: Drain | None = None
    # name -> check, besides the database's own (the listener, the drain)
    readiness: dict[str, ReadinessCheck] = field(default_factory=dict)
    # forecastUpdated subscribers of one project share one evaluation per change
    forecasts: SharedEvaluations = field(default_factory=SharedEvaluations)
