"""Parsing what clients send back to page and filter: sequence cursors, opaque cursors, limits,
instants. One place, so every listing refuses bad input the same way (BAD_INPUT naming the
field) instead of letting it reach Python's `int()`/`datetime` or the driver and come back as
an INTERNAL error.

The traps this guards against: `str.isdigit()` accepts "²" and other non-ASCII digits that
`int()` refuses; numbers past int64 overflow in the driver; dates at the edges of the calendar
with an offset (year 1 at +14:00) cannot be turned into UTC; base64 that is not base64, or
decodes to bytes that are not UTF-8.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from taskroute.errors import BadInput

INT64_MAX = 2**63 - 1


def seq(raw: str, field: str = "after") -> int:
    """A non-negative int64 written in ASCII digits."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19 or int(raw) > INT64_MAX:
        raise BadInput(f"{field} must be a cursor returned by this listing", field=field)
    return int(raw)


def limit(raw: Any, field: str, lo: int, hi: int) -> int:
    """An integer in [lo, hi]; strings (query parameters) in ASCII digits."""
    if isinstance(raw, str):
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 19:
            raise BadInput(f"{field} must be an integer between {lo} and {hi}", field=field)
        raw = int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int) or not lo <= raw <= hi:
        raise BadInput(f"{field} must be an integer between {lo} and {hi}", field=field)
    return raw


def instant(value: datetime, field: str) -> datetime:
    """A time-zone-aware datetime that UTC (and so Postgres and the driver) can hold."""
    if value.tzinfo is None:
        raise BadInput(f"{field} must carry a time zone (e.g. Z or +00:00)", field=field)
    try:
        value.astimezone(UTC)
    except OverflowError as exc:
        raise BadInput(f"{field} is out of range", field=field) from exc
    return value


def encode(kind: str, body: str) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{body}".encode()).decode()


def decode(raw: str, kind: str, field: str = "after") -> str:
    """The body of an opaque cursor made by `encode(kind, ...)`; BAD_INPUT for anything else."""
    try:
        got, sep, body = base64.urlsafe_b64decode(raw.encode()).decode().partition(":")
    except (binascii.Error, ValueError, UnicodeError):
        got, sep, body = "", "", ""
    if got != kind or not sep:
        raise BadInput(f"{field} is not a cursor from this listing", field=field)
    return body


def decode_seq(raw: str, kind: str, field: str = "after") -> int:
    return seq(decode(raw, kind, field), field)


def decode_seq_or_raw(raw: str, kind: str, field: str = "after") -> int:
    """An opaque `kind` cursor, or the raw number a deprecated page shape handed out."""
    try:
        return decode_seq(raw, kind, field)
    except BadInput:
        return seq(raw, field)


def encode_keyset(kind: str, at: datetime, rid: UUID) -> str:
    return encode(kind, f"{at.isoformat()}|{rid}")


def decode_keyset(raw: str, kind: str, field: str = "after") -> tuple[datetime, UUID]:
    """(time, id) of a keyset cursor `kind:<iso time>|<uuid>`."""
    at, _, rid = decode(raw, kind, field).partition("|")
    try:
        return instant(datetime.fromisoformat(at), field), UUID(rid)
    except (ValueError, BadInput) as exc:
        raise BadInput(f"{field} is not a cursor from this listing", field=field) from exc


def decode_uuid(raw: str, kind: str, field: str = "after") -> UUID:
    try:
        return UUID(decode(raw, kind, field))
    except ValueError as exc:
        raise BadInput(f"{field} is not a cursor from this listing", field=field) from exc
