"""A project's remaining work over time (the dashboard's burn-down).

History is bucketed on fixed boundaries (multiples of `bucket_seconds` since the epoch), so a
cursor names a bucket and pages neither skip nor repeat one. Without an explicit size the
smallest step of `STEPS` that fits the whole history into `first` points is chosen; a
project older than `first` weeks pages on. Each point is the remaining work at the end of its
bucket (the last one: at completion, or now), with the slots added and finished in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

from taskroute.db.pool import Reader
from taskroute.db.queries import Q
from taskroute.errors import BadInput, NotFound
from taskroute.resolvers import cursors, paging

STEPS = (60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400)
_KIND = "remaining"


@dataclass(frozen=True)
class Point:
    bucket: int
    at: datetime
    remaining: int
    added: int
    finished: int

    def cursor(self, step: int) -> str:
        return cursors.encode(_KIND, f"{step}|{self.bucket}")


@dataclass(frozen=True)
class History:
    bucket_seconds: int
    page: paging.Page[Point]


def _bucket(t: datetime, step: int) -> int:
    return int(t.timestamp()) // step


def _parse_after(after: str, step: int | None) -> tuple[int, int]:
    raw_step, sep, raw_bucket = cursors.decode(after, _KIND).partition("|")
    if not sep:
        raise BadInput("after is not a cursor from this listing", field="after")
    got = cursors.seq(raw_step)
    if not STEPS[0] <= got <= STEPS[-1]:  # not one we made (times out of range follow)
        raise BadInput("after is not a cursor from this listing", field="after")
    if step is not None and got != step:
        raise BadInput("after belongs to a history with another bucketSeconds", field="after")
    return got, cursors.seq(raw_bucket)


async def remaining_history(
    db: Reader, project_id: UUID, first: int, after: str | None, bucket_seconds: int | None
) -> History:
    first = paging.size(first)
    step = None
    if bucket_seconds is not None:
        step = cursors.limit(bucket_seconds, "bucketSeconds", STEPS[0], STEPS[-1])
    after_bucket = None
    if after is not None:
        step, after_bucket = _parse_after(after, step)
    span = await db.fetchrow(Q["project_history_span"], project_id)
    if span is None:
        raise NotFound("no such project")
    since, until = span["since"], max(span["until"], span["since"])
    if step is None:
        step = next((s for s in STEPS if _bucket(until, s) - _bucket(since, s) < first), STEPS[-1])
    start = _bucket(since, step)
    if after_bucket is not None:
        start = max(start, after_bucket + 1)
    last = _bucket(until, step)
    end = min(last, start + first - 1)
    if start > end:
        return History(step, paging.Page([], [], False))
    rows = await db.fetch(Q["project_remaining_history"], project_id, step, start, end)
    points = [
        Point(
            bucket=r["bucket"],
            # the end of the bucket; the current one ends at completion or now
            at=min(datetime.fromtimestamp((r["bucket"] + 1) * step, UTC), until),
            remaining=r["remaining"],
            added=r["added"],
            finished=r["finished"],
        )
        for r in rows
    ]
    return History(step, paging.Page(points, [p.cursor(step) for p in points], end < last))
