"""What the webhook tests share: an endpoint made through the API, work done through it."""

from __future__ import annotations

from typing import Any

from ..helpers import Api

ENDPOINT_FIELDS = "id url eventTypes projectId status disabledReason failingSince"
CREATE = (
    "mutation($u: String!, $t: [String!]!, $p: ID) {"
    " createWebhookEndpoint(url: $u, eventTypes: $t, projectId: $p) {"
    f" secret endpoint {{ {ENDPOINT_FIELDS} }} }} }}"
)
ALL_TYPES = [
    "item.result.resolved",
    "item.result.changed",
    "project.completed",
    "project.canceled",
    "project.ingest.finished",
    "project.ingest.failed",
    "project.deadline_alert.raised",
    "project.deadline_alert.cleared",
    "review.needed",
]
CHANGES = """query($p: ID!, $a: String) { itemResultChanges(projectId: $p, after: $a, first: 1000) {
  edges { cursor node { itemId change version } } } }"""


async def create_endpoint(
    api: Api, token: str, url: str, types: list[str] | None = None, project: str | None = None
) -> dict[str, Any]:
    data = await api.gql(CREATE, {"u": url, "t": types or ALL_TYPES, "p": project}, token)
    made: dict[str, Any] = data["createWebhookEndpoint"]
    return made


async def work_through(api: Api, expert_token: str, n: int, answer: Any = None) -> list[str]:
    """Claim and submit `n` tasks as the expert; the assignment ids."""
    done = []
    for _ in range(n):
        claim = await api.claim(expert_token)
        assert claim is not None
        await api.submit(expert_token, claim["assignmentId"], answer or {"label": "yes"})
        done.append(claim["assignmentId"])
    return done


async def change_cursors(api: Api, token: str, project: str) -> list[str]:
    data = await api.gql(CHANGES, {"p": project}, token)
    return [e["cursor"] for e in data["itemResultChanges"]["edges"]]
