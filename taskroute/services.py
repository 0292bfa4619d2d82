"""What the app's lifespan builds once and every request shares (the pool, settings, caches).

Its own module, below every layer that reads it: GraphQL's context, REST handlers, the domain's
batch functions and the health and metrics endpoints all take it without importing upward.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from taskroute.config import Settings
from taskroute.credential_cache import CredentialCache
from taskroute.db.pool import Database
from taskroute.realtime.budget import SubscriptionBudget


@dataclass
class Services:
    """What the app's lifespan builds once and every request shares."""

    db: Database
    settings: Settings
    extras: dict[str, Any] = field(default_factory=dict)
    # token hash -> viewer (None: every request looks its token up in the database)
    credentials: CredentialCache | None = None
    subscriptions: SubscriptionBudget | None = None
