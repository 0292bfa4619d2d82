"""Pure parts of routing: class shares configuration and priority classes."""

from __future__ import annotations

import pytest

from taskroute.errors import BadInput
from taskroute.resolvers.jobs.routing import parse_class_shares
from taskroute.resolvers.validation import priority_class_of, priority_of


def test_class_shares_parse_and_default_missing_classes_to_zero() -> None:
    assert parse_class_shares("high=0.5, low=0.1") == {"high": 0.5, "normal": 0.0, "low": 0.1}
    assert parse_class_shares("") == {"high": 0.0, "normal": 0.0, "low": 0.0}


@pytest.mark.parametrize(
    "raw", ["urgent=0.1", "low", "low=x", "low=1.5", "low=-0.1", "high=0.7,normal=0.2,low=0.2"]
)
def test_bad_class_shares_are_refused(raw: str) -> None:
    with pytest.raises(BadInput):
        parse_class_shares(raw)


def test_priority_classes_are_named_levels() -> None:
    assert priority_of({"priority_class": "high"}) == 100
    assert priority_of({"priority_class": "LOW"}) == -100
    assert priority_of({}) == 0
    assert priority_of({"priority": 150, "priority_class": "high"}) == 150
    assert [priority_class_of(p) for p in (100, 99, 0, -99, -100)] == [
        "high",
        "normal",
        "normal",
        "normal",
        "low",
    ]
    with pytest.raises(BadInput):
        priority_of({"priority": 99, "priority_class": "high"})
    with pytest.raises(BadInput):
        priority_of({"priority_class": 3})
