"""Accounts over GraphQL: `me`, the admins' expert and customer lists, skill and
status changes, credentials (create, revoke, rotate, scoped), and the admin audit.

What runs around every mutation (read-only tokens, the admin audit) is in mutation_hooks.py;
closing a WebSocket whose token stops authenticating, in socket_watch.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry
from strawberry.relay import PageInfo

from taskroute.resolvers import claims
from taskroute.resolvers.accounts import rules as accounts
from taskroute.resolvers.accounts.credentials import (
    Viewer,
    parse_id,
)
from taskroute.schema.paging import page_info

from .context import Context
from .inputs import SkillInput, as_dict
from .my_work import Earnings, WorkConnection, expert_earnings, expert_work
from .types import Credential

Info = strawberry.Info[Context, None]


def _id(value: Any) -> strawberry.ID | None:
    return None if value is None else strawberry.ID(str(value))


# --- types ----------------------------------------------------------------------------------


@strawberry.type
class AccountSkill:
    skill: str
    status: str = strawberry.field(description="'active' or 'paused'")
    pause_reason: str | None
    status_at: datetime | None
    quality: float = strawberry.field(description="the estimate the claim compares")
    quality_source: str = strawberry.field(
        description="'admin' (the starting quality an admin gave) or 'gold' (measured)"
    )
    gold_seen: int
    gold_correct: int
    tasks_done: int

    @classmethod
    def of(cls, r: Any) -> AccountSkill:
        return cls(
            skill=r["skill"],
            status=r["status"],
            pause_reason=r["status_reason"] if r["status"] == "paused" else None,
            status_at=r["status_at"],
            quality=r["quality"],
            quality_source="gold" if r.get("measured", r["gold_seen"] > 0) else "admin",
            gold_seen=r["gold_seen"],
            gold_correct=r["gold_correct"],
            tasks_done=r["tasks_done"],
        )


@strawberry.type
class CurrentClaim:
    assignment_id: strawberry.ID
    task_id: strawberry.ID
    project_id: strawberry.ID
    skill: str
    claimed_at: datetime
    lease_until: datetime


@strawberry.type
class Expert:
    id: strawberry.ID
    name: str
    status: str = strawberry.field(description="'active' or 'disabled'")
    capabilities: list[str]
    created_at: datetime
    last_seen_at: datetime | None

    @classmethod
    def of(cls, r: Any) -> Expert:
        return cls(
            id=strawberry.ID(str(r["id"])),
            name=r["name"],
            status=r["status"],
            capabilities=list(r["capabilities"]),
            created_at=r["created_at"],
            last_seen_at=r["last_seen_at"],
        )

    @strawberry.field(
        description="Admins: the live figures. The expert's own view counts only gold answers "
        "of past periods, once there are enough (TASKROUTE_EXPERT_QUALITY_PERIOD, "
        "TASKROUTE_EXPERT_QUALITY_MIN_GOLD), so no single answer moves it."
    )
    async def skills(self, info: Info) -> list[AccountSkill]:
        expert_id = parse_id(self.id)
        db = info.context.db
        viewer = await info.context.viewer()
        if viewer.role == "admin":
            rows = await accounts.expert_skills(db, expert_id)
        else:
            # anyone else (the expert, through `me`) gets the delayed, aggregated figures
            settings = info.context.settings
            rows = await accounts.own_skills(
                db, expert_id, settings.expert_quality_period, settings.expert_quality_min_gold
            )
        return [AccountSkill.of(r) for r in rows]

    @strawberry.field(
        description="Releases (skip, can't answer, bad item) this expert may still make in the"
        " current hour (TASKROUTE_RELEASES_PER_HOUR)."
    )
    async def releases_left(self, info: Info) -> int:
        left, _ = await claims.releases_left(
            info.context.db, parse_id(self.id), info.context.settings.releases_per_hour
        )
        return left

    @strawberry.field(
        description="When the oldest release counted in the hour stops counting (null: none)."
    )
    async def releases_reset_at(self, info: Info) -> datetime | None:
        _, at = await claims.releases_left(
            info.context.db, parse_id(self.id), info.context.settings.releases_per_hour
        )
        return at

    work: WorkConnection = strawberry.field(
        resolver=expert_work,
        description="The expert's submitted answers, newest first, with their pay state"
        " (the expert themself, or an admin).",
    )
    earnings: Earnings = strawberry.field(
        resolver=expert_earnings, description="Totals of the expert's work and bonuses."
    )

    @strawberry.field(description="The live claim, if any.")
    async def current_claim(self, info: Info) -> CurrentClaim | None:
        r = await accounts.current_claim(info.context.db, parse_id(self.id))
        if r is None:
            return None
        return CurrentClaim(
            assignment_id=strawberry.ID(str(r["assignment_id"])),
            task_id=strawberry.ID(str(r["task_id"])),
            project_id=strawberry.ID(str(r["project_id"])),
            skill=r["skill"],
            claimed_at=r["claimed_at"],
            lease_until=r["lease_until"],
        )


@strawberry.type
class ProjectsSummary:
    projects: int
    active: int
    completed: int
    canceled: int
    tasks: int
    done: int
    remaining: int


@strawberry.type
class Customer:
    id: strawberry.ID
    name: str
    created_at: datetime

    @classmethod
    def of(cls, r: Any) -> Customer:
        return cls(id=strawberry.ID(str(r["id"])), name=r["name"], created_at=r["created_at"])

    @strawberry.field
    async def projects_summary(self, info: Info) -> ProjectsSummary:
        viewer = await info.context.viewer()
        # a project token's summary counts its own project only
        limit = viewer.project_id if viewer.role == "customer" else None
        r = await accounts.projects_summary(info.context.db, parse_id(self.id), limit)
        return ProjectsSummary(**{k: r[k] for k in ProjectsSummary.__annotations__})


@strawberry.type
class CredentialInfo:
    """A credential without its secret (the token is shown once, when it is issued)."""

    id: strawberry.ID
    role: str
    label: str
    customer_id: strawberry.ID | None
    expert_id: strawberry.ID | None
    read_only: bool
    project_id: strawberry.ID | None = strawberry.field(
        description="set: the token may use this one project only"
    )
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None = strawberry.field(
        description="recorded at most about once a minute"
    )
    rotated_from: strawberry.ID | None

    @classmethod
    def of(cls, r: Any) -> CredentialInfo:
        return cls(
            id=strawberry.ID(str(r["id"])),
            role=r["role"],
            label=r["label"],
            customer_id=_id(r["customer_id"]),
            expert_id=_id(r["expert_id"]),
            read_only=r["read_only"],
            project_id=_id(r["project_id"]),
            created_at=r["created_at"],
            expires_at=r["expires_at"],
            revoked_at=r["revoked_at"],
            last_used_at=r.get("last_used_at") if hasattr(r, "get") else None,
            rotated_from=_id(r["rotated_from"]),
        )


@strawberry.type
class IssuedCredential:
    credential: CredentialInfo
    token: str = strawberry.field(description="shown this once; only its hash is stored")


@strawberry.type
class Me:
    role: str
    id: strawberry.ID | None = strawberry.field(
        description="the expert's or customer's id (null for the configured admin token)"
    )
    name: str | None
    credential_id: strawberry.ID | None
    read_only: bool
    project_id: strawberry.ID | None
    expires_at: datetime | None
    expert: Expert | None
    customer: Customer | None


@strawberry.type
class AdminAuditEntry:
    seq: int
    at: datetime
    actor: str
    action: str
    subject_kind: str
    subject_id: strawberry.ID | None
    reason: str | None
    details: strawberry.scalars.JSON


@strawberry.type
class ExpertEdge:
    cursor: str
    node: Expert


@strawberry.type
class ExpertConnection:
    edges: list[ExpertEdge]
    page_info: PageInfo


@strawberry.type
class CustomerEdge:
    cursor: str
    node: Customer


@strawberry.type
class CustomerConnection:
    edges: list[CustomerEdge]
    page_info: PageInfo


@strawberry.type
class AdminAuditEdge:
    cursor: str
    node: AdminAuditEntry


@strawberry.type
class AdminAuditConnection:
    edges: list[AdminAuditEdge]
    page_info: PageInfo


def _opt_id(raw: strawberry.ID | None, what: str) -> Any:
    return None if raw is None else parse_id(raw, what)


# --- queries ------------------------------------------------------------------------------


@strawberry.type
class AccountsQuery:
    @strawberry.field(description="Who the caller is and what they may do.")
    async def me(self, info: Info) -> Me:
        viewer = await info.context.viewer()
        db = info.context.db
        expert = customer = None
        name = None
        if viewer.expert_id is not None:
            expert = Expert.of(await accounts.get_expert(db, viewer.expert_id))
            name = expert.name
        if viewer.customer_id is not None:
            customer = Customer.of(await accounts.get_customer(db, viewer.customer_id))
            name = customer.name
        return Me(
            role=viewer.role,
            id=_id(viewer.expert_id or viewer.customer_id),
            name=name,
            credential_id=_id(viewer.credential_id),
            read_only=viewer.read_only,
            project_id=_id(viewer.project_id),
            expires_at=viewer.expires_at,
            expert=expert,
            customer=customer,
        )

    @strawberry.field(description="Admins: experts, newest first, by skill, status, name.")
    async def experts(
        self,
        info: Info,
        skill: str | None = None,
        status: str | None = None,
        search: str | None = None,
        after: str | None = None,
        first: int = 50,
    ) -> ExpertConnection:
        (await info.context.viewer()).require_admin()
        found = await accounts.experts_page(info.context.db, skill, status, search, after, first)
        edges = [ExpertEdge(cursor=c, node=Expert.of(r)) for c, r in found.pairs()]
        return ExpertConnection(edges=edges, page_info=page_info(found, after))

    @strawberry.field(description="Admins: one expert.")
    async def expert(self, info: Info, id: strawberry.ID) -> Expert:
        (await info.context.viewer()).require_admin()
        return Expert.of(await accounts.get_expert(info.context.db, parse_id(id, "expert")))

    @strawberry.field(description="Admins: customers, newest first, by name.")
    async def customers(
        self,
        info: Info,
        search: str | None = None,
        after: str | None = None,
        first: int = 50,
    ) -> CustomerConnection:
        (await info.context.viewer()).require_admin()
        found = await accounts.customers_page(info.context.db, search, after, first)
        edges = [CustomerEdge(cursor=c, node=Customer.of(r)) for c, r in found.pairs()]
        return CustomerConnection(edges=edges, page_info=page_info(found, after))

    @strawberry.field(
        description="Credentials of an account (admins: name it; others: their own), "
        "newest first. Never the tokens."
    )
    async def credentials(
        self,
        info: Info,
        customer_id: strawberry.ID | None = None,
        expert_id: strawberry.ID | None = None,
    ) -> list[CredentialInfo]:
        viewer = await info.context.viewer()
        rows = await accounts.list_credentials(
            info.context.db,
            viewer,
            _opt_id(customer_id, "customer"),
            _opt_id(expert_id, "expert"),
        )
        return [CredentialInfo.of(r) for r in rows]

    @strawberry.field(description="Admins: the audit of admin actions, oldest first.")
    async def admin_audit(
        self,
        info: Info,
        subject_id: strawberry.ID | None = None,
        action: str | None = None,
        actor: str | None = None,
        after: str | None = None,
        first: int = 100,
    ) -> AdminAuditConnection:
        (await info.context.viewer()).require_admin()
        found = await accounts.audit_page(
            info.context.db, _opt_id(subject_id, "subject"), action, actor,
            after, first,
        )  # fmt: skip
        edges = [
            AdminAuditEdge(
                cursor=c,
                node=AdminAuditEntry(
                    seq=r["seq"],
                    at=r["at"],
                    actor=r["actor"],
                    action=r["action"],
                    subject_kind=r["subject_kind"],
                    subject_id=_id(r["subject_id"]),
                    reason=r["reason"],
                    details=r["details"],
                ),
            )
            for c, r in found.pairs()
        ]
        return AdminAuditConnection(edges=edges, page_info=page_info(found, after))


# --- mutations ----------------------------------------------------------------------------


async def _admin(info: Info) -> Viewer:
    viewer = await info.context.viewer()
    viewer.require_admin()
    return viewer


async def _expert(info: Info, expert_id: Any) -> Expert:
    return Expert.of(await accounts.get_expert(info.context.db, expert_id))


@strawberry.type
class DeactivatePayload:
    expert: Expert
    leases_released: int


@strawberry.type
class AccountCreationMutation:
    """The admin's first step for anyone: a customer or an expert, with their first token."""

    @strawberry.mutation
    async def create_customer(self, info: Info, name: str) -> Credential:
        (await info.context.viewer()).require_admin()
        return Credential.of(await accounts.create_customer(info.context.db, name))

    @strawberry.mutation
    async def create_expert(
        self,
        info: Info,
        name: str,
        skills: list[SkillInput],
        capabilities: list[str] | None = None,
    ) -> Credential:
        (await info.context.viewer()).require_admin()
        cred = await accounts.create_expert(
            info.context.db, name, [as_dict(sk) for sk in skills], capabilities
        )
        return Credential.of(cred)


