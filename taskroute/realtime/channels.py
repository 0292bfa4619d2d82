"""Channel names and payloads shared by the NOTIFY senders and the listening hub.

Payloads are compact JSON far below Postgres's 8000-byte NOTIFY limit, and carry a nonce so
Postgres never folds two notifications of one transaction into one.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

# Postgres truncates identifiers at 63 bytes (and pg_notify refuses longer channel names).
MAX_CHANNEL_BYTES = 63
PROGRESS_CHANNEL = "tr.progress"
# Per payload: at most this many projects (a UUID is 36 bytes; 150 of them stay < 7000 bytes).
MAX_PROJECTS_PER_PAYLOAD = 150


def skill_channel(skill: str) -> str:
    """One channel per skill, so a process only hears about skills its subscribers hold."""
    name = f"tr.skill.{skill}"
    if len(name.encode()) <= MAX_CHANNEL_BYTES:
        return name
    return "tr.skill#" + hashlib.sha256(skill.encode()).hexdigest()[:40]


def _nonce() -> str:
    return secrets.token_hex(4)


def tasks_payloads(counts_by_project: Mapping[str, int]) -> list[str]:
    """`{"p": {project_id: n, ...}, "x": nonce}`, split so each payload stays small."""
    items = sorted(counts_by_project.items())
    out = []
    for i in range(0, len(items), MAX_PROJECTS_PER_PAYLOAD):
        chunk = dict(items[i : i + MAX_PROJECTS_PER_PAYLOAD])
        out.append(json.dumps({"p": chunk, "x": _nonce()}, separators=(",", ":")))
    return out


def progress_payloads(project_ids: Iterable[str]) -> list[str]:
    ids = sorted(project_ids)
    step = MAX_PROJECTS_PER_PAYLOAD
    return [
        json.dumps({"p": ids[i : i + step], "x": _nonce()}, separators=(",", ":"))
        for i in range(0, len(ids), step)
    ]


def parse(payload: str) -> dict[str, Any]:
    """A payload we did not write (someone's manual NOTIFY) parses as empty, never raises."""
    try:
        data = json.loads(payload)
    except (ValueError, TypeError):
        return {}
    return data if isinstance(data, dict) else {}
