"""Comparing answers: the key two answers are compared on, and Krippendorff's alpha."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from taskroute.resolvers.json_values import canonical_json


def answer_key(answer: Any, field: str | None) -> str | None:
    """What two answers are compared on; None when the answer lacks the compared field."""
    if field is None:
        return canonical_json(answer)
    if isinstance(answer, dict) and field in answer:
        return canonical_json(answer[field])
    return None


def krippendorff_alpha_nominal(units: list[list[str]]) -> float | None:
    """Krippendorff's alpha for nominal data; units with fewer than two values are skipped."""
    # weights are fractions (1 / (m - 1)), so float counts, not Counter's ints
    o: defaultdict[tuple[str, str], float] = defaultdict(float)
    for values in units:
        m = len(values)
        if m < 2:
            continue
        for i, a in enumerate(values):
            for j, b in enumerate(values):
                if i != j:
                    o[(a, b)] += 1 / (m - 1)
    n_c: defaultdict[str, float] = defaultdict(float)
    for (a, _), w in o.items():
        n_c[a] += w
    n = sum(n_c.values())
    expected = sum(n_c[a] * n_c[b] for a in n_c for b in n_c if a != b)
    if n <= 1 or expected == 0:
        return None  # one value only: agreement is undefined, not perfect
    observed = sum(w for (a, b), w in o.items() if a != b)
    return 1 - (n - 1) * observed / expected
