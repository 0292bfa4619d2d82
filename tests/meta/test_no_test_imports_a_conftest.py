"""Tests share code through tests/helpers.py; conftest.py holds fixtures only."""

from __future__ import annotations

import re

from ..procs import ROOT

_FROM_CONFTEST = re.compile(r"^\s*(from \.+conftest import|from \.+ import conftest)", re.M)


def test_no_test_imports_a_conftest() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if _FROM_CONFTEST.search(path.read_text())
    ]
    assert not offenders, (
        "import shared test code from tests/helpers.py (settings_for, InProcessServer, DbRoute,"
        f" wait_for, CLAIM ...), not from a conftest: {offenders}"
    )