@strawberry.type
class AccountsMutation:
    @strawberry.mutation(description="Admins: the expert may claim the skill's tasks at once.")
    async def grant_skill(
        self,
        info: Info,
        expert_id: strawberry.ID,
        skill: str,
        quality: float = 1.0,
        reason: str | None = None,
    ) -> Expert:
        viewer = await _admin(info)
        eid = parse_id(expert_id, "expert")
        await accounts.grant_skill(info.context.db, viewer.actor, eid, skill, quality, reason)
        return await _expert(info, eid)

    @strawberry.mutation(description="Admins: take a skill away (live claims on it return).")
    async def remove_skill(
        self, info: Info, expert_id: strawberry.ID, skill: str, reason: str | None = None
    ) -> Expert:
        viewer = await _admin(info)
        eid = parse_id(expert_id, "expert")
        await accounts.remove_skill(info.context.db, viewer.actor, eid, skill, reason)
        return await _expert(info, eid)

    @strawberry.mutation(
        description="Admins: the starting quality of a skill. Refused (CONFLICT) once gold has "
        "measured it, unless overrideMeasured: the audit then records what was overwritten."
    )
    async def set_starting_quality(
        self,
        info: Info,
        expert_id: strawberry.ID,
        skill: str,
        quality: float,
        override_measured: bool = False,
        reason: str | None = None,
    ) -> Expert:
        viewer = await _admin(info)
        eid = parse_id(expert_id, "expert")
        await accounts.set_starting_quality(
            info.context.db, viewer.actor, eid, skill, quality, override_measured, reason
        )
        return await _expert(info, eid)

    @strawberry.mutation(description="Admins: replace the expert's capability tags.")
    async def set_capabilities(
        self,
        info: Info,
        expert_id: strawberry.ID,
        capabilities: list[str],
        reason: str | None = None,
    ) -> Expert:
        viewer = await _admin(info)
        eid = parse_id(expert_id, "expert")
        await accounts.set_capabilities(info.context.db, viewer.actor, eid, capabilities, reason)
        return await _expert(info, eid)

    @strawberry.mutation(
        description="Admins: the expert's tokens stop working, their subscriptions close and "
        "their live claims return to the pool. History, payouts and labels stay."
    )
    async def deactivate_expert(
        self, info: Info, expert_id: strawberry.ID, reason: str
    ) -> DeactivatePayload:
        viewer = await _admin(info)
        eid = parse_id(expert_id, "expert")
        n = await accounts.set_status(info.context.db, viewer.actor, eid, "disabled", reason)
        return DeactivatePayload(expert=await _expert(info, eid), leases_released=n)

    @strawberry.mutation(description="Admins: the expert's tokens work again.")
    async def reactivate_expert(
        self, info: Info, expert_id: strawberry.ID, reason: str | None = None
    ) -> Expert:
        viewer = await _admin(info)
        eid = parse_id(expert_id, "expert")
        await accounts.set_status(info.context.db, viewer.actor, eid, "active", reason)
        return await _expert(info, eid)

    @strawberry.mutation(
        description="A new token (admins: for the named account; others: for their own). "
        "readOnly: reads only (customers' dashboards); projectId: one project only."
    )
    async def create_credential(
        self,
        info: Info,
        label: str | None = None,
        customer_id: strawberry.ID | None = None,
        expert_id: strawberry.ID | None = None,
        expires_at: datetime | None = None,
        read_only: bool = False,
        project_id: strawberry.ID | None = None,
        reason: str | None = None,
    ) -> IssuedCredential:
        viewer = await info.context.viewer()
        issued = await accounts.create_credential(
            info.context.db,
            viewer,
            viewer.actor,
            customer_id=_opt_id(customer_id, "customer"),
            expert_id=_opt_id(expert_id, "expert"),
            label=label,
            expires_at=expires_at,
            read_only=read_only,
            project_id=_opt_id(project_id, "project"),
            reason=reason,
        )
        return IssuedCredential(credential=CredentialInfo.of(issued.row), token=issued.token)

    @strawberry.mutation(
        description="The token stops working on every server within a second; its "
        "WebSocket connections close."
    )
    async def revoke_credential(
        self, info: Info, id: strawberry.ID, reason: str | None = None
    ) -> CredentialInfo:
        viewer = await info.context.viewer()
        row = await accounts.revoke_credential(
            info.context.db, viewer, viewer.actor, parse_id(id, "credential"), reason
        )
        return CredentialInfo.of(row)

    @strawberry.mutation(
        description="A new token with the same owner and scope; the old one keeps working "
        "for graceSeconds (default one hour, 0: stops now), then expires."
    )
    async def rotate_credential(
        self,
        info: Info,
        id: strawberry.ID,
        grace_seconds: int = 3600,
        reason: str | None = None,
    ) -> IssuedCredential:
        viewer = await info.context.viewer()
        issued = await accounts.rotate_credential(
            info.context.db, viewer, viewer.actor, parse_id(id, "credential"), grace_seconds,
            reason,
        )  # fmt: skip
        return IssuedCredential(credential=CredentialInfo.of(issued.row), token=issued.token)
