"""Relay page info, built one way for every connection (pages: resolvers/paging.py)."""

from __future__ import annotations

from typing import Any

from strawberry.relay import PageInfo

from taskroute.resolvers.paging import Page


def page_info(page: Page[Any], after: str | None) -> PageInfo:
    """The PageInfo of one forward page (`first` + `after`)."""
    return PageInfo(
        has_next_page=page.has_next,
        has_previous_page=after is not None,
        start_cursor=page.cursors[0] if page.cursors else None,
        end_cursor=page.end_cursor,
    )
