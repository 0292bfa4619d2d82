"""Where a webhook may go. A customer names the URL, so the server refuses to reach anything
but public addresses (no loopback, private, link-local, multicast, reserved or other
non-global range: the server's own network is not the customer's to probe), over https. The
host is checked when the endpoint is saved and resolved again at every delivery (DNS can
change), and the delivery connects to the address it checked, not to a second lookup's.
`TASKROUTE_WEBHOOK_ALLOW_PRIVATE` lifts both rules (tests, a receiver beside the server).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from taskroute.errors import BadInput

URL_MAX = 2048
RESOLVE_TIMEOUT = 5.0

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddressRefused(Exception):
    """A delivery's host resolves to no address it may reach (or not at all)."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # as written in the URL (for Host and TLS's server name)
    port: int
    path: str  # path and query, as written


def parse(url: object, allow_private: bool, field: str = "url") -> Target:
    if not isinstance(url, str) or not url or len(url) > URL_MAX:
        raise BadInput(f"{field} must be a URL of at most {URL_MAX} characters", field=field)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BadInput(f"{field} is not a valid URL", field=field) from exc
    schemes = ("https", "http") if allow_private else ("https",)
    if parts.scheme not in schemes:
        raise BadInput(f"{field} must be an https URL", field=field)
    if not parts.hostname:
        raise BadInput(f"{field} has no host", field=field)
    if parts.username is not None or parts.password is not None:
        raise BadInput(f"{field} must not carry credentials", field=field)
    if parts.fragment:
        raise BadInput(f"{field} must not have a fragment", field=field)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    default = 443 if parts.scheme == "https" else 80
    return Target(parts.scheme, parts.hostname, port or default, path)


def public(ip: IPAddress) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not (
        ip.is_multicast or ip.is_reserved or ip.is_loopback or ip.is_link_local or ip.is_private
    )


async def resolve(target: Target) -> list[IPAddress]:
    """Every address the host has now (an IP literal is its own)."""
    try:
        return [ipaddress.ip_address(target.host)]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(
            loop.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT
        )
    except (OSError, TimeoutError) as exc:
        raise AddressRefused(f"{target.host} does not resolve") from exc
    found: list[IPAddress] = []
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if ip not in found:
            found.append(ip)
    if not found:
        raise AddressRefused(f"{target.host} does not resolve")
    return found


async def pick(target: Target, allow_private: bool) -> IPAddress:
    """The address to connect to: the host's first, refused unless every one is public (a
    name with one private address among public ones is refused, not picked around)."""
    found = await resolve(target)
    if not allow_private:
        refused = [ip for ip in found if not public(ip)]
        if refused:
            raise AddressRefused(f"{target.host} resolves to a non-public address ({refused[0]})")
    return found[0]


async def check(url: object, allow_private: bool) -> str:
    """The URL, if an endpoint may be saved with it (BAD_INPUT naming `url` otherwise)."""
    target = parse(url, allow_private)
    try:
        await pick(target, allow_private)
    except AddressRefused as exc:
        raise BadInput(f"url refused: {exc}", field="url") from exc
    assert isinstance(url, str)
    return url
