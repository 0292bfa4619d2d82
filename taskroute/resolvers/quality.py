"""Quality: gold serving and scoring, agreement and adjudication, pausing, retraction, results.

Rules (the README's "Quality" section says the same for customers):

- Gold items (`TaskInput.gold`, or `addGoldItems`) get no redundancy slots. `claim_gold` serves
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
- Pausing: once an expert has `pause_min_gold` gold answers (counted since their last unpause)
  and the estimate is below `pause_below`, the skill is paused (status, reason, time) and their
  live claims on it are released. Admins unpause.
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

import random
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import BadInput, NotFound
from taskroute.realtime import notify
from taskroute.resolvers import validation as v
from taskroute.resolvers.validation import canonical_json

# Float32 columns (thresholds) against float64 shares: 0.6 is stored as 0.6000000238.
_EPS = 1e-6
MAX_PAGE = 1000


# --- serving gold ---------------------------------------------------------------------------


async def claim_gold(
    conn: asyncpg.Connection,
    expert_id: UUID,
    skills: list[str] | None,
    project_id: UUID | None = None,
) -> asyncpg.Record | None:
    """A gold serving shaped like `task_claim`'s row, or None (then claim normal work)."""
    return await conn.fetchrow(Q["gold_claim"], expert_id, skills, random.random(), project_id)


# --- comparing answers ----------------------------------------------------------------------


def answer_key(answer: Any, field: str | None) -> str | None:
    """What two answers are compared on; None when the answer lacks the compared field."""
    if field is None:
        return canonical_json(answer)
    if isinstance(answer, dict) and field in answer:
        return canonical_json(answer[field])
    return None


def gold_correct(answer: Any, gold: Any, field: str | None) -> bool:
    want = answer_key(gold, field)
    if want is None:  # the customer gave the bare value rather than an answer object
        want = canonical_json(gold)
    got = answer_key(answer, field)
    return got is not None and got == want


def majority(answers: list[Any], field: str | None) -> tuple[float, Any | None]:
    """(share of the most common answer, that answer or None on a tie for the top)."""
    if not answers:
        return 0.0, None
    keys = [answer_key(a, field) or "\0missing" for a in answers]
    ranked = Counter(keys).most_common(2)
    top_key, top = ranked[0]
    share = top / len(answers)
    if len(ranked) > 1 and ranked[1][1] == top:
        return share, None
    if top_key == "\0missing":  # agreeing on "no answer on the field" resolves nothing
        return share, None
    return share, answers[keys.index(top_key)]


def plurality(answers: list[Any], field: str | None) -> Any:
    """The most common answer; on a tie, the earliest of the tied ones."""
    keys = [answer_key(a, field) or "\0missing" for a in answers]
    counts = Counter(keys)
    top = max(counts.values())
    return answers[next(i for i, k in enumerate(keys) if counts[k] == top)]


def krippendorff_alpha_nominal(units: list[list[str]]) -> float | None:
    """Krippendorff's alpha for nominal data; units with fewer than two values are skipped."""
    o: Counter[tuple[str, str]] = Counter()
    for values in units:
        m = len(values)
        if m < 2:
            continue
        for i, a in enumerate(values):
            for j, b in enumerate(values):
                if i != j:
                    o[(a, b)] += 1 / (m - 1)
    n_c: Counter[str] = Counter()
    for (a, _), w in o.items():
        n_c[a] += w
    n = sum(n_c.values())
    expected = sum(n_c[a] * n_c[b] for a in n_c for b in n_c if a != b)
    if n <= 1 or expected == 0:
        return None  # one value only: agreement is undefined, not perfect
    observed = sum(w for (a, b), w in o.items() if a != b)
    return 1 - (n - 1) * observed / expected


# --- on every submit (inside claims.submit's transaction) -----------------------------------


