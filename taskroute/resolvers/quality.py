"""Quality: gold serving and scoring, agreement and adjudication, pausing, retraction, results.

Rules (the README's "Quality" section says the same for customers):

The rules that run on every claim and submit are SQL (queries/quality.sql `gold_claim`,
functions/quality.sql), so a claim and a submit are one round trip each; this module holds the
admin and customer paths around them.

- Gold items (`TaskInput.gold`, or `addGoldItems`) get no redundancy slots. `gold_claim` serves
  one, before the normal claim, with probability `gold_ratio` of the item's project (the higher
  `exploration_gold_ratio` during an expert's first `exploration_tasks` tasks of the skill), only
  while that project has open work of the skill the expert qualifies for. A gold serving is a
  fresh task row with a random id, claimed at once, answered through the same claim shape.
- Gold is paid like any task: the expert cannot tell it apart, and paying it keeps it so. Its
  cost is the customer's quality budget; it is kept out of the progress counts and results.
- Quality estimate per (expert, skill): the mean of the Beta(1 + correct, 1 + wrong) posterior,
  i.e. (1 + correct) / (2 + seen). Few samples are pulled toward 0.5 (2 of 2 right reads 0.75).
- Exploration: an expert with no gold answers yet in a skill keeps the quality the admin gave
  at creation (default 1.0), so a new expert is admitted by trust; the onboarding gold share
  makes the first gold answers, which replace that trust, arrive early.
- Pausing ('sequential', the default): after each gold answer, the likelihood ratio of the gold
  answers since the last unpause, "accuracy below `pause_below`" (a mixture over 64 accuracies)
  against "accuracy `trusted_accuracy`", is kept in `expert_skills.pause_llr`; at 1 / `pause_risk`
  (and >= `pause_min_gold` answers) the skill is paused and the live claims released. An expert
  at or above trusted_accuracy is ever paused with probability <= pause_risk (Ville). Adaptive
  gold share: `suspect_gold_ratio` while the ratio is above 1, `proven_gold_ratio` once it is
  below pause_risk. 'fixed' keeps the old rule (>= pause_min_gold gold answers and an estimate
  below pause_below). Admins unpause; the test restarts from no evidence.
- Weighted resolution (`resolution: weighted`): answers weigh the log-odds of their expert's
  measured accuracy; an item resolves once its best answer's probability reaches
  `confidence_threshold`, else asks for one more answer up to the redundancy (dynamic overlap,
  items start with `min_answers` slots). Details: functions/quality.sql taskroute_resolve_item.
- Agreement: once an item has k valid answers, the share of the majority answer (compared on
  `answer_field`, or whole) at or above `agreement_threshold` resolves it; a tie for the top
  never does. Otherwise one adjudication task (same skill, `adjudication_min_quality`, never to
  an expert who answered the item) is opened; its answer resolves the item. A project may turn
  adjudication off (`adjudicate: false`): then the most common answer, earliest on a tie,
  resolves it (method 'plurality').
- Retraction marks answers (never deletes); the item gets fresh slots for the missing answers
  and its result is recomputed; already paid lines stay, a clawback is a reversal line.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.blobs import BlobStore, BlobStoreError
from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import BadInput, NotFound, Unavailable
from taskroute.realtime import notify
from taskroute.resolvers import acceptance, cursors, payloads, projects
from taskroute.resolvers import validation as v
from taskroute.resolvers.validation import canonical_json

MAX_PAGE = 1000


# --- comparing answers ----------------------------------------------------------------------


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


# --- pausing and resolving (the rules live in functions/quality.sql) ---------------------


async def _pause(conn: asyncpg.Connection, expert_id: UUID, skill: str, reason: str) -> bool:
    """Pause the skill and give the expert's live claims on it back (`taskroute_pause_skill`);
    False if it was not active."""
    opened = await conn.fetchval(Q["expert_skill_pause_call"], expert_id, skill, reason)
    if opened is None:
        return False
    await _tasks_opened(conn, opened)
    return True


async def _tasks_opened(conn: asyncpg.Connection, opened: list[dict[str, Any]]) -> None:
    """Wake idle experts for tasks this transaction opened (hints arrive after commit)."""
    if opened:
        await notify.tasks_opened(
            conn, [(r["skill"], r["project_id"], 1, r["min_quality"]) for r in opened]
        )


async def resolve_item(conn: asyncpg.Connection, item_id: UUID, refill: bool = False) -> None:
    """Recompute an item's result from its valid answers (`taskroute_resolve_item`); write a
    change row if it is visible. `refill` (retraction): add open slots so valid answers plus
    live slots make k again."""
    await _tasks_opened(conn, await conn.fetchval(Q["item_resolve_call"], item_id, refill))


# --- admin: pause, unpause, retract ---------------------------------------------------------


async def expert_skills(db: Database, expert_id: UUID) -> list[asyncpg.Record]:
    rows = await db.fetch(Q["expert_skills_of"], expert_id)
    if not rows:
        raise NotFound("no such expert")
    return rows


async def pause_expert(db: Database, expert_id: UUID, skill: Any, reason: Any) -> None:
    skill = v.skill(skill)
    reason = v.text(reason, "reason", 1000)
    async with db.transaction() as conn:
        if not any(r["skill"] == skill for r in await conn.fetch(Q["expert_skills_of"], expert_id)):
            raise NotFound("no such expert skill")
        await _pause(conn, expert_id, skill, reason)


async def unpause_expert(db: Database, expert_id: UUID, skill: Any, reason: Any) -> None:
    skill = v.skill(skill)
    reason = v.text(reason, "reason", 1000)
    row = await db.fetchrow(Q["expert_skill_unpause"], expert_id, skill, reason)
    if row is None:
        raise NotFound("no such expert skill")


@dataclass(frozen=True)
class Retraction:
    answers: int
    items: int
    reversals: int


async def retract(
    db: Database,
    expert_id: UUID,
    skill: Any,
    since: datetime | None,
    by: str,
    reason: Any,
    clawback: bool,
) -> Retraction:
    skill = None if skill is None else v.skill(skill)
    reason = v.text(reason, "reason", 1000)
    if since is not None:
        since = cursors.instant(since, "since")
    async with db.transaction() as conn:
        if not await conn.fetch(Q["expert_skills_of"], expert_id):
            raise NotFound("no such expert")
        await conn.execute(Q["retract_lock"])
        rows = await conn.fetch(Q["retract_answers"], expert_id, skill, since, by, reason)
        items = sorted({r["item_id"] for r in rows})
        # All item locks (in id order) before any feed lock: a racing submit holds at most one
        # item and then wants the feed lock, so no cycle can form.
        await conn.fetch(Q["items_lock_many"], items)
        for project_id in sorted({r["project_id"] for r in rows}):
            await conn.execute(Q["result_feed_lock"], project_id)
        for item_id in items:
            await resolve_item(conn, item_id, refill=True)
        # relabelling reopens a completed project; a canceled adjudication may complete one
        await projects.settle(conn, [r["project_id"] for r in rows])
        # issue 20: retracted answers are rejected (accepted ones only with a clawback)
        await acceptance.retracted(conn, [r["id"] for r in rows], reason, clawback)
        reversals = []
        if clawback and rows:
            reversals = await conn.fetch(
                Q["payouts_clawback"], [r["id"] for r in rows], f"retracted: {reason}"
            )
    return Retraction(len(rows), len(items), len(reversals))


# --- customers: policy, gold, results -------------------------------------------------------

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
        )


async def add_gold_items(
    db: Database,
    blobs: BlobStore,
    project_id: UUID,
    raw_tasks: Any,
    limits: GoldLimits,
) -> int:
    """Gold items added on their own: stored into the pool, no slots. Returns how many were new.

    Payloads are stored like every task's (blob store first; inline only up to the same size),
    so a gold serving is delivered the same way as the real work it is mixed into."""
    specs = v.task_specs(raw_tasks, limits.max_tasks, limits.max_payload_bytes)
    if not specs:
        raise BadInput("tasks must list at least one gold item", field="tasks")
    for i, s in enumerate(specs):
        if s.gold is None:
            raise BadInput(f"tasks[{i}].gold is required", field=f"tasks[{i}].gold")
    async with db.transaction() as conn:
        try:
            refs = await payloads.store_payloads(conn, blobs, specs, limits.inline_payload_bytes)
        except BlobStoreError as exc:
            raise Unavailable("the payload store is unavailable; nothing was stored") from exc
        rows = await conn.fetch(
            Q["items_insert"],
            project_id,
            [uuid.uuid4() for _ in specs],
            [s.skill for s in specs],
            [s.external_id for s in specs],
            [s.payload_json if ref.inline else None for s, ref in zip(specs, refs, strict=True)],
            [ref.key for ref in refs],
            [len(s.payload_json.encode()) for s in specs],
            [v.json_text(s.gold) for s in specs],
        )
    return len(rows)


@dataclass(frozen=True)
class GoldLimits:
    max_tasks: int
    max_payload_bytes: int
    # payloads up to this size also travel inline (the same rule as real work)
    inline_payload_bytes: int


async def gold_pool(db: Database, project_id: UUID) -> list[asyncpg.Record]:
    return await db.fetch(Q["gold_pool_status"], project_id)


def _page_size(first: int) -> int:
    return v.integer(first, "first", 1, MAX_PAGE)


def parse_result_cursor(after: str | None) -> UUID | None:
    if after is None or after == "":
        return None
    try:
        return UUID(after)
    except ValueError as exc:
        raise BadInput("after must be a cursor returned by results", field="after") from exc


def parse_change_cursor(after: str | None) -> int:
    if after is None or after == "":
        return 0
    return cursors.seq(after)


async def results_page(
    db: Database, project_id: UUID, after: str | None, first: int
) -> tuple[list[asyncpg.Record], str | None]:
    rows = await db.fetch(
        Q["results_page"], project_id, parse_result_cursor(after), _page_size(first)
    )
    return rows, (str(rows[-1]["item_id"]) if rows else after)


async def changes_page(
    db: Database, project_id: UUID, after: str | None, first: int
) -> tuple[list[asyncpg.Record], str]:
    start = parse_change_cursor(after)
    rows = await db.fetch(Q["result_changes_page"], project_id, start, _page_size(first))
    return rows, str(rows[-1]["seq"] if rows else start)


async def prior_answers(db: Database, expert_id: UUID, task_id: UUID) -> list[Any] | None:
    """What an adjudicator is shown, under the payload's rule: only while they hold the task's
    live lease, and every read is audited. None for any other task or holder (gold looks like
    normal work; a lapsed adjudicator no longer sees the other experts' answers)."""
    async with db.transaction() as conn:
        held = await conn.fetchrow(Q["adjudication_held"], task_id, expert_id)
        if held is None:
            return None
        rows = await conn.fetch(Q["adjudication_prior_answers"], held["item_id"])
        await conn.execute(
            Q["audit_insert"],
            expert_id,
            held["customer_id"],
            held["project_id"],
            task_id,
            "prior_answers",
        )
    return [r["answer"] for r in rows]


def evidence_ratio(llr: float | None) -> float | None:
    """The pause test's evidence as a plain ratio (capped where a float ends)."""
    return None if llr is None else math.exp(min(llr, 700.0))


def describe_rules(p: Any) -> list[str]:
    """The project's quality rules as built, in words a customer can follow."""
    rules = [
        f"Gold: about {p['gold_ratio']:.0%} of an expert's tasks are gold questions with a known "
        f"answer ({p['exploration_gold_ratio']:.0%} during their first "
        f"{p['exploration_tasks']} tasks of a skill); experts cannot tell them apart."
    ]
    if p["pause_rule"] == "sequential":
        rules.append(
            f"Pausing: after each gold answer we weigh how much likelier the expert's gold "
            f"answers since their last unpause are from someone right less than "
            f"{p['pause_below']:.0%} of the time than from someone right "
            f"{p['trusted_accuracy']:.0%} of the time. At {1 / p['pause_risk']:.0f} times "
            f"likelier (and at least "
            f"{p['pause_min_gold']} gold answers) the expert is paused for that skill. An expert "
            f"right {p['trusted_accuracy']:.0%} of the time or more is paused with a chance of at "
            f"most {p['pause_risk']:.2%}, however long they work. While the evidence leans "
            f"against an expert they get {p['suspect_gold_ratio']:.0%} gold, so the question "
            f"is settled sooner; experts proven good get {p['proven_gold_ratio']:.0%}. Only an "
            f"admin unpauses."
        )
    else:
        rules.append(
            f"Pausing: an expert is paused for a skill once they have at least "
            f"{p['pause_min_gold']} gold answers and their estimated accuracy is below "
            f"{p['pause_below']:.0%}. Only an admin unpauses."
        )
    if p["resolution"] == "weighted":
        overlap = (
            f"Each item starts with {p['min_answers']} answers and gets one more at a time "
            f"while it is not confident, up to the project's redundancy."
            if p["min_answers"] is not None
            else "Every item collects the project's redundancy in answers."
        )
        rules.append(
            f"Results: each answer counts in proportion to how reliable its expert measured on "
            f"gold (log-odds of their accuracy, assuming {p['answer_choices']} possible "
            f"answers). An item resolves once its best answer is at least "
            f"{p['confidence_threshold']:.1%} likely. {overlap} Agreement still shows the share "
            f"of answers that match the result."
        )
    else:
        rules.append(
            f"Results: an item resolves when at least {p['agreement_threshold']:.0%} of its "
            f"answers agree."
        )
    if p["adjudicate"]:
        rules.append("Otherwise a more experienced expert adjudicates (method 'adjudicated').")
    else:
        rules.append("Otherwise the best-supported answer is taken (a 'plurality' method).")
    return rules


async def report(db: Database, project_id: UUID) -> dict[str, Any]:
    async with db.connection() as conn:
        policy = await conn.fetchrow(Q["quality_policy_get"], project_id)
        counts = await conn.fetchrow(Q["project_result_counts"], project_id)
        answers = await conn.fetch(Q["project_answers_for_report"], project_id)
        evidence = await conn.fetch(Q["project_expert_evidence"], project_id)
    assert policy is not None and counts is not None
    units: dict[UUID, list[str]] = {}
    for r in answers:
        units.setdefault(r["item_id"], []).append(
            answer_key(r["answer"], policy["answer_field"]) or "\0missing"
        )
    return {
        **dict(counts),
        "krippendorff_alpha": krippendorff_alpha_nominal(list(units.values())),
        "rules": describe_rules(policy),
        "experts": [
            {
                "skill": r["skill"],
                "status": r["status"],
                "gold_seen": r["gold_seen"],
                "gold_correct": r["gold_correct"],
                "gold_since_unpause": r["gold_since_unpause"],
                "pause_evidence": evidence_ratio(r["pause_llr"]),
            }
            for r in evidence
        ],
    }
