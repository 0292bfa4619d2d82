"""One way to page every listing: `first` rows (1..MAX_FIRST) after an opaque cursor.

Each listing's query takes its cursor's keys and, as its last parameter, a limit; `read` asks
for one row more than `first`, so `has_next` is exact, also when the last page is exactly full.
Cursors are `cursors.encode(kind, body)` (base64 of `kind:body`, the kind naming the listing),
the same in GraphQL's connections and in REST's `page_info`; `cursors.decode*` refuses anything
else as BAD_INPUT naming `after`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import asyncpg

from taskroute.db.pool import Reader
from taskroute.db.queries import Q
from taskroute.resolvers import cursors

# The largest page of any listing (the result feeds, read by scripts, always allowed 1000).
MAX_FIRST = 1000

R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[R]):
    rows: list[R]
    cursors: list[str]  # one per row: pass as `after` to continue after that row
    has_next: bool  # another page follows

    @property
    def end_cursor(self) -> str | None:
        return self.cursors[-1] if self.cursors else None

    def map(self, shape: Callable[[R], T]) -> Page[T]:
        return Page([shape(r) for r in self.rows], self.cursors, self.has_next)

    def pairs(self) -> Iterator[tuple[str, R]]:
        return zip(self.cursors, self.rows, strict=True)


def size(first: Any, field: str = "first") -> int:
    """A page size the client sent (an int, or digits in a query parameter)."""
    return cursors.limit(first, field, 1, MAX_FIRST)


def cut(rows: Sequence[R], first: int, cursor: Callable[[R], str]) -> Page[R]:
    """The page of `rows` read with a limit of `first + 1`."""
    shown = list(rows[:first])
    return Page(shown, [cursor(r) for r in shown], len(rows) > first)


async def read(
    db: Reader, query: str, *args: Any, first: int, cursor: Callable[[asyncpg.Record], str]
) -> Page[asyncpg.Record]:
    """Run the named `query` with `args` and the limit `first + 1`; the page it makes."""
    return cut(await db.fetch(Q[query], *args, first + 1), first, cursor)
