"""Every setting, declared once: its field, environment variable, type, default and meaning.

`Settings.from_env()` reads the variables; `settings_table()` renders docs/operations.md's
Configuration table from the same declarations (`python scripts/settings_doc.py` rewrites
it; `tests/server/test_settings.py` fails while they differ).
"""

from __future__ import annotations

import dataclasses
import os
import typing
from dataclasses import dataclass
from typing import Any


def setting(default: Any, env: str, meaning: str, shown: str | None = None) -> Any:
    """A field of `Settings` read from `env`. `shown` replaces the default in the settings table
    when the literal value would not say what happens (an empty value, a computed one)."""
    meta = {"env": env, "meaning": meaning, "shown": shown}
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class Settings:
    database_url: str = setting(
        "",
        "DATABASE_URL",
        "the Postgres that is the system of record; the request pool connects here (Postgres"
        " itself, or PgBouncer in transaction mode in front of it)",
        shown="unset: embedded Postgres",
    )
    # A transaction-mode pooler hands each transaction to any server connection, so a LISTEN
    # or a session lock through it would silently land elsewhere.
    direct_database_url: str = setting(
        "",
        "TASKROUTE_DIRECT_DATABASE_URL",
        "Postgres itself, never a pooler: the LISTEN connection (wake-ups, credential"
        " revocations) and migrations (a session advisory lock) connect here; set it when"
        " `DATABASE_URL` is PgBouncer",
        shown="`DATABASE_URL`",
    )
    statement_cache_size: int = setting(
        -1,
        "TASKROUTE_STATEMENT_CACHE_SIZE",
        "asyncpg's prepared statements kept per pooled connection; 0 behind PgBouncer before"
        " 1.21, which cannot keep them across transactions (see [docs/deploy.md](docs/deploy.md))",
        shown="100, or 0 when `TASKROUTE_DIRECT_DATABASE_URL` differs from `DATABASE_URL`",
    )
    admin_token: str = setting(
        "", "TASKROUTE_ADMIN_TOKEN", "bootstrap admin credential", shown="unset: no API admin"
    )
    # /metrics names customers' skills and their backlogs: never served anonymously.
    metrics_token: str = setting(
        "",
        "TASKROUTE_METRICS_TOKEN",
        "bearer token a Prometheus scraper sends to `/metrics` (never served anonymously)",
        shown="unset: admin token only",
    )
    blob_url: str = setting(
        "",
        "TASKROUTE_BLOB_URL",
        "payload store: `file:///path` or `s3://bucket/prefix`",
        shown="`file://./.taskroute/blobs`",
    )
    data_dir: str = setting(
        "./.taskroute", "TASKROUTE_DATA_DIR", "embedded Postgres and local blobs"
    )
    pool_min: int = setting(2, "TASKROUTE_POOL_MIN", "least connections per server process")
    pool_max: int = setting(10, "TASKROUTE_POOL_MAX", "most connections per server process")
    pool_timeout: float = setting(
        5.0,
        "TASKROUTE_POOL_TIMEOUT",
        "seconds a request waits for a connection before 503 / `UNAVAILABLE`",
    )
    # Admission: a request that cannot be served in time is refused at once instead of
    # waiting in a line that cannot drain; heartbeats and submits go first, claims last.
    admission_queue: int = setting(
        1000,
        "TASKROUTE_ADMISSION_QUEUE",
        "requests per process that may wait for a connection; past it a request is refused at"
        " once (see Capacity)",
    )
    admission_claim_queue: int = setting(
        200,
        "TASKROUTE_ADMISSION_CLAIM_QUEUE",
        "claims per process that may wait for a connection (a claim holds one for about a"
        " millisecond, so 200 is a short wait); past it a claim is refused at once",
    )
    admission_claim_wait: float = setting(
        0.25,
        "TASKROUTE_ADMISSION_CLAIM_WAIT",
        "seconds a claim may wait for a connection: a claim that would wait longer is refused"
        " (at once when the line ahead of it takes longer than this to drain); `inf`: no"
        " budget",
    )
    held_claim_memo_seconds: float = setting(
        5.0,
        "TASKROUTE_HELD_CLAIM_MEMO_SECONDS",
        "seconds after the database last confirmed a claim through this process that a"
        " repeated claim the gate refuses is answered with it when the database does not"
        " answer the held-claim probe in time (see Capacity); 0: never",
    )
    probe_pool_size: int = setting(
        2,
        "TASKROUTE_PROBE_POOL_SIZE",
        "connections per process, apart from the pool, for the held-claim probe",
    )
    sweep_interval: float = setting(
        5.0, "TASKROUTE_SWEEP_INTERVAL", "seconds between sweeps of expired leases"
    )
    # Give the process manager's kill timeout more than this.
    shutdown_grace: float = setting(
        30.0,
        "TASKROUTE_SHUTDOWN_GRACE",
        "on SIGTERM, seconds in-flight requests and running background-job passes may take"
        " before they are cancelled (see docs/deploy.md, Restarts)",
    )
    retry_after: int = setting(
        10, "TASKROUTE_RETRY_AFTER", "`Retry-After` seconds on an empty REST claim"
    )
    releases_per_hour: int = setting(
        20,
        "TASKROUTE_RELEASES_PER_HOUR",
        "claims one expert may give back (skip, can't answer, bad item) in any hour",
    )
    bonus_max_cents: int = setting(
        100_000, "TASKROUTE_BONUS_MAX_CENTS", "largest bonus a customer may grant in one line"
    )
    max_body_bytes: int = setting(
        32 * 1024 * 1024,
        "TASKROUTE_MAX_BODY_BYTES",
        "largest request body (refused before it is buffered)",
    )
    max_payload_bytes: int = setting(
        1024 * 1024,
        "TASKROUTE_MAX_PAYLOAD_BYTES",
        "largest payload of one task (canonical JSON)",
    )
    max_tasks_per_request: int = setting(
        100_000, "TASKROUTE_MAX_TASKS_PER_REQUEST", "most tasks in one request"
    )
    introspection: bool = setting(True, "TASKROUTE_INTROSPECTION", "GraphQL introspection")
    allowed_origins: tuple[str, ...] = setting(
        (),
        "TASKROUTE_ALLOWED_ORIGINS",
        "origins allowed to open WebSockets (comma separated); empty: same-origin only",
    )
    forecast_window: float = setting(
        3600.0,
        "TASKROUTE_FORECAST_WINDOW",
        "seconds of history the pace is measured from (each expert's cycle times since their"
        " last change of pace, at most their 40 newest)",
    )
    forecast_presence: float = setting(
        900.0,
        "TASKROUTE_FORECAST_PRESENCE",
        "an expert counts as active if seen (claim, heartbeat) this recently or holding a"
        " lease; also the longest gap between two tasks that still counts as working",
    )
    forecast_interval: float = setting(
        30.0,
        "TASKROUTE_FORECAST_INTERVAL",
        "seconds between evaluations of every deadline (risk alerts)",
    )
    forecast_hysteresis: float = setting(
        0.1,
        "TASKROUTE_FORECAST_HYSTERESIS",
        "back on track only when the ETA beats the deadline by this fraction of the time left",
    )
    # Time alone moves an ETA, hence a poll even when nothing changes.
    forecast_poll: float = setting(
        2.0,
        "TASKROUTE_FORECAST_POLL",
        "seconds between `forecastUpdated` re-evaluations while nothing changes (a task change"
        " re-evaluates at once; one evaluation per project, shared by its subscribers)",
    )
    counts_interval: float = setting(
        1.0,
        "TASKROUTE_COUNTS_INTERVAL",
        "seconds between foldings of the task-count deltas into the counts forecasts read"
        " (exact either way; folding keeps a forecast's sums short)",
    )
    hygiene_interval: float = setting(
        30.0,
        "TASKROUTE_HYGIENE_INTERVAL",
        "seconds between checks of the tables' statistics and dead rows; acts only when the"
        " server's autovacuum is off (then it analyzes and vacuums them by autovacuum's formula"
        " and the migrations' per-table thresholds)",
    )
    ws_max_subscriptions_per_socket: int = setting(
        20,
        "TASKROUTE_WS_MAX_SUBSCRIPTIONS_PER_SOCKET",
        "subscriptions one WebSocket may hold (`TOO_MANY_SUBSCRIPTIONS` beyond)",
    )
    ws_max_subscriptions_per_credential: int = setting(
        200,
        "TASKROUTE_WS_MAX_SUBSCRIPTIONS_PER_CREDENTIAL",
        "subscriptions one token may hold per server process, across its sockets",
    )
    # A customer mints tokens freely: the per-token budget alone does not bound an account.
    ws_max_subscriptions_per_account: int = setting(
        400,
        "TASKROUTE_WS_MAX_SUBSCRIPTIONS_PER_ACCOUNT",
        "subscriptions one account (a customer, or an expert) may hold per server process,"
        " across all its tokens and sockets (each process counts its own)",
    )
    ws_connection_init_timeout: float = setting(
        60.0,
        "TASKROUTE_WS_CONNECTION_INIT_TIMEOUT",
        "seconds a WebSocket may wait before `connection_init` (either protocol): then it is"
        " closed (4408)",
    )
    # Wake-ups across processes (realtime/tickets.py): one opened task wakes about one expert
    # across all processes, not one per process.
    wake_coordination: bool = setting(
        True,
        "TASKROUTE_WAKE_COORDINATION",
        "processes share each opened task's wake-up through Postgres (wake tickets): one task"
        " wakes about one expert across all processes; `0`: each process wakes its own"
        " (N processes, about N experts per task)",
        shown="`1`",
    )
    wake_ack_seconds: float = setting(
        10.0,
        "TASKROUTE_WAKE_ACK_SECONDS",
        "a woken expert not seen (claim or heartbeat) within this many seconds is taken as"
        " gone: the wake-up goes to another idle subscriber",
    )
    wake_max_announcements: int = setting(
        3,
        "TASKROUTE_WAKE_MAX_ANNOUNCEMENTS",
        "how many times in all a task's wake-up is announced (the first time included)",
    )
    wake_take_timeout: float = setting(
        2.0,
        "TASKROUTE_WAKE_TAKE_TIMEOUT",
        "seconds a process waits for Postgres to share out a wake-up; past it it wakes its own"
        " idle subscribers (a duplicate wake-up, never a lost one)",
    )
    log_format: str = setting(
        "",
        "TASKROUTE_LOG_FORMAT",
        "`json` lines with request ids, or `text`; admin commands log only warnings",
        shown="`json` (`text` when stderr is a terminal)",
    )
    routing_interval: float = setting(
        5.0,
        "TASKROUTE_ROUTING_INTERVAL",
        "seconds between runs of the routing job (deadline bumps, fairness boosts, scarcity)",
    )
    routing_fair_window: float = setting(
        60.0,
        "TASKROUTE_ROUTING_FAIR_WINDOW",
        "seconds of recent claims over which each priority class's share is judged",
    )
    routing_class_shares: str = setting(
        "high=0.5,normal=0.25,low=0.1",
        "TASKROUTE_ROUTING_CLASS_SHARES",
        "least share of a saturated skill's claims per class that is short of it (projects"
        " without a deadline; see docs/routing.md)",
    )
    routing_project_share: float = setting(
        0.2,
        "TASKROUTE_ROUTING_PROJECT_SHARE",
        "inside a class, in a saturated skill: the least share of the class's claims its"
        " projects without a deadline split evenly (0: priority is a strict order inside a"
        " class; see docs/routing.md)",
    )
    routing_forecast_window: float = setting(
        600.0,
        "TASKROUTE_ROUTING_FORECAST_WINDOW",
        "seconds of a project's own completions behind the deadline bump's realised view"
        " (the forecast is the other)",
    )
    routing_active_window: float = setting(
        3600.0,
        "TASKROUTE_ROUTING_ACTIVE_WINDOW",
        "an expert seen this recently counts as active for skill scarcity",
    )
    routing_scarcity_ratio: float = setting(
        0.5,
        "TASKROUTE_ROUTING_SCARCITY_RATIO",
        "a skill is scarce (its holders take its work first) when its other active holders"
        " per second of backlog are below this x the average",
    )
    listen_probe_interval: float = setting(
        5.0,
        "TASKROUTE_LISTEN_PROBE_INTERVAL",
        "seconds between health probes of the LISTEN connection",
    )
    listen_probe_timeout: float = setting(
        5.0,
        "TASKROUTE_LISTEN_PROBE_TIMEOUT",
        "seconds a probe may take (two unanswered in a row: reconnect)",
    )
    credential_cache_size: int = setting(
        100_000,
        "TASKROUTE_CREDENTIAL_CACHE_SIZE",
        "tokens each process remembers (LRU) so requests skip the credential query; 0: off",
    )
    # Revocations normally arrive within a second by NOTIFY; this bounds the worst case.
    credential_cache_max_age: float = setting(
        60.0,
        "TASKROUTE_CREDENTIAL_CACHE_MAX_AGE",
        "seconds a cached token serves at most (revocations reach every process within about"
        " a second by NOTIFY; while the listener is down the cache is bypassed)",
    )
    inline_payload_bytes: int = setting(
        16 * 1024,
        "TASKROUTE_INLINE_PAYLOAD_BYTES",
        "payloads up to this size also travel inline in the claim; larger ones by URL",
    )
    blob_concurrency: int = setting(
        16,
        "TASKROUTE_BLOB_CONCURRENCY",
        "blob-store calls in flight per process (threads / pooled S3 connections)",
    )
    ingest_chunk_tasks: int = setting(
        1000,
        "TASKROUTE_INGEST_CHUNK_TASKS",
        "tasks a background ingest stores per transaction",
    )
    # Each holds a pooled connection while it runs.
    ingest_workers: int = setting(
        2, "TASKROUTE_INGEST_WORKERS", "chunks one process ingests at once"
    )
    ingest_poll_interval: float = setting(
        1.0,
        "TASKROUTE_INGEST_POLL_INTERVAL",
        "seconds between polls for queued ingest jobs (a local accept wakes the worker at once)",
    )
    ingest_retry_base: float = setting(
        0.5,
        "TASKROUTE_INGEST_RETRY_BASE",
        "back-off after a failed ingest attempt: this many seconds * 2^attempts ...",
    )
    ingest_retry_max: float = setting(
        30.0, "TASKROUTE_INGEST_RETRY_MAX", "... at most this many seconds"
    )
    payload_url_ttl: int = setting(
        300,
        "TASKROUTE_PAYLOAD_URL_TTL",
        "seconds a payload URL lives (it also dies with the lease)",
    )
    export_link_ttl: int = setting(
        7 * 86400,
        "TASKROUTE_EXPORT_LINK_TTL",
        "seconds the payload links in an export live (`/v1/items/{id}/payload`, for the"
        " customer's token; payloads kept inline in the item are exported inline instead)",
    )
    retention_interval: float = setting(
        60.0,
        "TASKROUTE_RETENTION_INTERVAL",
        "seconds between runs of the payload retention job (see Operating)",
    )
    url_secret: str = setting(
        "",
        "TASKROUTE_URL_SECRET",
        "key that signs payload URLs",
        shown="generated, shared via the database",
    )

    # An expert who could watch their own gold figures move after each submit would learn
    # which task was gold, and (on binary tasks) its answer: they see them late and in bulk.
    expert_quality_period: int = setting(
        86400,
        "TASKROUTE_EXPERT_QUALITY_PERIOD",
        "an expert's own view of their gold figures and quality (`me { expert { skills } }`)"
        " counts only gold answers submitted before the current period began (periods of this"
        " many seconds from the Unix epoch, on the database clock: 86400 = midnight UTC);"
        " admins and customers see the exact figures",
    )
    expert_quality_min_gold: int = setting(
        10,
        "TASKROUTE_EXPERT_QUALITY_MIN_GOLD",
        "... and only once there are this many of them (before that: no gold figures, and the"
        " admin-given quality)",
    )

    # Webhooks (docs/api.md, Webhooks). A customer names the URL, so by default the server
    # only ever connects to public addresses, over https.
    webhook_allow_private: bool = setting(
        False,
        "TASKROUTE_WEBHOOK_ALLOW_PRIVATE",
        "allow webhook endpoints on loopback, private, link-local and other non-public"
        " addresses, and over plain http (tests, a receiver beside the server); off: refused"
        " at creation and at every delivery",
    )
    webhook_interval: float = setting(
        0.5,
        "TASKROUTE_WEBHOOK_INTERVAL",
        "seconds between the webhook sender's looks for due deliveries while it is idle",
    )
    webhook_in_flight: int = setting(
        32, "TASKROUTE_WEBHOOK_IN_FLIGHT", "webhook attempts one server process runs at once"
    )
    webhook_endpoint_concurrency: int = setting(
        4,
        "TASKROUTE_WEBHOOK_ENDPOINT_CONCURRENCY",
        "webhook attempts in flight to one endpoint, across every server process",
    )
    webhook_connect_timeout: float = setting(
        3.0, "TASKROUTE_WEBHOOK_CONNECT_TIMEOUT", "seconds to connect to a webhook endpoint"
    )
    webhook_timeout: float = setting(
        10.0,
        "TASKROUTE_WEBHOOK_TIMEOUT",
        "seconds a webhook endpoint has to answer (the whole attempt, connect included)",
    )
    webhook_retry_base: float = setting(
        5.0,
        "TASKROUTE_WEBHOOK_RETRY_BASE",
        "seconds before the first retry of a failed webhook delivery; doubled per attempt,"
        " with jitter (half to the full delay)",
    )
    webhook_retry_max: float = setting(
        3600.0, "TASKROUTE_WEBHOOK_RETRY_MAX", "the longest wait between two webhook attempts"
    )
    webhook_give_up: float = setting(
        259200.0,
        "TASKROUTE_WEBHOOK_GIVE_UP",
        "seconds after it was queued that a failing webhook delivery stops being retried"
        " (`failed`; redeliver it by hand)",
    )
    webhook_disable_after: float = setting(
        432000.0,
        "TASKROUTE_WEBHOOK_DISABLE_AFTER",
        "seconds an endpoint may fail every attempt before it is disabled (its status and"
        " reason say so; updating it with `enabled: true` resumes it)",
    )
    webhook_keep: float = setting(
        604800.0,
        "TASKROUTE_WEBHOOK_KEEP",
        "seconds the delivery log keeps finished deliveries (delivered or failed)",
    )

    def session_url(self, pooled_url: str) -> str:
        """Where session-scoped connections go, given the URL the pool uses."""
        return self.direct_database_url or pooled_url

    def pool_statement_cache(self, pooled_url: str) -> int:
        if self.statement_cache_size >= 0:
            return self.statement_cache_size
        behind_pooler = self.session_url(pooled_url) != pooled_url
        return 0 if behind_pooler else 100

    @classmethod
    def from_env(cls) -> Settings:
        """Every setting whose variable is set (and not empty); the default for the rest."""
        values = {}
        for f in dataclasses.fields(cls):
            raw = os.environ.get(f.metadata["env"], "")
            if raw != "":
                values[f.name] = _parse(raw, _TYPES[f.name], f.metadata["env"])
        return cls(**values)


