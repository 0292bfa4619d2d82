"""An admin command's result as plain-text tables, for a person at a terminal."""

from __future__ import annotations

import json
from typing import Any


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | dict):
        return json.dumps(value, default=str)
    text = str(value)
    # one row per line: a newline in a name or reason would break the columns
    return text.replace("\n", " ")


def _grid(rows: list[dict[str, Any]]) -> str:
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def render_table(result: Any) -> str:
    """A list of rows as columns; one object as `field  value` lines, its lists of rows (an
    expert's skills) and nested objects (the current claim) as tables below it."""
    if isinstance(result, list):
        if not result:
            return "(none)"
        return _grid([r if isinstance(r, dict) else {"value": r} for r in result])
    if not isinstance(result, dict):
        return _cell(result)
    width = max((len(k) for k in result), default=0)
    lines: list[str] = []
    sections: list[str] = []
    for key, value in result.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            sections.append(f"{key}:\n{_grid(value)}")
        elif isinstance(value, dict):
            sections.append(f"{key}:\n{_grid([value])}")
        else:
            lines.append(f"{key.ljust(width)}  {_cell(value)}")
    return "\n\n".join(["\n".join(lines), *sections]) if sections else "\n".join(lines)
