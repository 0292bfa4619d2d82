"""A WebSocket ends when its token stops authenticating (revoked, expired, or its expert
deactivated): the credential cache re-checks the token on every invalidation it hears."""

from __future__ import annotations

from starlette.websockets import WebSocket, WebSocketState

from taskroute.resolvers.accounts.credentials import Viewer, hash_token, load_viewer, parse_bearer

from .context import Context


def watch_websocket(context: Context, viewer: Viewer) -> None:
    """After `connection_init` authenticated: close this connection (4403) once its token is
    revoked, expires, or its expert is deactivated (see credential_cache.SocketWatch)."""
    cache = context.services.credentials
    ws = context.request
    if cache is None or viewer.credential_id is None or not isinstance(ws, WebSocket):
        return
    token = parse_bearer(context.authorization)
    if token is None:
        return
    token_hash = hash_token(token)
    db = context.db

    async def recheck() -> Viewer | None:
        return await load_viewer(db, token_hash)

    async def close(reason: str) -> None:
        await ws.close(code=4403, reason=reason)

    def is_open() -> bool:
        return (
            ws.client_state == WebSocketState.CONNECTED
            and ws.application_state == WebSocketState.CONNECTED
        )

    cache.sockets.watch(token_hash, viewer, recheck, close, is_open)
