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
# Per payload: at most this many projects. A task entry is ~50 bytes (UUID, count) plus ~45
# for its minimum quality, so 60 of them stay near 6000 bytes; a progress entry is ~40 bytes.
MAX_PROJECTS_PER_PAYLOAD = 60


def skill_channel(skill: str) -> str:
    """One channel per skill, so a process only hears about skills its subscribers hold."""
    name = f"tr.skill.{skill}"
    if len(name.encode()) <= MAX_CHANNEL_BYTES:
        return name
    return "tr.skill#" + hashlib.sha256(skill.encode()).hexdigest()[:40]


def _nonce() -> str:
    # 64 bits: it also names the announcement's wake tickets (realtime/tickets.py), which
    # must not collide among the announcements of the last minute
    return secrets.token_hex(8)


def tasks_payloads(
    counts_by_project: Mapping[str, int], min_quality: Mapping[str, float] | None = None
) -> list[str]:
    """`{"p": {project_id: n}, "q": {project_id: min_quality}, "x": nonce}`, split so each
    payload stays small. "q" lists only projects with a minimum quality above 0: the hub then
    wakes only experts good enough to claim those tasks."""
    items = sorted(counts_by_project.items())
    quality = min_quality or {}
    out = []
    for i in range(0, len(items), MAX_PROJECTS_PER_PAYLOAD):
        chunk = dict(items[i : i + MAX_PROJECTS_PER_PAYLOAD])
        body: dict[str, Any] = {"p": chunk}
        q = {p: round(quality[p], 4) for p in chunk if quality.get(p, 0) > 0}
        if q:
            body["q"] = q
        body["x"] = _nonce()
        out.append(json.dumps(body, separators=(",", ":")))
    return out


# A unit announced again carries at most this many experts to pass over (about 40 bytes each).
MAX_SKIP = 50


def reannounce_payload(
    project_id: str, units: int, min_quality: float, attempt: int, skip: Iterable[str]
) -> str:
    """Units of one project announced again (realtime/tickets.py), one payload per project:
    the tasks payload plus "a" (the how-manieth announcement of these units) and "s" (experts
    not to wake: they were woken for these units and were not seen since)."""
    body: dict[str, Any] = {"p": {project_id: units}}
    if min_quality > 0:
        body["q"] = {project_id: round(min_quality, 4)}
    body["a"] = attempt
    skipped = sorted(set(skip))[:MAX_SKIP]
    if skipped:
        body["s"] = skipped
    body["x"] = _nonce()
    return json.dumps(body, separators=(",", ":"))


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
