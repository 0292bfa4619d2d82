"""What every request shares (the pool, settings, caches), as the domain and the API read it.

The server's lifespan builds it (`taskroute.server.services.ServerServices`, which adds what
only the server reads); it is declared here so GraphQL's context, REST handlers and the
domain's batch functions take it without importing upward. Every collaborator is a typed
field; None where this process runs without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from taskroute.config import Settings
from taskroute.db.pool import Database
from taskroute.realtime.budget import SubscriptionBudget
from taskroute.realtime.hub import Hub
from taskroute.realtime.shared import SharedEvaluations
from taskroute.resolvers.accounts.credential_cache import CredentialCache
from taskroute.resolvers.claims import Claim
from taskroute.resolvers.held_claims import HeldClaims
from taskroute.storage.blobs import BlobStore
from taskroute.storage.payload_links import PayloadUrls


def _no_ingest_worker() -> None:
    """Without a worker in this process a queued batch waits for one elsewhere."""


@dataclass
class Services:
    """What the server's lifespan builds once and every request shares."""

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
    # forecastUpdated subscribers of one project share one evaluation per change
    forecasts: SharedEvaluations = field(default_factory=SharedEvaluations)
    # the claims this process handed out, answered when the gate refuses and the probe is slow
    held_claims: HeldClaims[Claim] | None = None
