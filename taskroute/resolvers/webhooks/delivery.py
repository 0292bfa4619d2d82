"""One delivery attempt: the body, the signature, the POST to a checked address, the outcome.

The body is the Standard Webhooks shape, `{"type", "timestamp", "data"}`; an item result's
data carries `cursor`, its position in the change feed (`itemResultChanges`' cursor). The
request goes to the address `addresses.pick` checked (Host and the TLS server name stay the
URL's host), never follows a redirect, reads at most RESPONSE_CAP bytes of the answer, and is
bounded in time; any 2xx is delivered, anything else is a failure retried later.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import orjson

from taskroute.config import Settings
from taskroute.resolvers import cursors
from taskroute.resolvers.quality.result_feed import CHANGE

from . import addresses, signing

RESPONSE_CAP = 1024  # bytes of an answer kept for the delivery log
ERROR_MAX = 300
USER_AGENT = "taskroute-webhooks"


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    status: int | None
    error: str | None
    latency_ms: int


def body(event_type: str, at: datetime, data: dict[str, Any], change_seq: int | None) -> bytes:
    if change_seq is not None:
        data = {**data, "cursor": cursors.encode(CHANGE, str(change_seq))}
        data.pop("change_seq", None)
    return orjson.dumps({"type": event_type, "timestamp": at.isoformat(), "data": data})


def backoff(attempts: int, settings: Settings) -> float:
    """Seconds to the next attempt after `attempts` failed ones: doubling from the base up to
    the cap, then a random share of it (half to all), so a receiver back from an outage is
    not hit by every delivery at the same instant."""
    doubled = settings.webhook_retry_base * 2.0 ** min(attempts - 1, 30)
    delay: float = min(settings.webhook_retry_max, doubled)
    return delay * random.uniform(0.5, 1.0)


def _url(target: addresses.Target, ip: addresses.IPAddress) -> str:
    host = f"[{ip}]" if ip.version == 6 else str(ip)
    return f"{target.scheme}://{host}:{target.port}{target.path}"


def _host_header(target: addresses.Target) -> str:
    default = 443 if target.scheme == "https" else 80
    host = f"[{target.host}]" if ":" in target.host else target.host
    return host if target.port == default else f"{host}:{target.port}"


async def attempt(
    client: httpx.AsyncClient,
    settings: Settings,
    url: str,
    secrets_: list[str],
    msg_id: str,
    payload: bytes,
) -> Outcome:
    started = time.monotonic()

    def done(delivered: bool, status: int | None, error: str | None) -> Outcome:
        ms = int((time.monotonic() - started) * 1000)
        return Outcome(delivered, status, error[:ERROR_MAX] if error else None, ms)

    try:
        target = addresses.parse(url, settings.webhook_allow_private)
        ip = await addresses.pick(target, settings.webhook_allow_private)
    except addresses.AddressRefused as exc:
        return done(False, None, str(exc))
    except Exception as exc:  # a URL that no longer passes the rules (BadInput)
        return done(False, None, f"url refused: {exc}")
    headers = {
        **signing.headers(secrets_, msg_id, int(time.time()), payload),
        "content-type": "application/json",
        "host": _host_header(target),
        "user-agent": USER_AGENT,
    }
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    request = client.build_request(
        "POST", _url(target, ip), content=payload, headers=headers, extensions=extensions
    )
    try:
        # httpx's timeouts are per phase: a receiver trickling bytes is cut off here
        async with asyncio.timeout(settings.webhook_connect_timeout + settings.webhook_timeout):
            response = await client.send(request, stream=True, follow_redirects=False)
            try:
                snippet = b""
                async for chunk in response.aiter_raw():
                    snippet += chunk
                    if len(snippet) >= RESPONSE_CAP:
                        break
            finally:
                await response.aclose()
    except (httpx.TimeoutException, TimeoutError):
        return done(False, None, "timed out")
    except httpx.HTTPError as exc:
        return done(False, None, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    if 200 <= response.status_code < 300:
        return done(True, response.status_code, None)
    text = snippet[:RESPONSE_CAP].decode("utf-8", "replace").strip()
    return done(False, response.status_code, f"HTTP {response.status_code}: {text}")


def new_client(settings: Settings, keep_alive: bool) -> httpx.AsyncClient:
    """A sender's client: no proxies from the environment (the address is the checked one),
    no redirects, bounded connections and time. Connections are pooled by address, so TLS
    ones are not kept: one verified for one host name must not carry another's request."""
    timeout = httpx.Timeout(settings.webhook_timeout, connect=settings.webhook_connect_timeout)
    limits = httpx.Limits(
        max_connections=max(1, settings.webhook_in_flight),
        max_keepalive_connections=16 if keep_alive else 0,
    )
    return httpx.AsyncClient(
        timeout=timeout, limits=limits, trust_env=False, follow_redirects=False
    )
