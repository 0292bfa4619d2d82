"""Creating customers and experts, each with a fresh bearer token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from taskroute.auth import hash_token, new_token
from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.errors import BadInput
from taskroute.resolvers import validation as v


@dataclass(frozen=True)
class Credential:
    id: UUID
    token: str


async def create_customer(db: Database, name: Any) -> Credential:
    name = v.text(name, "name", v.NAME_MAX)
    token = new_token("c")
    async with db.transaction() as conn:
        cid = await conn.fetchval(Q["customer_insert"], name)
        await conn.execute(Q["credential_insert"], hash_token(token), "customer", cid, None)
    return Credential(cid, token)


async def create_expert(
    db: Database, name: Any, skills: Any, capabilities: Any = None
) -> Credential:
    name = v.text(name, "name", v.NAME_MAX)
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
    caps = [v.skill(c, "capabilities") for c in (capabilities or [])]
    token = new_token("e")
    async with db.transaction() as conn:
        eid = await conn.fetchval(Q["expert_insert"], name, caps)
        await conn.execute(Q["expert_skills_insert"], eid, names, qualities)
        await conn.execute(Q["credential_insert"], hash_token(token), "expert", None, eid)
    return Credential(eid, token)