_TYPES: dict[str, Any] = typing.get_type_hints(Settings)


def _parse(raw: str, kind: Any, env: str) -> Any:
    if kind is bool:
        return raw.lower() in ("1", "true", "yes", "on")
    if kind is int or kind is float:
        try:
            return kind(raw)
        except ValueError as exc:
            raise ValueError(f"{env} must be a number, not {raw!r}") from exc
    if kind == tuple[str, ...]:
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    return raw


def read_setting(name: str) -> Any:
    """One setting from the environment (for what runs before the app's Settings exist)."""
    f = next(f for f in dataclasses.fields(Settings) if f.name == name)
    raw = os.environ.get(f.metadata["env"], "")
    return _parse(raw, _TYPES[name], f.metadata["env"]) if raw != "" else f.default


def _shown(f: dataclasses.Field[Any]) -> str:
    if f.metadata["shown"] is not None:
        return str(f.metadata["shown"])
    default = f.default
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    if isinstance(default, str | tuple):
        return f"`{default}`" if default else "empty"
    return str(default)


def settings_table() -> str:
    """The settings table (docs/operations.md), one row per setting, in declaration order."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for f in dataclasses.fields(Settings):
        rows.append(f"| `{f.metadata['env']}` | {_shown(f)} | {f.metadata['meaning']} |")
    return "\n".join(rows) + "\n"
