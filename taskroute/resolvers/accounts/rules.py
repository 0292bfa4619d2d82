"""Accounts: customers and experts, their skills, status and credentials; the admin audit.

Every change an admin (or an account holder, for their own credentials) makes is written to
`admin_audit` in the same transaction as the change: who (`actor`), when, what, why.
Experts are never deleted: deactivation is a status change that releases their live leases
(the tasks go back to the pool, idle experts are woken) and, through a trigger, makes
every process drop their tokens, which stop authenticating (`credential_lookup`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import asyncpg

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import BadInput, Conflict, Forbidden, NotFound
from taskroute.realtime import notify
from taskroute.resolvers import cursors, paging
from taskroute.resolvers import validation as v
from taskroute.resolvers.accounts.credentials import Viewer, hash_token, new_token
from taskroute.resolvers.paging import Page

REASON_MAX = 1000
LABEL_MAX = 200
GRACE_MAX = 30 * 86400
EXPERT_STATUSES = ("active", "disabled")


@dataclass(frozen=True)
class Credential:
    id: UUID
    token: str


@dataclass(frozen=True)
class Issued:
    """A new credential: its row (no secret in it) and the token, shown this once."""

    row: asyncpg.Record
    token: str


async def audit(
    conn: asyncpg.Connection,
    actor: str,
    action: str,
    subject_kind: str,
    subject_id: UUID | None,
    reason: str | None,
    **details: Any,
) -> None:
    await conn.execute(
        Q["admin_audit_insert"],
        actor,
        action,
        subject_kind,
        subject_id,
        reason,
        # plain JSON values (ids and times as text); the pool's codec encodes them
        json.loads(json.dumps(details, default=str)),
    )


async def record(
    db: Database,
    actor: str,
    action: str,
    subject_kind: str,
    subject_id: UUID | None,
    reason: str | None,
    **details: Any,
) -> None:
    """An audit line on its own (for actions whose own transaction did not write one)."""
    async with db.connection() as conn:
        await audit(conn, actor, action, subject_kind, subject_id, reason, **details)


def _reason(raw: Any) -> str | None:
    return None if raw is None else v.text(raw, "reason", REASON_MAX)


# --- creating accounts ------------------------------------------------------------------


async def create_customer(db: Database, name: Any, actor: str = "admin-token") -> Credential:
    name = v.text(name, "name", v.NAME_MAX)
    token = new_token("c")
    async with db.transaction() as conn:
        cid = await conn.fetchval(Q["customer_insert"], name)
        row = await conn.fetchrow(
            Q["credential_insert"], hash_token(token), "customer", cid, None, "initial",
            None, False, None, None,
        )  # fmt: skip
        await audit(conn, actor, "customer.create", "customer", cid, None, name=name)
        await audit(conn, actor, "credential.create", "credential", row["id"], None,
                    customer_id=cid, label="initial")  # fmt: skip
    return Credential(cid, token)


def _skill_list(skills: Any) -> tuple[list[str], list[float]]:
    if not isinstance(skills, list) or not skills or len(skills) > 200:
        raise BadInput("skills must list 1-200 skills", field="skills")
    names: list[str] = []
    qualities: list[float] = []
    for i, s in enumerate(skills):
        if not isinstance(s, dict):
            raise BadInput(f"skills[{i}] must be an object", field="skills")
        names.append(v.skill(s.get("skill"), f"skills[{i}].skill"))
        qualities.append(v.number(s.get("quality", 1.0), f"skills[{i}].quality", 0.0, 1.0))
    if len(set(names)) != len(names):
        raise BadInput("a skill is listed twice", field="skills")
    return names, qualities


def _capabilities(raw: Any) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > 100:
        raise BadInput("capabilities must list at most 100 tags", field="capabilities")
    return sorted({v.skill(c, "capabilities") for c in raw})


async def create_expert(
    db: Database, name: Any, skills: Any, capabilities: Any = None, actor: str = "admin-token"
) -> Credential:
    name = v.text(name, "name", v.NAME_MAX)
    names, qualities = _skill_list(skills)
    caps = _capabilities(capabilities)
    token = new_token("e")
    async with db.transaction() as conn:
        eid = await conn.fetchval(Q["expert_insert"], name, caps)
        await conn.execute(Q["expert_skills_insert"], eid, names, qualities)
        row = await conn.fetchrow(
            Q["credential_insert"], hash_token(token), "expert", None, eid, "initial",
            None, False, None, None,
        )  # fmt: skip
        await audit(conn, actor, "expert.create", "expert", eid, None, name=name,
                    skills=dict(zip(names, qualities, strict=True)), capabilities=caps)  # fmt: skip
        await audit(conn, actor, "credential.create", "credential", row["id"], None,
                    expert_id=eid, label="initial")  # fmt: skip
    return Credential(eid, token)


# --- reading accounts ---------------------------------------------------------------------


def _keyset(kind: str) -> Callable[[asyncpg.Record], str]:
    """The cursor of a newest-first listing of `kind`: (created_at, id)."""
    return lambda row: cursors.encode_keyset(kind, row["created_at"], row["id"])


def _after(kind: str, raw: str | None) -> tuple[datetime | None, UUID | None]:
    if raw is None:
        return None, None
    return cursors.decode_keyset(raw, kind)


def _search(raw: Any) -> str | None:
    if raw is None:
        return None
    text = v.text(raw, "search", v.NAME_MAX)
    # LIKE's wildcards match themselves
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


async def experts_page(
    db: Database, skill: Any, status: Any, search: Any, after: str | None, first: Any
) -> Page[asyncpg.Record]:
    skill = None if skill is None else v.skill(skill)
    if status is not None and status not in EXPERT_STATUSES:
        raise BadInput(f"status must be one of {', '.join(EXPERT_STATUSES)}", field="status")
    first = paging.size(first)
    at, rid = _after("expert", after)
    return await paging.read(
        db, "experts_page", skill, status, _search(search), at, rid,
        first=first, cursor=_keyset("expert"),
    )  # fmt: skip


async def customers_page(
    db: Database, search: Any, after: str | None, first: Any
) -> Page[asyncpg.Record]:
    first = paging.size(first)
    at, rid = _after("customer", after)
    return await paging.read(
        db, "customers_page", _search(search), at, rid, first=first, cursor=_keyset("customer")
    )


async def get_expert(db: Any, expert_id: UUID) -> asyncpg.Record:
    row = await db.fetchrow(Q["expert_get"], expert_id)
    if row is None:
        raise NotFound("no such expert")
    return row


async def experts_named(db: Database, name: str, limit: int) -> list[asyncpg.Record]:
    """Experts whose whole name is `name`, ignoring case (names are not unique)."""
    return await db.fetch(Q["experts_named"], v.text(name, "name", v.NAME_MAX), limit)


async def get_customer(db: Any, customer_id: UUID) -> asyncpg.Record:
    row = await db.fetchrow(Q["customer_get"], customer_id)
    if row is None:
        raise NotFound("no such customer")
    return row


async def expert_skills(db: Database, expert_id: UUID) -> list[asyncpg.Record]:
    return await db.fetch(Q["expert_skills_list"], expert_id)


async def own_skills(db: Database, expert_id: UUID, period: int, min_gold: int) -> list[Any]:
    """The expert's skills as the expert is shown them: gold figures and quality from gold
    answers of past periods only, in bulk (queries/accounts.sql: expert_skills_own_view)."""
    return await db.fetch(Q["expert_skills_own_view"], expert_id, max(1, period), min_gold)


async def current_claim(db: Database, expert_id: UUID) -> asyncpg.Record | None:
    return await db.fetchrow(Q["expert_current_claim"], expert_id)


async def projects_summary(
    db: Database, customer_id: UUID, project_id: UUID | None = None
) -> asyncpg.Record:
    """Over every project of the customer, or over `project_id` alone (a project token's)."""
    row = await db.fetchrow(Q["customer_projects_summary"], customer_id, project_id)
    assert row is not None
    return row


# --- changing experts (admins) --------------------------------------------------------------


async def _locked_expert(conn: asyncpg.Connection, expert_id: UUID) -> asyncpg.Record:
    row = await conn.fetchrow(Q["expert_get_for_update"], expert_id)
    if row is None:
        raise NotFound("no such expert")
    return row


async def grant_skill(
    db: Database, actor: str, expert_id: UUID, skill: Any, quality: Any, reason: Any
) -> None:
    """The expert may claim the skill's tasks at once (the claim reads expert_skills)."""
    skill = v.skill(skill)
    quality = v.number(quality, "quality", 0.0, 1.0)
    reason = _reason(reason)
    async with db.transaction() as conn:
        await _locked_expert(conn, expert_id)
        if await conn.fetchval(Q["expert_skill_grant"], expert_id, skill, quality) is None:
            raise Conflict("the expert already holds this skill", field="skill")
        await audit(conn, actor, "skill.grant", "expert", expert_id, reason,
                    skill=skill, quality=quality)  # fmt: skip


async def remove_skill(db: Database, actor: str, expert_id: UUID, skill: Any, reason: Any) -> None:
    """The expert's live claims on the skill go back to the pool; what gold measured is kept
    in the audit line (answers, payouts and labels stay where they are)."""
    skill = v.skill(skill)
    reason = _reason(reason)
    async with db.transaction() as conn:
        await _locked_expert(conn, expert_id)
        released = await conn.fetch(Q["leases_release_for_skill"], expert_id, skill)
        row = await conn.fetchrow(Q["expert_skill_remove"], expert_id, skill)
        if row is None:
            raise NotFound("the expert does not hold this skill")
        await notify.leases_released(conn, released)
        await audit(conn, actor, "skill.remove", "expert", expert_id, reason, skill=skill,
                    quality=row["quality"], gold_seen=row["gold_seen"],
                    gold_correct=row["gold_correct"], tasks_done=row["tasks_done"],
                    status=row["status"], leases_released=len(released))  # fmt: skip


async def set_starting_quality(
    db: Database,
    actor: str,
    expert_id: UUID,
    skill: Any,
    quality: Any,
    override_measured: bool,
    reason: Any,
) -> None:
    """The admin-given quality an expert holds until gold measures it. Once gold has measured
    it, it is overwritten only when asked to (`override_measured`), and the audit says so."""
    skill = v.skill(skill)
    quality = v.number(quality, "quality", 0.0, 1.0)
    reason = _reason(reason)
    async with db.transaction() as conn:
        await _locked_expert(conn, expert_id)
        row = await conn.fetchrow(Q["expert_skill_get_for_update"], expert_id, skill)
        if row is None:
            raise NotFound("the expert does not hold this skill")
        measured = row["gold_seen"] > 0
        if measured and not override_measured:
            raise Conflict(
                f"quality {row['quality']:.3f} was measured on {row['gold_seen']} gold "
                "answers; pass overrideMeasured to overwrite it",
                field="quality",
                measured_quality=row["quality"],
                gold_seen=row["gold_seen"],
            )
        await conn.execute(Q["expert_skill_set_quality"], expert_id, skill, quality)
        await audit(conn, actor, "skill.set_quality", "expert", expert_id, reason, skill=skill,
                    quality=quality, previous=row["quality"],
                    overrode_measured=measured, gold_seen=row["gold_seen"])  # fmt: skip


async def set_capabilities(
    db: Database, actor: str, expert_id: UUID, capabilities: Any, reason: Any
) -> None:
    caps = _capabilities(capabilities)
    reason = _reason(reason)
    async with db.transaction() as conn:
        before = await _locked_expert(conn, expert_id)
        await conn.execute(Q["expert_set_capabilities"], expert_id, caps)
        await audit(conn, actor, "expert.set_capabilities", "expert", expert_id, reason,
                    capabilities=caps, previous=list(before["capabilities"]))  # fmt: skip


async def set_status(db: Database, actor: str, expert_id: UUID, status: str, reason: Any) -> int:
    """Deactivate ('disabled') or reactivate ('active'); returns the leases released.

    Deactivation: the status change makes every process drop the expert's tokens (a
    trigger) and closes their WebSockets; their live claims go back to the pool and idle
    experts are woken (hints leave when this commits)."""
    assert status in EXPERT_STATUSES
    reason = _reason(reason)
    async with db.transaction() as conn:
        before = await _locked_expert(conn, expert_id)
        if before["status"] == status:
            raise Conflict(f"the expert is already {status}", field="expertId")
        await conn.execute(Q["expert_set_status"], expert_id, status)
        released: list[asyncpg.Record] = []
        if status == "disabled":
            released = await conn.fetch(Q["leases_release_for_expert"], expert_id)
            await notify.leases_released(conn, released)
        action = "expert.deactivate" if status == "disabled" else "expert.reactivate"
        await audit(conn, actor, action, "expert", expert_id, reason,
                    leases_released=[str(r["assignment_id"]) for r in released])  # fmt: skip
    for project_id in {r["project_id"] for r in released}:
        notify.progress_changed(project_id)
    return len(released)


# --- credentials -------------------------------------------------------------------------


def _may_manage(viewer: Viewer, row: asyncpg.Record) -> bool:
    """Admins manage every credential; an account holder their own account's, and a token
    limited to one project only that project's tokens (its scope is a ceiling)."""
    if viewer.role == "admin":
        return True
    if viewer.role == "customer":
        mine = row["customer_id"] == viewer.customer_id
        return bool(mine and (viewer.project_id is None or row["project_id"] == viewer.project_id))
    return viewer.role == "expert" and bool(row["expert_id"] == viewer.expert_id)


def _owner(viewer: Viewer, customer_id: UUID | None, expert_id: UUID | None) -> tuple[str, Any]:
    """Whose credential to create: admins name the account, others get their own."""
    if viewer.role == "admin":
        if (customer_id is None) == (expert_id is None):
            raise BadInput("give exactly one of customerId and expertId", field="customerId")
        return ("customer", customer_id) if customer_id is not None else ("expert", expert_id)
    if customer_id is not None or expert_id is not None:
        mine = viewer.customer_id if viewer.role == "customer" else viewer.expert_id
        if mine not in (customer_id, expert_id):
            raise NotFound("no such account")
    if viewer.role == "customer" and viewer.customer_id is not None:
        # a project token acts on its own account too, within its project (callers check)
        return "customer", viewer.customer_id
    return "expert", viewer.require_expert()


async def list_credentials(
    db: Database, viewer: Viewer, customer_id: UUID | None, expert_id: UUID | None
) -> list[asyncpg.Record]:
    """The account's credentials; a project token sees only its project's."""
    if viewer.role != "admin" or (customer_id is None and expert_id is None):
        role, owner = _owner(viewer, customer_id, expert_id)
        customer_id, expert_id = (owner, None) if role == "customer" else (None, owner)
    return await db.fetch(Q["credentials_of"], customer_id, expert_id, viewer.project_id)


def _expiry(expires_at: datetime | None) -> datetime | None:
    if expires_at is None:
        return None
    if expires_at.tzinfo is None:
        raise BadInput("expiresAt must carry a time zone", field="expiresAt")
    if expires_at <= datetime.now(UTC):
        raise BadInput("expiresAt must be in the future", field="expiresAt")
    return expires_at


async def create_credential(
    db: Database,
    viewer: Viewer,
    actor: str,
    *,
    customer_id: UUID | None = None,
    expert_id: UUID | None = None,
    label: Any = "",
    expires_at: datetime | None = None,
    read_only: bool = False,
    project_id: UUID | None = None,
    reason: Any = None,
) -> Issued:
    role, owner = _owner(viewer, customer_id, expert_id)
    label = "" if label in (None, "") else v.text(label, "label", LABEL_MAX)
    expires_at = _expiry(expires_at)
    reason = _reason(reason)
    if viewer.project_id is not None and project_id != viewer.project_id:
        # a project token issues tokens of its own project only, never wider ones
        if project_id is None:
            raise Forbidden(
                "this token is limited to one project", project_id=str(viewer.project_id)
            )
        raise NotFound("no such project")
    if project_id is not None:
        if role != "customer":
            raise BadInput("only customer tokens can be limited to a project", field="projectId")
        project = await db.fetchrow(Q["project_get"], project_id, owner)
        if project is None:
            raise NotFound("no such project")
    if read_only and role != "customer":
        raise BadInput("read-only tokens are for customers' dashboards", field="readOnly")
    token = new_token("c" if role == "customer" else "e")
    async with db.transaction() as conn:
        if role == "expert":
            await _locked_expert(conn, owner)
        elif await conn.fetchrow(Q["customer_get"], owner) is None:
            raise NotFound("no such customer")
        row = await conn.fetchrow(
            Q["credential_insert"],
            hash_token(token),
            role,
            owner if role == "customer" else None,
            owner if role == "expert" else None,
            label,
            expires_at,
            read_only,
            project_id,
            None,
        )
        await audit(conn, actor, "credential.create", "credential", row["id"], reason,
                    owner=str(owner), role=role, label=label, expires_at=expires_at,
                    read_only=read_only, project_id=project_id)  # fmt: skip
    return Issued(row, token)


async def _managed(conn: asyncpg.Connection, viewer: Viewer, credential_id: UUID) -> Any:
    row = await conn.fetchrow(Q["credential_get_for_update"], credential_id)
    if row is None or not _may_manage(viewer, row):
        raise NotFound("no such credential")
    return row


async def revoke_credential(
    db: Database, viewer: Viewer, actor: str, credential_id: UUID, reason: Any
) -> asyncpg.Record:
    """Every process refuses the token within about a second (a trigger), and closes its
    WebSockets. Revoking twice is allowed and keeps the first time."""
    reason = _reason(reason)
    async with db.transaction() as conn:
        before = await _managed(conn, viewer, credential_id)
        await conn.execute(Q["credential_revoke"], credential_id)
        if before["revoked_at"] is None:
            await audit(conn, actor, "credential.revoke", "credential", credential_id, reason)
        return await conn.fetchrow(Q["credential_get"], credential_id)


async def rotate_credential(
    db: Database, viewer: Viewer, actor: str, credential_id: UUID, grace_seconds: Any, reason: Any
) -> Issued:
    """A new token with the same owner, label and scope; the old one keeps working for
    `grace_seconds` (0: stops now), then expires."""
    grace = v.integer(grace_seconds, "graceSeconds", 0, GRACE_MAX)
    reason = _reason(reason)
    async with db.transaction() as conn:
        old = await _managed(conn, viewer, credential_id)
        now = datetime.now(UTC)
        if old["revoked_at"] is not None or (old["expires_at"] and old["expires_at"] <= now):
            raise Conflict("a revoked or expired credential cannot be rotated", field="id")
        token = new_token("c" if old["role"] == "customer" else "e")
        row = await conn.fetchrow(
            Q["credential_insert"], hash_token(token), old["role"], old["customer_id"],
            old["expert_id"], old["label"], old["expires_at"], old["read_only"],
            old["project_id"], old["id"],
        )  # fmt: skip
        # The database's clock decides expiry (credential_lookup compares with now()).
        expired = await conn.fetchrow(Q["credential_expire_in"], credential_id, float(grace))
        old_until = expired["expires_at"]
        await audit(conn, actor, "credential.rotate", "credential", credential_id, reason,
                    new_credential_id=row["id"], old_valid_until=old_until)  # fmt: skip
    return Issued(row, token)


async def get_credential(db: Database, credential_id: UUID) -> asyncpg.Record:
    row = await db.fetchrow(Q["credential_get"], credential_id)
    if row is None:
        raise NotFound("no such credential")
    return row


# --- the audit ----------------------------------------------------------------------------


async def audit_page(
    db: Database, subject_id: UUID | None, action: Any, actor: Any, after: str | None, first: Any
) -> Page[asyncpg.Record]:
    """The admin audit, oldest first."""
    first = paging.size(first)
    action = None if action is None else v.text(action, "action", 100)
    actor = None if actor is None else v.text(actor, "actor", 200)
    seq = 0 if after is None else cursors.decode_seq(after, "audit")
    return await paging.read(
        db, "admin_audit_page", subject_id, action, actor, seq,
        first=first, cursor=lambda r: cursors.encode("audit", str(r["seq"])),
    )  # fmt: skip
