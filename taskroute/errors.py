"""One root exception with a code. GraphQL maps it to `extensions.code`, REST to a status."""

from __future__ import annotations

from typing import Any


class TaskrouteError(Exception):
    code = "INTERNAL"
    http_status = 500

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    @property
    def extensions(self) -> dict[str, Any]:
        # graphql-core copies `original_error.extensions` into the GraphQL error.
        return {"code": self.code, **self.details}


class Unauthenticated(TaskrouteError):
    code = "UNAUTHENTICATED"
    http_status = 401


class Forbidden(TaskrouteError):
    code = "FORBIDDEN"
    http_status = 403


class NotFound(TaskrouteError):
    code = "NOT_FOUND"
    http_status = 404


class BadInput(TaskrouteError):
    code = "BAD_INPUT"
    http_status = 422


class LeaseExpired(TaskrouteError):
    code = "LEASE_EXPIRED"
    http_status = 409


class AlreadySubmitted(TaskrouteError):
    code = "ALREADY_SUBMITTED"
    http_status = 409


class Conflict(TaskrouteError):
    code = "CONFLICT"
    http_status = 409


class ProjectCanceled(TaskrouteError):
    code = "PROJECT_CANCELED"
    http_status = 409


class PayloadTooLarge(TaskrouteError):
    code = "PAYLOAD_TOO_LARGE"
    http_status = 413


class Unavailable(TaskrouteError):
    """The server could not serve this now: come back after `retry_after` seconds (the
    `Retry-After` header; `extensions.retryAfter` in GraphQL, for WebSocket clients too)."""

    code = "UNAVAILABLE"
    http_status = 503

    def __init__(self, message: str, retry_after: int = 1, **details: Any) -> None:
        super().__init__(message, **details)
        self.retry_after = max(1, retry_after)

    @property
    def extensions(self) -> dict[str, Any]:
        return {**super().extensions, "retryAfter": self.retry_after}


class AlreadyReversed(TaskrouteError):
    code = "ALREADY_REVERSED"
    http_status = 409


class LinkExpired(TaskrouteError):
    """A signed, short-lived link (e.g. a payload URL) is past its expiry: claim again."""

    code = "LINK_EXPIRED"
    http_status = 410


class PayloadDeleted(TaskrouteError):
    """The customer's payload was deleted: its project ended and the retention period ran
    out (docs/operations.md, payload retention). It is never coming back."""

    code = "PAYLOAD_DELETED"
    http_status = 410


class TooManySubscriptions(TaskrouteError):
    code = "TOO_MANY_SUBSCRIPTIONS"
    http_status = 429


class TooManyReleases(TaskrouteError):
    """The expert used this hour's releases: `resetsAt` says when the next one is allowed."""

    code = "TOO_MANY_RELEASES"
    http_status = 429
