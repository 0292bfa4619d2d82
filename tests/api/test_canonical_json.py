"""Payloads are stored, hashed (their blob key) and delivered as their canonical JSON: sorted
keys, compact, UTF-8. `json_value` takes a fast encoder (orjson) where it writes the very same
bytes as `json.dumps`, and json.dumps elsewhere; the two must never disagree, or a re-sent
payload would get another key and another blob."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taskroute.errors import BadInput
from taskroute.resolvers import validation as v


def reference(value: Any) -> str:
    """What every payload stored before the fast path was keyed by."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(x) for k, x in value.items())
    return isinstance(value, list) and any(has_nul(x) for x in value)


# Any code point but lone surrogates (refused, tested below), in keys and values alike.
texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too: orjson refuses those, json.dumps takes over
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(texts, inner, max_size=5),
    max_leaves=25,
)


@settings(max_examples=500, deadline=None)
@given(values)
def test_the_fast_path_writes_the_same_canonical_json(value: Any) -> None:
    expected = reference(value)
    if has_nul(value):  # refused either way: Postgres' jsonb cannot hold it
        with pytest.raises(BadInput):
            v.json_value(value, "payload", 1 << 20)
        return
    assert v.json_value(value, "payload", 1 << 20) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": float("nan")}, "NaN or Infinity"),
        ([1, float("inf")], "NaN or Infinity"),
        ({"k": "x\ud800"}, "invalid Unicode"),
        ({"x\udfff": 1, "n": 2**70}, "invalid Unicode"),
        ({"n": "a\x00b"}, "NUL"),
        ({"t": "é" * 600}, "larger than 1000 bytes"),  # 600 characters, 1,200 bytes
    ],
)
def test_what_jsonb_cannot_hold_is_refused_on_either_path(value: Any, message: str) -> None:
    with pytest.raises(BadInput) as err:
        v.json_value(value, "payload", 1000)
    assert message in err.value.message


def test_too_deep_is_refused_whatever_the_leaves() -> None:
    for leaf in (1, 1.5):
        deep: Any = leaf
        for _ in range(v.MAX_JSON_DEPTH):
            deep = [deep]
        v.json_value(deep, "payload", 1 << 20)  # exactly the limit
        with pytest.raises(BadInput) as err:
            v.json_value([deep], "payload", 1 << 20)
        assert "nested deeper" in err.value.message
