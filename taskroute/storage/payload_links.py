"""Signed payload links: HMAC-SHA256 over the assignment id (or, for a customer's export, the
item id) and the expiry.

The lifespan builds one `PayloadUrls` per process from the secret every process shares
(resolvers/payloads.py `load_secret`) and keeps it in `Services.payload_urls`; the claim signs
with it and the payload endpoint checks with it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Callable
from uuid import UUID

from taskroute.errors import LinkExpired, NotFound


class PayloadUrls:
    """Signs and checks payload URLs: HMAC-SHA256 over the assignment id and the expiry."""

    def __init__(self, secret: bytes, ttl: int) -> None:
        self._secret = secret
        self.ttl = ttl

    def _sig(self, assignment_id: UUID, exp: int) -> str:
        mac = hmac.new(self._secret, f"{assignment_id}.{exp}".encode(), hashlib.sha256)
        return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()

    def url(self, assignment_id: UUID, now: float | None = None) -> str:
        exp = int(now if now is not None else time.time()) + self.ttl
        return f"/v1/payloads/{assignment_id}?exp={exp}&sig={self._sig(assignment_id, exp)}"

    def check(self, assignment_id: UUID, exp: str | None, sig: str | None) -> None:
        """NotFound for a forged or altered URL; LinkExpired for a genuine one past expiry."""
        _check(sig, exp, self._sig, assignment_id, "claim again for a fresh one")

    # An item link signs "item:<id>", so no assignment link's signature is also an item's.
    def _item_sig(self, item_id: UUID, exp: int) -> str:
        mac = hmac.new(self._secret, f"item:{item_id}.{exp}".encode(), hashlib.sha256)
        return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()

    def item_url(self, item_id: UUID, ttl: int, now: float | None = None) -> str:
        """A customer's link to one item's payload (exports), living `ttl` seconds."""
        exp = int(now if now is not None else time.time()) + ttl
        return f"/v1/items/{item_id}/payload?exp={exp}&sig={self._item_sig(item_id, exp)}"

    def check_item(self, item_id: UUID, exp: str | None, sig: str | None) -> None:
        _check(sig, exp, self._item_sig, item_id, "export again for fresh links")

    def derive(self, purpose: str) -> bytes:
        """A key for another purpose (expert pseudonyms), derived from the same secret: every
        process computes the same one, and it reveals nothing of the signing key."""
        return hmac.new(self._secret, f"derive:{purpose}".encode(), hashlib.sha256).digest()


def _check(
    sig: str | None, exp: str | None, sign: Callable[[UUID, int], str], rid: UUID, again: str
) -> None:
    if not exp or not sig or not exp.isascii() or not exp.isdigit() or len(exp) > 12:
        raise NotFound("no such payload link")
    if not hmac.compare_digest(sig, sign(rid, int(exp))):
        raise NotFound("no such payload link")
    if int(exp) < time.time():
        raise LinkExpired(f"this payload link expired; {again}")
