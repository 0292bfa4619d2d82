"""A worker client for experts' own tools: claim, keep the lease, submit, repeat.

    async with Worker("http://127.0.0.1:8000", token) as worker:
        async for task in worker.tasks(skills=["grading"]):
            await task.submit({"grade": grade(task.payload)})

- Claims through REST (`POST /v1/tasks/next`). While a task is held, a background heartbeat
  runs every `heartbeat_fraction` of the time the lease has left (at most
  `heartbeat_every` seconds apart, docs/api.md's advice for the silence timeout).
- With nothing to claim it waits on the `taskAvailable` subscription (GraphQL over
  WebSocket); the server hints at tasks already open when the subscription starts, so nothing
  opened between the empty claim and the subscription is missed. Without a hint it re-checks
  every `recheck_every` seconds, and when the WebSocket cannot be opened it backs off: never a
  tight loop.
- `task.submit(answer)` retries network errors and 503s with back-off: submit is idempotent
  (a repeated submit returns the stored receipt), so a retry cannot pay twice.
- A lost lease (heartbeat or submit answered 409 LEASE_EXPIRED, or the assignment is gone)
  is kept on the task as `task.lost` and raised by `task.submit` and `task.check()`; an answer
  the project's schema refuses raises `AnswerRefused` and the task stays held (fix, resubmit).

- Leaving `async with Worker(...)` with a task still held (Ctrl-C, an exception, a `break`)
  releases it (reason SKIP): it is open for others at once instead of waiting out the
  heartbeat timeout. `run(main())` is `asyncio.run` that turns Ctrl-C into exit status 130
  (the shell's convention for SIGINT) without a traceback.

For a customer's webhook receiver, `verify_webhook(secret, headers, body)` checks a delivery's
Standard Webhooks signature and timestamp and returns its JSON payload (docs/api.md, Webhooks).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import hmac
import json
import logging
import os
import random
import sys
import time
from collections.abc import AsyncIterator, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException
from websockets.typing import Subprotocol

log = logging.getLogger(__name__)

# WebSocket close code of a server going away (a restart): reconnect elsewhere at once.
GOING_AWAY = 1001

PROTOCOL = Subprotocol("graphql-transport-ws")
TASK_AVAILABLE = "subscription($s: [String!]) { taskAvailable(skills: $s) { skill } }"

# Exit status after Ctrl-C: 128 + SIGINT, what a shell reports for a process it interrupted.
INTERRUPTED = 130


class WebhookVerificationError(Exception):
    """A webhook delivery that is not ours: a missing header, a bad signature, a timestamp
    outside the tolerance (a replayed request), or a body that is not JSON."""


def verify_webhook(
    secret: str, headers: Mapping[str, str], body: bytes | str, tolerance: int = 300
) -> Any:
    """The delivery's JSON payload if `headers` carry a valid signature of `body` (the raw
    bytes received) by `secret` (the endpoint's `whsec_...`), timestamped within `tolerance`
    seconds of now; raises WebhookVerificationError otherwise. Deduplicate by the
    `webhook-id` header: a delivery may come more than once."""
    raw = body.encode() if isinstance(body, str) else bytes(body)
    h = {k.lower(): v for k, v in headers.items()}
    msg_id, stamp, signatures = (
        h.get("webhook-id"), h.get("webhook-timestamp"), h.get("webhook-signature")
    )  # fmt: skip
    if not (msg_id and stamp and signatures):
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or -signature")
    if not stamp.isascii() or not stamp.isdigit():
        raise WebhookVerificationError("webhook-timestamp is not a Unix time")
    if abs(time.time() - int(stamp)) > tolerance:
        raise WebhookVerificationError("webhook-timestamp is outside the tolerance")
    try:
        key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("the secret is not a whsec_ secret") from exc
    mac = hmac.new(key, f"{msg_id}.{stamp}.".encode() + raw, hashlib.sha256).digest()
    expected = "v1," + base64.b64encode(mac).decode()
    if not any(hmac.compare_digest(expected.encode(), s.encode()) for s in signatures.split(" ")):
        raise WebhookVerificationError("no signature matches")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise WebhookVerificationError("the body is not JSON") from exc


class ClientError(Exception):
    """The server refused a request: `code` is its error code (BAD_INPUT, NOT_FOUND, ...)."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}


class LeaseLost(ClientError):
    """The task is no longer this expert's (lease expired, assignment gone): claim again."""


class AnswerRefused(ClientError):
    """The answer does not match the answer schema; `path` says where. The task is still held."""

    @property
    def path(self) -> str | None:
        return self.details.get("path")


@dataclass
class Task:
    worker: Worker
    assignment_id: str
    lease_until: datetime
    id: str
    project_id: str
    skill: str
    priority: int
    payload: Any
    payload_url: str | None
    answer_schema: Any
    # the latest heartbeat's hint: a more urgent task is waiting for this expert
    has_high_priority_tasks: bool = False
    # set when the lease is gone; `submit` and `check` raise it
    lost: LeaseLost | None = None
    # the project was canceled: no more heartbeats, but a submit within the lease still counts
    canceled: bool = False
    receipt: dict[str, Any] | None = None
    # the reason it was given back with (`release`)
    released: str | None = None
    _heartbeat: asyncio.Task[None] | None = field(default=None, repr=False)

    def check(self) -> None:
        if self.lost is not None:
            raise self.lost

    async def fetch_payload(self) -> Any:
        """The payload, fetched from `payload_url` when it was too large to travel inline."""
        if self.payload_url is None:
            return self.payload
        r = await self.worker.http.get(self.payload_url, follow_redirects=True)
        self.worker.raise_for(r)
        return r.json()

    async def submit(self, answer: Any) -> dict[str, Any]:
        """Store the answer and get the receipt; safe to call again (same receipt)."""
        self.check()
        try:
            r = await self.worker.request(
                f"/v1/assignments/{self.assignment_id}/submit", {"answer": answer}
            )
        except LeaseLost as exc:
            self._lose(exc)
            raise
        self.receipt = r.json()
        self._stop_heartbeat()
        return self.receipt

    async def release(self, reason: str = "SKIP") -> dict[str, Any]:
        """Give the claim back (SKIP, CANNOT_ANSWER, BAD_ITEM): open for others at once, and
        never offered to this expert again. One attempt, no retries: the server bounds
        releases per hour (TOO_MANY_RELEASES), and a lost release only waits out the lease."""
        self._stop_heartbeat()
        r = await self.worker.http.post(
            f"/v1/assignments/{self.assignment_id}/release", json={"reason": reason}
        )
        self.worker.raise_for(r)
        self.released = reason
        return dict(r.json())

    @property
    def held(self) -> bool:
        """Still this expert's: neither submitted, released nor lost."""
        return self.receipt is None and self.released is None and self.lost is None

    def _lose(self, exc: LeaseLost) -> None:
        if self.lost is None:
            self.lost = exc
        self._stop_heartbeat()

    def _stop_heartbeat(self) -> None:
        hb, self._heartbeat = self._heartbeat, None
        if hb is not None and hb is not asyncio.current_task():
            hb.cancel()

    async def _keep_alive(self) -> None:
        w = self.worker
        while True:
            left = (self.lease_until - datetime.now(UTC)).total_seconds()
            await asyncio.sleep(max(0.2, min(w.heartbeat_every, left * w.heartbeat_fraction)))
            try:
                r = await w.request(f"/v1/assignments/{self.assignment_id}/heartbeat", None)
            except LeaseLost as exc:
                self._lose(exc)
                return
            except ClientError as exc:
                if exc.code == "PROJECT_CANCELED":
                    self.canceled = True
                    return
                if exc.code == "ALREADY_SUBMITTED":
                    return
                log.warning("heartbeat refused: %s", exc)
                continue
            body = r.json()
            self.lease_until = datetime.fromisoformat(body["lease_until"])
            self.has_high_priority_tasks = body["has_high_priority_tasks"]


class Worker:
    def __init__(
        self,
        url: str,
        token: str,
        *,
        heartbeat_fraction: float = 1 / 3,
        heartbeat_every: float = 60.0,
        recheck_every: float = 30.0,
        retry_for: float = 120.0,
        timeout: float = 30.0,
        release_timeout: float = 5.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.heartbeat_fraction = heartbeat_fraction
        self.heartbeat_every = heartbeat_every
        self.recheck_every = recheck_every
        # how long a request keeps retrying network errors and 503s before giving up
        self.retry_for = retry_for
        self.release_timeout = release_timeout
        # the last task claimed: released on exit while still held
        self.current: Task | None = None
        self.http = httpx.AsyncClient(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
        )

    async def __aenter__(self) -> Worker:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Releases a task still held (reason SKIP), then closes the connections."""
        try:
            await self._release_held()
        finally:
            await self.http.aclose()

    async def _release_held(self) -> None:
        task, self.current = self.current, None
        if task is None or not task.held:
            return
        task._stop_heartbeat()
        try:
            # Bounded: stopping must not hang on a server that is away.
            async with asyncio.timeout(self.release_timeout):
                await task.release("SKIP")
        except (ClientError, httpx.HTTPError, TimeoutError) as exc:
            log.warning("could not release task %s on exit: %s", task.id, exc)

    # --- requests ------------------------------------------------------------------------

    @staticmethod
    def raise_for(r: httpx.Response) -> None:
        if r.status_code < 400:
            return
        try:
            err = r.json()["error"]
            code, message, details = err["code"], err["message"], err.get("details")
        except (ValueError, KeyError, TypeError):
            code, message, details = "HTTP_ERROR", r.text[:200], None
        cls: type[ClientError] = ClientError
        if code in ("LEASE_EXPIRED", "NOT_FOUND") and "/v1/assignments/" in str(r.url):
            cls = LeaseLost
        elif code == "BAD_INPUT" and str(r.url).endswith("/submit"):
            cls = AnswerRefused
        raise cls(r.status_code, code, message, details)

    async def request(self, path: str, body: Any) -> httpx.Response:
        """POST, retrying network errors and 503s with jittered back-off for `retry_for`
        seconds. Only for idempotent calls: claim (hands back the held claim), heartbeat,
        submit (returns the stored receipt)."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.retry_for
        delay = 0.1
        while True:
            try:
                r = await self.http.post(path, json=body)
                if r.status_code != 503:
                    self.raise_for(r)
                    return r
                problem: Exception = ClientError(503, "UNAVAILABLE", r.text[:200])
            except httpx.TransportError as exc:
                problem = exc
            if loop.time() + delay > give_up:
                raise problem
            log.info("retrying %s after %s", path, problem)
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, 5.0)

    # --- the loop ------------------------------------------------------------------------

    async def claim(
        self, skills: list[str] | None = None, project_id: str | None = None
    ) -> Task | None:
        """One claim: the held task, the next one, or None when there is nothing."""
        body: dict[str, Any] = {}
        if skills is not None:
            body["skills"] = skills
        if project_id is not None:
            body["project_id"] = project_id
        r = await self.request("/v1/tasks/next", body)
        if r.status_code == 204:
            return None
        c = r.json()
        t = c["task"]
        task = Task(
            worker=self,
            assignment_id=c["assignment_id"],
            lease_until=datetime.fromisoformat(c["lease_until"]),
            id=t["id"],
            project_id=t["project_id"],
            skill=t["skill"],
            priority=t["priority"],
            payload=t.get("payload"),
            payload_url=t.get("payload_url"),
            answer_schema=t.get("answer_schema"),
        )
        task._heartbeat = asyncio.create_task(task._keep_alive(), name="taskroute-heartbeat")
        self.current = task
        return task

    async def tasks(
        self, skills: list[str] | None = None, project_id: str | None = None
    ) -> AsyncIterator[Task]:
        """Tasks, one at a time, for ever: submit each before asking for the next (an
        unsubmitted task is still held, and the server hands it back)."""
        current: Task | None = None
        try:
            while True:
                if current is not None:
                    current._stop_heartbeat()
                current = await self.claim(skills, project_id)
                if current is None:
                    await self.wait_for_work(skills)
                    continue
                yield current
        finally:
            if current is not None:
                current._stop_heartbeat()

    async def wait_for_work(self, skills: list[str] | None = None) -> None:
        """Until a `taskAvailable` hint arrives, or `recheck_every` seconds pass (also when
        the subscription cannot be opened: the server may be restarting)."""
        ws_url = self.url.replace("http://", "ws://", 1).replace("https://", "wss://", 1)
        try:
            async with asyncio.timeout(self.recheck_every):
                async with connect(ws_url + "/graphql", subprotocols=[PROTOCOL]) as ws:
                    await ws.send(
                        json.dumps(
                            {
                                "type": "connection_init",
                                "payload": {"Authorization": f"Bearer {self.token}"},
                            }
                        )
                    )
                    await ws.send(
                        json.dumps(
                            {
                                "id": "1",
                                "type": "subscribe",
                                "payload": {"query": TASK_AVAILABLE, "variables": {"s": skills}},
                            }
                        )
                    )
                    async for raw in ws:
                        msg = json.loads(raw)
                        if msg.get("type") == "ping":
                            await ws.send(json.dumps({"type": "pong"}))
                        elif msg.get("type") == "next":
                            return
                        elif msg.get("type") in ("error", "complete"):
                            break
                    if ws.close_code == GOING_AWAY:
                        # The server is restarting (it drains on SIGTERM): claim again now,
                        # which the load balancer sends to another process, and wait there.
                        return
                # closed or refused: wait out the rest of the re-check period, not a loop
                await asyncio.sleep(self.recheck_every)
        except TimeoutError:
            return
        except (OSError, WebSocketException) as exc:
            log.info("taskAvailable unavailable (%s); re-checking later", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.sleep(min(self.recheck_every, 5.0))


# --- the customer side ------------------------------------------------------------------------
# Create projects, watch their progress, read results from a cursor, download exports. Apart
# from the worker above: it shares only ClientError.

FINISHED = ("completed", "canceled")
PROGRESS = (
    "subscription($p: ID!) { projectProgress(projectId: $p) "
    "{ status completedAt total open claimed done failed canceled } }"
)


class IngestFailed(ClientError):
    """A large batch's background ingest failed or was canceled; `message` is its error."""


@dataclass
class ResultChanges:
    """The project's change feed from `cursor` on (`GET /v1/projects/{id}/result-changes`):
    iterate it for each change (`item_id`, `change`, `answer`, ...). `cursor` is the position
    after the last change yielded: keep it, and `client.result_changes(pid, after=cursor)`
    resumes without repeats or gaps. Ends at the end of the feed unless `follow`, which then
    polls for new changes (back-off from `poll_min` to `poll_max` seconds while idle)."""

    client: CustomerClient
    project_id: str
    cursor: str | None = None
    page_size: int = 200
    follow: bool = False
    poll_min: float = 0.5
    poll_max: float = 10.0

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        delay = self.poll_min
        while True:
            params: dict[str, Any] = {"first": self.page_size}
            if self.cursor is not None:
                params["after"] = self.cursor
            page = await self.client.get_json(
                f"/v1/projects/{self.project_id}/result-changes", params
            )
            for change in page["changes"]:
                self.cursor = change["cursor"]
                yield change
            if page["page_info"]["has_next_page"]:
                delay = self.poll_min
                continue
            if not self.follow:
                return
            if page["changes"]:
                delay = self.poll_min
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.poll_max)


class CustomerClient:
    """A customer's client of the REST API (and of `projectProgress` over GraphQL-over-SSE).

    async with CustomerClient(url, token) as client:
        project = await client.create_project("essays", tasks, redundancy=2)
        async for progress in client.progress(project["project_id"]): ...
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )

    async def __aenter__(self) -> CustomerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.http.aclose()

    async def get_json(self, path: str, params: dict[str, Any] | None = None) -> Any:
        r = await self.http.get(path, params=params)
        Worker.raise_for(r)
        return r.json()

    async def project(self, project_id: str) -> dict[str, Any]:
        """`GET /v1/projects/{id}`: status, progress and ingest state in one snapshot."""
        found: dict[str, Any] = await self.get_json(f"/v1/projects/{project_id}")
        return found

    async def create_project(
        self,
        name: str,
        tasks: list[dict[str, Any]],
        *,
        wait: bool = True,
        wait_timeout: float | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """`POST /v1/projects` (other project fields, e.g. `redundancy=2`, as keywords); returns
        the project as `project()` shows it. A small batch (201) is stored already; a large one
        (202) is ingested in the background, and with `wait` this returns once it is (raising
        `IngestFailed` if it fails, `TimeoutError` after `wait_timeout` seconds)."""
        # Not retried: a repeated POST would create a second project.
        r = await self.http.post("/v1/projects", json={"name": name, "tasks": tasks, **fields})
        Worker.raise_for(r)
        project_id = r.json()["project_id"]
        if r.status_code == 202 and wait:
            return await self.wait_ingested(project_id, timeout=wait_timeout)
        return await self.project(project_id)

    async def wait_ingested(
        self, project_id: str, *, timeout: float | None = None, poll_max: float = 5.0
    ) -> dict[str, Any]:
        """Poll the project (back-off from 0.1 s to `poll_max`) until no background ingest is
        pending; return the project."""
        async with asyncio.timeout(timeout):
            delay = 0.1
            while True:
                project = await self.project(project_id)
                ingest = project.get("ingest") or {}
                state = ingest.get("state")
                if state in ("failed", "canceled"):
                    raise IngestFailed(
                        200, "INGEST_" + state.upper(), ingest.get("error") or state, ingest
                    )
                if project["status"] != "ingesting" and state in (None, "done"):
                    return project
                await asyncio.sleep(delay)
                delay = min(delay * 2, poll_max)

    async def progress(
        self, project_id: str, *, until_finished: bool = True
    ) -> AsyncIterator[dict[str, Any]]:
        """The `projectProgress` subscription over GraphQL-over-SSE: the counts now, then on
        each change (`status`, `total`, `open`, `claimed`, `done`, `failed`, `canceled`).
        Ends after a `completed` or `canceled` snapshot when `until_finished`."""
        body = {"query": PROGRESS, "variables": {"p": project_id}}
        headers = {"Accept": "text/event-stream"}
        async with self.http.stream(
            "POST", "/graphql", json=body, headers=headers, timeout=httpx.Timeout(30, read=None)
        ) as r:
            if r.status_code >= 400:
                await r.aread()
                Worker.raise_for(r)
            async for event, data in _server_sent_events(r.aiter_lines()):
                if event == "complete":
                    return
                if event != "next":
                    continue
                payload = json.loads(data)
                if payload.get("errors"):
                    err = payload["errors"][0]
                    code = err.get("extensions", {}).get("code", "INTERNAL")
                    raise ClientError(200, code, err.get("message", ""))
                snapshot: dict[str, Any] = payload["data"]["projectProgress"]
                yield snapshot
                if until_finished and snapshot["status"] in FINISHED:
                    return

    def result_changes(
        self, project_id: str, after: str | None = None, *, follow: bool = False
    ) -> ResultChanges:
        """The change feed from `after` (None: the beginning); see ResultChanges."""
        return ResultChanges(self, project_id, cursor=after, follow=follow)

    async def export(
        self,
        project_id: str,
        path: str | os.PathLike[str],
        *,
        format: str = "jsonl",
        as_of: str | None = None,
    ) -> str:
        """Stream `GET /v1/projects/{id}/export` into the file at `path` (written whole or not
        at all: a partial download is removed); return the export's position (`as_of`):
        `result_changes(project_id, after=as_of)` continues from it without gaps."""  # fmt: skip
        params = {"format": format, **({"as_of": as_of} if as_of is not None else {})}
        target = Path(path)
        partial = target.with_name(target.name + ".part")
        async with self.http.stream(
            "GET", f"/v1/projects/{project_id}/export", params=params,
            timeout=httpx.Timeout(30, read=300),
        ) as r:  # fmt: skip
            if r.status_code >= 400:
                await r.aread()
                Worker.raise_for(r)
            try:
                with partial.open("wb") as out:
                    async for chunk in r.aiter_bytes():
                        out.write(chunk)
            except BaseException:
                partial.unlink(missing_ok=True)
                raise
        partial.replace(target)
        return r.headers["X-Taskroute-As-Of"]


async def _server_sent_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, str]]:
    """(event, data) per server-sent event: `event:` and `data:` lines up to a blank line."""
    event, data = "message", list[str]()
    async for line in lines:
        if not line:
            if data or event != "message":
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue  # a comment: keep-alive
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)


def run(main: Coroutine[Any, Any, Any]) -> Any:
    """`asyncio.run(main)`, stopping cleanly on Ctrl-C: `main` is cancelled (so `async with
    Worker` releases a held task), then the process exits with status 130, no traceback."""
    try:
        return asyncio.run(main)
    except KeyboardInterrupt:
        print("stopped (Ctrl-C)", file=sys.stderr, flush=True)
        raise SystemExit(INTERRUPTED) from None
