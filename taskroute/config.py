"""Every setting, read from the environment in one place. Each has a documented default."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return default if raw in (None, "") else int(raw)


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return default if raw in (None, "") else float(raw)


def _bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    return default if raw in (None, "") else raw.lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Settings:
    # Postgres URL; empty -> an embedded Postgres (pgserver) under `data_dir/pg`. The request
    # pool connects here: Postgres itself, or a transaction-mode pooler (PgBouncer) before it.
    database_url: str = ""
    # Postgres itself, for what needs a session of its own: the LISTEN connection (realtime
    # wake-ups, credential-cache invalidations) and migrations (a session advisory lock).
    # Empty -> `database_url`. A transaction-mode pooler hands each transaction to any server
    # connection, so a LISTEN or a session lock through it would silently land elsewhere.
    direct_database_url: str = ""
    # asyncpg's prepared-statement cache per pooled connection; -1 -> automatic: 100 (asyncpg's
    # default) when the pool talks to Postgres itself, 0 when `direct_database_url` names
    # another address (a pooler sits in between: PgBouncer before 1.21 cannot keep named
    # prepared statements across transactions).
    statement_cache_size: int = -1
    # Bootstrap admin credential; empty -> no admin over the API (the CLI still works).
    admin_token: str = ""
    # Bearer token a Prometheus scraper sends to /metrics (the admin token works too); /metrics
    # names customers' skills and their backlogs, so it is never served anonymously.
    metrics_token: str = ""
    # Where payloads live: file:///path (default ./.taskroute/blobs) or s3://bucket/prefix.
    blob_url: str = ""
    # Local state (embedded Postgres, local blobs).
    data_dir: str = "./.taskroute"
    pool_min: int = 2
    pool_max: int = 10
    # How long a request waits for a pooled connection before answering UNAVAILABLE / 503.
    pool_timeout: float = 5.0
    # Admission (issue 19): per server process, at most this many requests wait for a pooled
    # connection; past it a request is refused at once (503 / UNAVAILABLE, Retry-After)
    # instead of waiting in a line that cannot drain in time. Claims have their own, shorter
    # line (shed first); heartbeats and submits are served before everything else.
    admission_queue: int = 1000
    admission_claim_queue: int = 200
    # Seconds between sweeps of expired leases.
    sweep_interval: float = 5.0
    # SIGTERM: seconds in-flight requests and running background-job passes may take to
    # finish before they are cancelled (give the process manager's kill timeout more).
    shutdown_grace: float = 30.0
    # REST 204 Retry-After seconds when there is nothing to claim.
    retry_after: int = 10
    # Largest request body accepted, in bytes (rejected before it is buffered).
    max_body_bytes: int = 32 * 1024 * 1024
    # Largest payload of one task, in bytes of canonical JSON.
    max_payload_bytes: int = 1024 * 1024
    # Most tasks in one createProject / addTasks request.
    max_tasks_per_request: int = 100_000
    # GraphQL introspection (turn off in production if you do not publish the schema).
    introspection: bool = True
    # Origins allowed to open WebSockets (comma separated); empty -> same-origin only.
    allowed_origins: tuple[str, ...] = field(default_factory=tuple)
    # Forecasts (issue 7): throughput is observed over this many recent seconds ...
    forecast_window: float = 3600.0
    # ... from experts seen (claiming) within this many seconds or holding a live lease.
    forecast_presence: float = 900.0
    # Seconds between evaluations of every deadline (risk alerts).
    forecast_interval: float = 30.0
    # Back on track only when the ETA beats the deadline by this fraction of the time left.
    forecast_hysteresis: float = 0.1
    # Seconds between re-evaluations behind `forecastUpdated` when no task of the project
    # changed (time alone moves an ETA); a change re-evaluates at once. One evaluation per
    # project per change or interval, shared by all of its subscribers.
    forecast_poll: float = 2.0
    # Seconds between foldings of the task-count deltas into the counts forecasts read
    # (exact either way; folding keeps the deltas a forecast sums few).
    counts_interval: float = 1.0
    # Subscriptions one WebSocket, and one credential (across sockets), may hold per process.
    ws_max_subscriptions_per_socket: int = 20
    ws_max_subscriptions_per_credential: int = 200
    # Seconds between health probes of the LISTEN connection (a dead one is replaced).
    listen_probe_interval: float = 5.0
    # Seconds a probe may take; two probes in a row without an answer replace the connection.
    listen_probe_timeout: float = 5.0
    # Wake-ups across processes (issue 16, realtime/tickets.py): processes share each opened
    # task's wake-up through Postgres, so one task wakes about one expert in all (off: each
    # process wakes its own, N processes -> about N experts per task). A woken expert not seen
    # (claim or heartbeat) within `wake_ack_seconds` is taken as gone and the wake-up goes to
    # another, at most `wake_max_announcements` announcements per task in all.
    wake_coordination: bool = True
    wake_ack_seconds: float = 10.0
    wake_max_announcements: int = 3
    # Credential cache (issue 11): token hashes remembered per process (LRU; 0 turns the cache
    # off), and seconds an entry may serve at most before the database is asked again
    # (revocations normally arrive within a second by NOTIFY; this bounds the worst case).
    credential_cache_size: int = 100_000
    credential_cache_max_age: float = 60.0
    # --- batches (issue 3) ---
    # Payloads up to this many bytes also stay inline in the item row and travel inside the
    # claim; larger ones are fetched through a short-lived payload URL.
    inline_payload_bytes: int = 16 * 1024
    # Blob-store calls in flight per server process (threads / pooled S3 connections).
    blob_concurrency: int = 16
    # Tasks per ingest chunk: the unit a background ingest stores in one transaction.
    ingest_chunk_tasks: int = 1000
    # Chunks one server process ingests at once (each holds a pooled connection meanwhile).
    ingest_workers: int = 2
    # Seconds between polls for queued ingest jobs (a local accept wakes the worker at once).
    ingest_poll_interval: float = 1.0
    # Back-off after a failed ingest attempt: base * 2^attempts seconds, at most max.
    ingest_retry_base: float = 0.5
    ingest_retry_max: float = 30.0
    # Lifetime of a payload URL, in seconds (it also dies with the lease).
    payload_url_ttl: int = 300
    # Key that signs payload URLs; empty -> one generated once and shared through the database.
    url_secret: str = ""
    # Seconds between runs of the payload retention job (issue 18; one process at a time).
    retention_interval: float = 60.0
    # Routing job (issue 6): seconds between runs; fairness window; least share of a skill's
    # claims per priority class under saturation; deadline-forecast window; how recently an
    # expert must have been seen to count as active for skill scarcity.
    routing_interval: float = 5.0
    routing_fair_window: float = 60.0
    routing_class_shares: str = "high=0.5,normal=0.25,low=0.1"
    routing_forecast_window: float = 600.0
    routing_active_window: float = 3600.0

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
        origins = os.environ.get("TASKROUTE_ALLOWED_ORIGINS", "")
        return cls(
            database_url=os.environ.get("DATABASE_URL", ""),
            direct_database_url=os.environ.get("TASKROUTE_DIRECT_DATABASE_URL", ""),
            statement_cache_size=_int("TASKROUTE_STATEMENT_CACHE_SIZE", -1),
            admin_token=os.environ.get("TASKROUTE_ADMIN_TOKEN", ""),
            metrics_token=os.environ.get("TASKROUTE_METRICS_TOKEN", ""),
            blob_url=os.environ.get("TASKROUTE_BLOB_URL", ""),
            data_dir=os.environ.get("TASKROUTE_DATA_DIR", "./.taskroute"),
            pool_min=_int("TASKROUTE_POOL_MIN", 2),
            pool_max=_int("TASKROUTE_POOL_MAX", 10),
            pool_timeout=_float("TASKROUTE_POOL_TIMEOUT", 5.0),
            admission_queue=_int("TASKROUTE_ADMISSION_QUEUE", 1000),
            admission_claim_queue=_int("TASKROUTE_ADMISSION_CLAIM_QUEUE", 200),
            sweep_interval=_float("TASKROUTE_SWEEP_INTERVAL", 5.0),
            shutdown_grace=_float("TASKROUTE_SHUTDOWN_GRACE", 30.0),
            retry_after=_int("TASKROUTE_RETRY_AFTER", 10),
            max_body_bytes=_int("TASKROUTE_MAX_BODY_BYTES", 32 * 1024 * 1024),
            max_payload_bytes=_int("TASKROUTE_MAX_PAYLOAD_BYTES", 1024 * 1024),
            max_tasks_per_request=_int("TASKROUTE_MAX_TASKS_PER_REQUEST", 100_000),
            introspection=_bool("TASKROUTE_INTROSPECTION", True),
            listen_probe_interval=_float("TASKROUTE_LISTEN_PROBE_INTERVAL", 5.0),
            listen_probe_timeout=_float("TASKROUTE_LISTEN_PROBE_TIMEOUT", 5.0),
            wake_coordination=_bool("TASKROUTE_WAKE_COORDINATION", True),
            wake_ack_seconds=_float("TASKROUTE_WAKE_ACK_SECONDS", 10.0),
            wake_max_announcements=_int("TASKROUTE_WAKE_MAX_ANNOUNCEMENTS", 3),
            credential_cache_size=_int("TASKROUTE_CREDENTIAL_CACHE_SIZE", 100_000),
            credential_cache_max_age=_float("TASKROUTE_CREDENTIAL_CACHE_MAX_AGE", 60.0),
            allowed_origins=tuple(o.strip() for o in origins.split(",") if o.strip()),
            forecast_window=_float("TASKROUTE_FORECAST_WINDOW", 3600.0),
            forecast_presence=_float("TASKROUTE_FORECAST_PRESENCE", 900.0),
            forecast_interval=_float("TASKROUTE_FORECAST_INTERVAL", 30.0),
            forecast_hysteresis=_float("TASKROUTE_FORECAST_HYSTERESIS", 0.1),
            forecast_poll=_float("TASKROUTE_FORECAST_POLL", 2.0),
            counts_interval=_float("TASKROUTE_COUNTS_INTERVAL", 1.0),
            ws_max_subscriptions_per_socket=_int("TASKROUTE_WS_MAX_SUBSCRIPTIONS_PER_SOCKET", 20),
            ws_max_subscriptions_per_credential=_int(
                "TASKROUTE_WS_MAX_SUBSCRIPTIONS_PER_CREDENTIAL", 200
            ),
            inline_payload_bytes=_int("TASKROUTE_INLINE_PAYLOAD_BYTES", 16 * 1024),
            blob_concurrency=_int("TASKROUTE_BLOB_CONCURRENCY", 16),
            ingest_chunk_tasks=_int("TASKROUTE_INGEST_CHUNK_TASKS", 1000),
            ingest_workers=_int("TASKROUTE_INGEST_WORKERS", 2),
            ingest_poll_interval=_float("TASKROUTE_INGEST_POLL_INTERVAL", 1.0),
            ingest_retry_base=_float("TASKROUTE_INGEST_RETRY_BASE", 0.5),
            ingest_retry_max=_float("TASKROUTE_INGEST_RETRY_MAX", 30.0),
            payload_url_ttl=_int("TASKROUTE_PAYLOAD_URL_TTL", 300),
            url_secret=os.environ.get("TASKROUTE_URL_SECRET", ""),
            retention_interval=_float("TASKROUTE_RETENTION_INTERVAL", 60.0),
            routing_interval=_float("TASKROUTE_ROUTING_INTERVAL", 5.0),
            routing_fair_window=_float("TASKROUTE_ROUTING_FAIR_WINDOW", 60.0),
            routing_class_shares=os.environ.get(
                "TASKROUTE_ROUTING_CLASS_SHARES", "high=0.5,normal=0.25,low=0.1"
            ),
            routing_forecast_window=_float("TASKROUTE_ROUTING_FORECAST_WINDOW", 600.0),
            routing_active_window=_float("TASKROUTE_ROUTING_ACTIVE_WINDOW", 3600.0),
        )
