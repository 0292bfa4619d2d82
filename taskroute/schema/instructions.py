"""Project instructions over GraphQL: `setInstructions`, `project { instructions
instructionsHistory }`, and the text a claim was given under (`task { instructions }`).
This module must not import `types` (types imports it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry

from taskroute.resolvers import instructions
from taskroute.resolvers.accounts.credentials import parse_id

from .context import Context

Info = strawberry.Info[Context, None]


@strawberry.type(description="One version of a project's instructions (Markdown).")
class Instructions:
    version: int
    markdown: str
    allow_remote_images: bool = strawberry.field(
        description="images from other origins may be shown (else only data: and same-origin)"
    )
    created_at: datetime

    @classmethod
    def of(cls, i: instructions.Instructions) -> Instructions:
        return cls(
            version=i.version,
            markdown=i.markdown,
            allow_remote_images=i.allow_remote_images,
            created_at=i.created_at,
        )


@strawberry.type(description="The instructions a claim was given under.")
class TaskInstructions:
    version: int
    markdown: str
    allow_remote_images: bool

    @classmethod
    def of(cls, i: instructions.Instructions) -> TaskInstructions:
        return cls(
            version=i.version, markdown=i.markdown, allow_remote_images=i.allow_remote_images
        )


async def project_instructions(root: strawberry.Parent[Any], info: Info) -> Instructions | None:
    found = await instructions.current(info.context.db, parse_id(root.id))
    return None if found is None else Instructions.of(found)


async def project_instructions_history(
    root: strawberry.Parent[Any], info: Info, first: int = 20
) -> list[Instructions]:
    found = await instructions.history(info.context.db, parse_id(root.id), first)
    return [Instructions.of(i) for i in found]


@strawberry.type
class InstructionsMutation:
    @strawberry.mutation(
        description="A new version of the project's instructions (Markdown, at most 64 KiB);"
        " earlier versions are kept. Claims from now on are given this version."
    )
    async def set_instructions(
        self,
        info: Info,
        project_id: strawberry.ID,
        markdown: str,
        allow_remote_images: bool = False,
    ) -> Instructions:
        viewer = await info.context.viewer()
        found = await instructions.set_instructions(
            info.context.db,
            viewer,
            parse_id(project_id, "project"),
            markdown,
            allow_remote_images,
        )
        return Instructions.of(found)
