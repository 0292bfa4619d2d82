"""Authentication: the viewer of a bearer token, through the credential cache when there is one.

Above both `credentials` (tokens, `Viewer`) and `credential_cache` (which holds viewers), so
neither of those imports the other's user.
"""

from __future__ import annotations

import hmac

from taskroute.db.pool import Database
from taskroute.errors import Unauthenticated
from taskroute.resolvers.accounts.credential_cache import CredentialCache
from taskroute.resolvers.accounts.credentials import Viewer, hash_token, load_viewer, parse_bearer


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

    viewer = await (
        load_viewer(db, token_hash)
        if cache is None
        else cache.lookup(token_hash, lambda: load_viewer(db, token_hash))
    )
    if viewer is None or viewer.expired():
        raise Unauthenticated("unknown, revoked or expired token")
    if cache is not None:
        cache.usage.note(db, viewer.credential_id)
    return viewer
