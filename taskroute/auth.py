"""Bearer tokens: generated with `secrets`, stored as SHA-256, resolved to a Viewer."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal
from uuid import UUID

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import NotFound, Unauthenticated

if TYPE_CHECKING:
    from taskroute.credential_cache import CredentialCache

Role = Literal["admin", "customer", "expert"]


@dataclass(frozen=True)
class Viewer:
    role: Role
    customer_id: UUID | None = None
    expert_id: UUID | None = None

    def require_admin(self) -> None:
        if self.role != "admin":
            raise NotFound("no such operation for this credential")

    def require_customer(self) -> UUID:
        # Answer as not found, never as forbidden-with-details.
        if self.role != "customer" or self.customer_id is None:
            raise NotFound("only customers can do this")
        return self.customer_id

    def require_expert(self) -> UUID:
        if self.role != "expert" or self.expert_id is None:
            raise NotFound("only experts can do this")
        return self.expert_id

    def customer_scope(self) -> UUID | None:
        """The customer whose projects this viewer may see; None means all (admin)."""
        if self.role == "admin":
            return None
        return self.require_customer()


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


async def authenticate(
    db: Database,
    admin_token: str,
    header: str | None,
    *,
    cache: CredentialCache | None = None,
) -> Viewer:
    """The viewer of an `Authorization: Bearer` header. With `cache`, a stored token is looked
    up in the database only when the cache does not hold it (or cannot be trusted right now)."""
    token = parse_bearer(header)
    if token is None:
        raise Unauthenticated("missing Authorization: Bearer <token>")
    # Constant-time comparison for the one token held in memory; stored tokens are found by
    # their hash, so timing reveals nothing about them.
    if admin_token and hmac.compare_digest(token.encode(), admin_token.encode()):
        return Viewer("admin")
    token_hash = hash_token(token)

    async def load() -> Viewer | None:
        row = await db.fetchrow(Q["credential_lookup"], token_hash)
        return None if row is None else Viewer(row["role"], row["customer_id"], row["expert_id"])

    viewer = await (load() if cache is None else cache.lookup(token_hash, load))
    if viewer is None:
        raise Unauthenticated("unknown or revoked token")
    return viewer


def parse_id(raw: str, what: str = "object") -> UUID:
    """Ids are UUIDs; anything else cannot exist, so it is not found (not a crash)."""
    try:
        return UUID(str(raw))
    except ValueError as exc:
        raise NotFound(f"no such {what}") from exc
