"""Named SQL blocks, parsed once from `queries/*.sql`, and the splicing that shares rules.

Each block starts with a header line and runs until the next header:

- `-- name: block_name`: a statement the code runs as `Q["block_name"]`;
- `-- fragment: block_name`: a piece of SQL that is never run alone (a predicate, a row
  source) and exists to be spliced into statements, so a rule is written once.

The comment lines under a header document the block and its `$n` parameters.

Splicing: `{{ block_name(a, b) }}` anywhere in a block (or in `functions/*.sql`) is replaced
by that block's SQL with `$1` -> `a`, `$2` -> `b` (all at once; a trailing `;` and the
block's `--` comments dropped); `{{ block_name }}` splices it without substitutions. The
result is plain SQL, so the planner sees each statement whole and can match its predicates
to the partial indexes. Arguments are simple tokens (aliases, `$n`, names), never containing
commas or parentheses. Splices inside `--` comments are left alone.
"""

from __future__ import annotations

import re
from pathlib import Path

_HEADER = re.compile(r"^-- (name|fragment): (\w+)\s*$", re.MULTILINE)
_SPLICE = re.compile(r"\{\{\s*(\w+)\s*(?:\(([^()]*)\))?\s*\}\}")
_PARAM = re.compile(r"\$(\d+)")
_MAX_DEPTH = 5  # fragments may splice fragments; a cycle is an error, not a hang


def _parse(folder: Path) -> tuple[dict[str, str], set[str]]:
    blocks: dict[str, str] = {}
    fragments: set[str] = set()
    for path in sorted(folder.glob("*.sql")):
        parts = _HEADER.split(path.read_text())
        for kind, name, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
            if name in blocks:
                raise ValueError(f"query {name!r} defined twice (again in {path.name})")
            blocks[name] = body.strip()
            if kind == "fragment":
                fragments.add(name)
    return blocks, fragments


def splice(sql: str, blocks: dict[str, str], depth: int = 0) -> str:
    """Replace every `{{ name(args) }}` in `sql` by the named block, arguments substituted."""
    if depth > _MAX_DEPTH:
        raise ValueError("splices nest too deep (a fragment splices itself?)")

    def one(match: re.Match[str]) -> str:
        name, raw_args = match.group(1), match.group(2)
        if name not in blocks:
            raise ValueError(f"splice of unknown block {name!r}")
        body = _code(splice(blocks[name], blocks, depth + 1)).rstrip().removesuffix(";")
        if raw_args is None:
            return body
        args = [a.strip() for a in raw_args.split(",")]

        def param(m: re.Match[str]) -> str:
            n = int(m.group(1))
            if n > len(args):
                raise ValueError(f"splice of {name!r} gives no argument for ${n}")
            return args[n - 1]

        return _PARAM.sub(param, body)

    # Only code is spliced: a `--` comment may mention the syntax.
    lines = []
    for line in sql.split("\n"):
        code, dashes, comment = line.partition("--")
        lines.append(_SPLICE.sub(one, code) + dashes + comment)
    return "\n".join(lines)


def _code(sql: str) -> str:
    """`sql` without its `--` comments: a spliced block's documentation stays in its file (and
    its `$n` are never substituted inside prose)."""
    lines = []
    for line in sql.split("\n"):
        code = line.partition("--")[0].rstrip()
        if code or not line.strip():
            lines.append(code)
    return "\n".join(lines).strip()


def load(folder: Path) -> dict[str, str]:
    """Runnable statements by name (fragments are spliced into them, not listed)."""
    blocks, fragments = _parse(folder)
    return {name: splice(sql, blocks) for name, sql in blocks.items() if name not in fragments}


def load_blocks(folder: Path) -> dict[str, str]:
    """Every block, fragments included, unspliced (what `splice` draws from)."""
    return _parse(folder)[0]


QUERIES = Path(__file__).parent / "queries"
Q: dict[str, str] = load(QUERIES)
BLOCKS: dict[str, str] = load_blocks(QUERIES)