async def after_submit(conn: asyncpg.Connection, found: asyncpg.Record, answer: Any) -> None:
    """Score a gold answer, or resolve the item a customer answer belongs to."""
    ctx = await conn.fetchrow(Q["quality_submit_context"], found["task_id"])
    assert ctx is not None
    expert_id = found["expert_id"]
    await conn.execute(Q["expert_skill_task_done"], expert_id, ctx["skill"])
    if ctx["kind"] == "gold":
        await _score_gold(conn, expert_id, ctx, answer)
    else:
        await resolve_item(conn, ctx["item_id"])


async def _score_gold(
    conn: asyncpg.Connection, expert_id: UUID, ctx: asyncpg.Record, answer: Any
) -> None:
    correct = gold_correct(answer, ctx["gold_answer"], ctx["answer_field"])
    rec = await conn.fetchrow(Q["expert_skill_gold_score"], expert_id, ctx["skill"], correct)
    if rec is None or rec["status"] != "active":
        return
    counted = rec["gold_seen"] - rec["pause_check_from"]
    if counted >= ctx["pause_min_gold"] and rec["quality"] < ctx["pause_below"] - _EPS:
        reason = (
            f"gold quality {rec['quality']:.2f} below {ctx['pause_below']:.2f} after "
            f"{rec['gold_seen']} gold answers ({rec['gold_correct']} correct)"
        )
        await _pause(conn, expert_id, ctx["skill"], reason)


async def _pause(conn: asyncpg.Connection, expert_id: UUID, skill: str, reason: str) -> bool:
    if await conn.fetchval(Q["expert_skill_pause"], expert_id, skill, reason) is None:
        return False
    released = await conn.fetch(Q["leases_release_for_skill"], expert_id, skill)
    await _tasks_opened(conn, [r for r in released if r["status"] == "open"])
    return True


async def _tasks_opened(conn: asyncpg.Connection, rows: list[asyncpg.Record]) -> None:
    """Wake idle experts for tasks this transaction opened (hints arrive after commit)."""
    if rows:
        await notify.tasks_opened(
            conn, [(r["skill"], r["project_id"], 1, r["min_quality"]) for r in rows]
        )


async def resolve_item(conn: asyncpg.Connection, item_id: UUID, refill: bool = False) -> None:
    """Recompute an item's result from its valid answers; write a change row if it is visible.

    `refill` (retraction): add open slots so valid answers plus live slots make k again.
    """
    st = await conn.fetchrow(Q["item_lock_state"], item_id)
    assert st is not None
    rows = await conn.fetch(Q["item_valid_answers"], item_id)
    normal = [r["answer"] for r in rows if r["kind"] == "normal"]
    adjudicated = [r["answer"] for r in rows if r["kind"] == "adjudication"]
    k = st["redundancy"]
    live = st["project_status"] == "active"
    missing = k - len(normal) - st["live_slots"]
    if refill and live and missing > 0:
        await _tasks_opened(conn, await conn.fetch(Q["item_slots_add"], item_id, missing))

    share, top = majority(normal, st["answer_field"])
    agreement: float | None = share if normal else None
    answer: Any = None
    method: str | None = None
    if len(normal) < k:
        status = "pending"
    elif top is not None and share >= st["agreement_threshold"] - _EPS:
        status, answer, method = "resolved", top, "majority"
    elif adjudicated:
        status, answer, method = "resolved", adjudicated[-1], "adjudicated"
    elif not st["adjudicate"]:
        status, answer, method = "resolved", plurality(normal, st["answer_field"]), "plurality"
    else:
        status = "adjudicating"
    if status == "adjudicating":
        if live:
            opened = await conn.fetch(
                Q["adjudication_open"], item_id, st["adjudication_min_quality"]
            )
            await _tasks_opened(conn, opened)
    else:
        await conn.execute(Q["adjudication_cancel_open"], item_id)

    was = st["result_status"] == "resolved"
    now = status == "resolved"
    change: str | None = None
    if now and not was:
        change = "resolved" if st["version"] == 0 else "re-resolved"
    elif was and not now:
        change = "retracted"
    elif now and (
        canonical_json(answer) != canonical_json(st["result_answer"])
        or method != st["result_method"]
        or abs((agreement or 0) - (st["result_agreement"] or 0)) > _EPS
    ):
        change = "re-resolved"
    version = st["version"] + (1 if change else 0)
    await conn.execute(
        Q["item_result_upsert"],
        item_id,
        st["project_id"],
        status,
        answer,
        agreement,
        len(normal),
        method,
        version,
    )
    if change:
        await conn.execute(Q["result_feed_lock"], st["project_id"])
        await conn.execute(
            Q["result_change_insert"], st["project_id"], item_id, version, change, answer, agreement
        )


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
    if since is not None and since.tzinfo is None:
        raise BadInput("since must carry a time zone", field="since")
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
}


