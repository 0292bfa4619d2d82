"""Per-request context: shared services plus the (lazily authenticated) viewer."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from taskroute.config import Settings
from taskroute.db.pool import Database
from taskroute.resolvers.accounts.authentication import authenticate
from taskroute.resolvers.accounts.credentials import Viewer
from taskroute.resolvers.services import Services


@dataclass
class Context:
    services: Services
    authorization: str | None
    request: Any = None
    response: Any = None
    # WebSocket `connection_init` payload (strawberry sets it; read in `on_ws_connect`)
    connection_params: Any = None
    # a mutation is running (set by schema.accounts.ScopedTokens): read-only tokens refused
    writing: bool = False
    _viewer: Viewer | None = None

    @property
    def db(self) -> Database:
        return self.services.db

    @property
    def settings(self) -> Settings:
        return self.services.settings

    async def viewer(self) -> Viewer:
        if self._viewer is None and self.request is not None:
            # HTTP requests were authenticated before parsing (graphql_http.py)
            self._viewer = getattr(self.request.state, "viewer", None)
        if self._viewer is None:
            self._viewer = await authenticate(
                self.db,
                self.settings.admin_token,
                self.authorization,
                cache=self.services.credentials,
            )
        if self.writing:
            self._viewer.require_write()
        return self._viewer

    def subscription_slot(self, viewer: Viewer) -> contextlib.AbstractContextManager[None]:
        """Hold one of the socket's, the credential's and the account's subscriptions while a
        subscription runs (TOO_MANY_SUBSCRIPTIONS beyond the budget)."""
        budget = self.services.subscriptions
        if budget is None:
            return contextlib.nullcontext()
        return budget.slot(self.request, _credential(viewer), _account(viewer))

    def take_subscription(self, viewer: Viewer) -> object | None:
        """`subscription_slot` without a context manager: hand what this returns to
        `give_back_subscription` when the subscription ends (None: there is no budget)."""
        budget = self.services.subscriptions
        if budget is None:
            return None
        taken = (_credential(viewer), _account(viewer))
        budget.take(self.request, *taken)
        return taken

    def give_back_subscription(self, taken: object | None) -> None:
        budget = self.services.subscriptions
        if budget is not None and isinstance(taken, tuple):
            budget.give_back(self.request, *taken)


def _credential(viewer: Viewer) -> object:
    return viewer.credential_id or viewer.role  # the admin token has no stored id


def _account(viewer: Viewer) -> object:
    """Whose tokens these are: the customer's or the expert's (admins share one account)."""
    if viewer.customer_id is not None:
        return ("customer", viewer.customer_id)
    if viewer.expert_id is not None:
        return ("expert", viewer.expert_id)
    return viewer.role
