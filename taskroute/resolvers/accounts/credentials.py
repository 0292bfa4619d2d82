"""Bearer tokens: generated with `secrets`, stored as SHA-256, resolved to a Viewer."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import Forbidden, NotFound, Unauthenticated

Role = Literal["admin", "customer", "expert"]


class CustomerScope(UUID):
    """A customer id (what `customer_scope()` returns) that may carry the one project a
    project-limited token is confined to; `get_project` refuses every other project."""

    project_id: UUID | None

    def __init__(self, customer_id: UUID, project_id: UUID | None) -> None:
        super().__init__(int=customer_id.int)
        object.__setattr__(self, "project_id", project_id)


def project_allowed(customer_scope: UUID | None, project_id: UUID) -> bool:
    """False when `customer_scope` comes from a token limited to another project."""
    limit = getattr(customer_scope, "project_id", None)
    return limit is None or limit == project_id


@dataclass(frozen=True)
class Viewer:
    role: Role
    customer_id: UUID | None = None
    expert_id: UUID | None = None
    # None: the configured admin token (held in memory, not a stored credential)
    credential_id: UUID | None = None
    # scoped tokens: reads only; a customer token limited to one project
    read_only: bool = False
    project_id: UUID | None = None
    expires_at: datetime | None = None

    @classmethod
    def of(cls, row: Any) -> Viewer:
        return cls(
            row["role"],
            row["customer_id"],
            row["expert_id"],
            row["id"],
            row["read_only"],
            row["project_id"],
            row["expires_at"],
        )

    def expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or datetime.now(UTC))

    @property
    def actor(self) -> str:
        """Who this is, in the admin audit."""
        if self.credential_id is None:
            return "admin-token"
        return f"credential:{self.credential_id}"

    def require_admin(self) -> None:
        if self.role != "admin":
            raise NotFound("no such operation for this credential")

    def require_customer(self) -> UUID:
        """The customer, for what acts on the whole account (create a project, list every
        project's lines): refused to a token limited to one project."""
        # Answer as not found, never as forbidden-with-details.
        if self.role != "customer" or self.customer_id is None:
            raise NotFound("only customers can do this")
        if self.project_id is not None:
            raise Forbidden("this token is limited to one project", project_id=str(self.project_id))
        return self.customer_id

    def require_expert(self) -> UUID:
        if self.role != "expert" or self.expert_id is None:
            raise NotFound("only experts can do this")
        return self.expert_id

    def require_write(self) -> None:
        if self.read_only:
            raise Forbidden("this token is read-only")

    def customer_scope(self) -> UUID | None:
        """The customer whose projects this viewer may see; None means all (admin)."""
        if self.role == "admin":
            return None
        if self.role != "customer" or self.customer_id is None:
            raise NotFound("only customers can do this")
        if self.project_id is not None:
            return CustomerScope(self.customer_id, self.project_id)
        return self.customer_id


def new_token(prefix: str) -> str:
    return f"tr_{prefix}_{secrets.token_urlsafe(32)}"


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def parse_bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("Authorization must be 'Bearer <token>'")
    return token.strip()


async def load_viewer(db: Database, token_hash: bytes) -> Viewer | None:
    """The stored credential's viewer (None: unknown, revoked, expired, or a disabled expert's).
    Records its last use when that is over a minute old."""
    row = await db.fetchrow(Q["credential_lookup"], token_hash)
    return None if row is None else Viewer.of(row)


def parse_id(raw: str, what: str = "object") -> UUID:
    """Ids are UUIDs; anything else cannot exist, so it is not found (not a crash)."""
    try:
        return UUID(str(raw))
    except ValueError as exc:
        raise NotFound(f"no such {what}") from exc