async def get_policy(db: Database, project_id: UUID) -> asyncpg.Record:
    row = await db.fetchrow(Q["quality_policy_get"], project_id)
    assert row is not None
    return row


async def set_policy(db: Database, project_id: UUID, raw: dict[str, Any]) -> asyncpg.Record:
    """Partial update: fields left out keep their value; `answer_field: null` is left alone,
    `answer_field: ""` compares whole answers again."""
    unknown = set(raw) - set(POLICY_FIELDS) - {"answer_field", "adjudicate"}
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
    if raw.get("adjudicate") is not None:
        if not isinstance(raw["adjudicate"], bool):
            raise BadInput("adjudicate must be true or false", field="adjudicate")
        checked["adjudicate"] = raw["adjudicate"]
    if raw.get("answer_field") is not None:
        field = raw["answer_field"]
        if not isinstance(field, str) or len(field) > 200:
            raise BadInput("answer_field must be a string of at most 200 characters")
        checked["answer_field"] = field or None
    async with db.transaction() as conn:
        current = dict(await conn.fetchrow(Q["quality_policy_get"], project_id) or {})
        merged = {**current, **checked}
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
        )


async def add_gold_items(
    db: Database, project_id: UUID, raw_tasks: Any, max_tasks: int, max_payload_bytes: int
) -> int:
    """Gold items added on their own: stored into the pool, no slots. Returns how many were new."""
    specs = v.task_specs(raw_tasks, max_tasks, max_payload_bytes)
    if not specs:
        raise BadInput("tasks must list at least one gold item", field="tasks")
    for i, s in enumerate(specs):
        if s.gold is None:
            raise BadInput(f"tasks[{i}].gold is required", field=f"tasks[{i}].gold")
    async with db.transaction() as conn:
        rows = await conn.fetch(
            Q["items_insert"],
            project_id,
            [uuid.uuid4() for _ in specs],
            [s.skill for s in specs],
            [s.external_id for s in specs],
            [s.payload for s in specs],
            [None] * len(specs),
            [len(s.payload_json.encode()) for s in specs],
            [s.gold for s in specs],
        )
    return len(rows)


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
    if not after.isdigit():
        raise BadInput("after must be a cursor returned by resultChanges", field="after")
    return int(after)


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
    """What an adjudicator is shown; None for any other task (gold looks like normal work)."""
    async with db.connection() as conn:
        kind = await conn.fetchval(Q["task_kind_for_expert"], task_id, expert_id)
        if kind != "adjudication":
            return None
        rows = await conn.fetch(Q["adjudication_prior_answers"], task_id, expert_id)
    return [r["answer"] for r in rows]


async def report(db: Database, project_id: UUID) -> dict[str, Any]:
    async with db.connection() as conn:
        policy = await conn.fetchrow(Q["quality_policy_get"], project_id)
        counts = await conn.fetchrow(Q["project_result_counts"], project_id)
        answers = await conn.fetch(Q["project_answers_for_report"], project_id)
    assert policy is not None and counts is not None
    units: dict[UUID, list[str]] = {}
    for r in answers:
        units.setdefault(r["item_id"], []).append(
            answer_key(r["answer"], policy["answer_field"]) or "\0missing"
        )
    return {
        **dict(counts),
        "krippendorff_alpha": krippendorff_alpha_nominal(list(units.values())),
    }
