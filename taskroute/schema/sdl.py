"""The schema's SDL, as published in `schema.graphql` at the repository root.

Regenerate after changing the API: `python -m taskroute schema -o schema.graphql`
(tests/api/test_checked_in_sdl.py fails while the checked-in file differs from the live schema).
"""

from __future__ import annotations

from taskroute.schema.build import build_schema


def export_sdl() -> str:
    return build_schema(introspection=True).as_str().rstrip("\n") + "\n"
