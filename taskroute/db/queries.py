"""Named SQL blocks, parsed once from `queries/*.sql`.

Each block starts with a header line `-- name: block_name` followed by comment lines that
document it; the SQL runs until the next header. Code reads `Q["task_claim"]`.
"""

from __future__ import annotations

import re
from pathlib import Path

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def load(folder: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    for path in sorted(folder.glob("*.sql")):
        parts = _HEADER.split(path.read_text())
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in queries:
                raise ValueError(f"query {name!r} defined twice (again in {path.name})")
            queries[name] = body.strip()
    return queries


Q: dict[str, str] = load(Path(__file__).parent / "queries")
