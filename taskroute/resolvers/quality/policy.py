"""A project's quality policy: its fields, their bounds, and the partial update."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import BadInput
from taskroute.resolvers import validation as v

POLICY_FIELDS: dict[str, tuple[str, float, float]] = {
    # name: (kind, lo, hi)
    "gold_ratio": ("number", 0.0, 1.0),
    "exploration_tasks": ("integer", 0, 100_000),
    "exploration_gold_ratio": ("number", 0.0, 1.0),
    "gold_max_exposures": ("integer", 1, 1_000_000),
    "gold_low_water": ("integer", 0, 1_000_000),
    "agreement_threshold": ("number", 0.0, 1.0),
    "adjudication_min_quality": ("number", 0.0, 1.0),
    "pause_min_gold": ("integer", 1, 100_000),
    "pause_below": ("number", 0.0, 1.0),
    "trusted_accuracy": ("number", 0.01, 0.99),
    "pause_risk": ("number", 1e-9, 0.5),
    "suspect_gold_ratio": ("number", 0.0, 1.0),
    "proven_gold_ratio": ("number", 0.0, 1.0),
    "clear_evidence": ("number", 1.0, 1e9),
    "answer_choices": ("integer", 2, 1_000_000),
    "confidence_threshold": ("number", 0.5, 0.999999),
    # 0 turns dynamic overlap off (stored as NULL: every item gets all redundancy slots)
    "min_answers": ("integer", 0, 5),
}
CHOICES: dict[str, tuple[str, ...]] = {
    "pause_rule": ("sequential", "fixed"),
    "resolution": ("majority", "weighted"),
}


async def get_policy(db: Database, project_id: UUID) -> asyncpg.Record:
    row = await db.fetchrow(Q["quality_policy_get"], project_id)
    assert row is not None
    return row


async def set_policy(db: Database, project_id: UUID, raw: dict[str, Any]) -> asyncpg.Record:
    """Partial update: fields left out keep their value; `answer_field: null` is left alone,
    `answer_field: ""` compares whole answers again."""
    unknown = set(raw) - set(POLICY_FIELDS) - set(CHOICES) - {"answer_field", "adjudicate"}
    if unknown:
        raise BadInput(f"unknown fields: {sorted(unknown)}")
    checked: dict[str, Any] = {}
    for name, (kind, lo, hi) in POLICY_FIELDS.items():
        if raw.get(name) is None:
            continue
        if kind == "integer":
            checked[name] = v.integer(raw[name], name, int(lo), int(hi))
        else:
            checked[name] = v.number(raw[name], name, lo, hi)
    for name, allowed in CHOICES.items():
        if raw.get(name) is None:
            continue
        if raw[name] not in allowed:
            raise BadInput(f"{name} must be one of {', '.join(allowed)}", field=name)
        checked[name] = raw[name]
    if checked.get("min_answers") == 0:
        checked["min_answers"] = None
    if raw.get("adjudicate") is not None:
        if not isinstance(raw["adjudicate"], bool):
            raise BadInput("adjudicate must be true or false", field="adjudicate")
        checked["adjudicate"] = raw["adjudicate"]
    if raw.get("answer_field") is not None:
        field = raw["answer_field"]
        if not isinstance(field, str) or len(field) > 200:
            raise BadInput(
                "answer_field must be a string of at most 200 characters", field="answer_field"
            )
        # "" compares whole answers; anything else must be text Postgres can store (no NUL,
        # no lone surrogate: those reached the driver and answered INTERNAL)
        checked["answer_field"] = v.text(field, "answer_field", 200) if field else None
    async with db.transaction() as conn:
        current = dict(await conn.fetchrow(Q["quality_policy_get"], project_id) or {})
        merged = {**current, **checked}
        if merged["trusted_accuracy"] <= merged["pause_below"] + 1e-6:
            raise BadInput(
                "trusted_accuracy must be above pause_below (the test tells the two apart)",
                field="trusted_accuracy",
            )
        return await conn.fetchrow(
            Q["quality_policy_set"],
            project_id,
            merged["gold_ratio"],
            merged["exploration_tasks"],
            merged["exploration_gold_ratio"],
            merged["gold_max_exposures"],
            merged["gold_low_water"],
            merged["answer_field"],
            merged["agreement_threshold"],
            merged["adjudication_min_quality"],
            merged["pause_min_gold"],
            merged["pause_below"],
            merged["adjudicate"],
            merged["pause_rule"],
            merged["trusted_accuracy"],
            merged["pause_risk"],
            merged["suspect_gold_ratio"],
            merged["proven_gold_ratio"],
            merged["resolution"],
            merged["answer_choices"],
            merged["confidence_threshold"],
            merged["min_answers"],
            merged["clear_evidence"],
        )
