"""Settings are declared once (taskroute/config.py); docs/operations.md's table is generated
from them."""

from __future__ import annotations

import dataclasses
import importlib.util
from typing import Any

import pytest

from taskroute.config import Settings, read_setting

from ..procs import ROOT


def _readme_script() -> Any:
    script = ROOT / "scripts" / "settings_doc.py"
    spec = importlib.util.spec_from_file_location("settings_doc", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_settings_table_is_generated_from_config() -> None:
    doc = (ROOT / "docs" / "operations.md").read_text()
    assert _readme_script().rewrite(doc) == doc, (
        "docs/operations.md's settings table differs from taskroute/config.py;"
        " regenerate it: .venv/bin/python scripts/settings_doc.py"
    )


def test_every_setting_declares_its_variable_and_meaning() -> None:
    names = [f.metadata.get("env") for f in dataclasses.fields(Settings)]
    assert all(names) and len(set(names)) == len(names)
    assert all(f.metadata.get("meaning") for f in dataclasses.fields(Settings))


def test_from_env_reads_each_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKROUTE_POOL_MAX", "33")
    monkeypatch.setenv("TASKROUTE_SWEEP_INTERVAL", "0.5")
    monkeypatch.setenv("TASKROUTE_INTROSPECTION", "off")
    monkeypatch.setenv("TASKROUTE_ALLOWED_ORIGINS", " https://a.example , ,https://b.example")
    monkeypatch.setenv("TASKROUTE_DATA_DIR", "")  # empty: the default
    settings = Settings.from_env()
    assert settings.pool_max == 33 and settings.sweep_interval == 0.5
    assert settings.introspection is False
    assert settings.allowed_origins == ("https://a.example", "https://b.example")
    assert settings.data_dir == "./.taskroute" and settings.pool_min == 2
    monkeypatch.setenv("TASKROUTE_LOG_FORMAT", "text")
    assert read_setting("log_format") == "text"


def test_a_malformed_number_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKROUTE_POOL_MAX", "ten")
    with pytest.raises(ValueError, match="TASKROUTE_POOL_MAX"):
        Settings.from_env()
