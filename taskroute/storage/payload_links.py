"""Signed payload links: HMAC-SHA256 over the assignment id and the expiry.

The lifespan builds one `PayloadUrls` per process from the secret every process shares
(resolvers/payloads.py `load_secret`) and keeps it in `Services.payload_urls`; the claim signs
with it and the payload endpoint checks with it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
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
        if not exp or not sig or not exp.isdigit():
            raise NotFound("no such payload link")
        if not hmac.compare_digest(sig, self._sig(assignment_id, int(exp))):
            raise NotFound("no such payload link")
        if int(exp) < time.time():
            raise LinkExpired("this payload link expired; claim again for a fresh one")
