"""Relay page info, built one way for every connection (cursors: resolvers/cursors.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strawberry.relay import PageInfo


def page_info(edges: Sequence[Any], has_next: bool, after: str | None) -> PageInfo:
    """The PageInfo of one forward page (`first` + `after`) of `edges`."""
    return PageInfo(
        has_next_page=has_next,
        has_previous_page=after is not None,
        start_cursor=edges[0].cursor if edges else None,
        end_cursor=edges[-1].cursor if edges else None,
    )
