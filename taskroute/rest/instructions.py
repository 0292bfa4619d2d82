"""REST: a project's instructions for experts (versioned Markdown)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from taskroute.resolvers import instructions
from taskroute.resolvers.accounts.credentials import parse_id

from .common import api_route, declared_body, services, viewer
from .contract import BOOLEAN, INTEGER, STRING, TIME, UUID, Operation, Reply, obj

SET_INSTRUCTIONS = Operation(
    "PUT",
    "/v1/projects/{id}/instructions",
    "A new version of the project's instructions for experts (Markdown)",
    auth="customer or admin",
    tag="projects",
    description="Older versions are kept; each claim records and returns the version current "
    "when it was made.",
    body=obj(
        {
            "markdown": {
                "type": "string",
                "maxLength": instructions.MAX_INSTRUCTIONS_BYTES,
                "description": f"at most {instructions.MAX_INSTRUCTIONS_BYTES} bytes of UTF-8",
            }
        },
        {
            "allow_remote_images": {
                "type": "boolean",
                "default": False,
                "description": "the workbench shows https images from other origins",
            }
        },
    ),
    replies={
        200: Reply(
            "the new version",
            obj(
                {
                    "project_id": UUID,
                    "version": INTEGER,
                    "markdown": STRING,
                    "allow_remote_images": BOOLEAN,
                    "created_at": TIME,
                }
            ),
        )
    },
)


def instructions_json(i: instructions.Instructions) -> dict[str, Any]:
    return {
        "version": i.version,
        "markdown": i.markdown,
        "allow_remote_images": i.allow_remote_images,
        "created_at": i.created_at.isoformat(),
    }


async def set_instructions(request: Request) -> Response:
    who = await viewer(request)
    project_id = parse_id(request.path_params["id"], "project")
    body = await declared_body(request, SET_INSTRUCTIONS)
    found = await instructions.set_instructions(
        services(request).db,
        who,
        project_id,
        body["markdown"],
        body.get("allow_remote_images", False),
    )
    return JSONResponse({"project_id": str(project_id), **instructions_json(found)})


routes = [
    api_route(SET_INSTRUCTIONS, set_instructions),
]
