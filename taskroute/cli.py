"""`taskroute serve | migrate | admin ...`"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from typing import Any

from taskroute.config import Settings


def _database_url(settings: Settings) -> tuple[str, Any]:
    """The configured URL, or an embedded Postgres started here (kept alive by the handle)."""
    if settings.database_url:
        return settings.database_url, None
    from taskroute.embedded import start_embedded_postgres

    return start_embedded_postgres(settings.data_dir)


def cmd_serve(args: argparse.Namespace) -> None:
    import uvicorn

    from taskroute.db.migrate import migrate_url

    settings = Settings.from_env()
    url, server = _database_url(settings)
    # Worker processes inherit the URL, so they all share this one database.
    os.environ["DATABASE_URL"] = url
    asyncio.run(migrate_url(url))
    # uvicorn re-raises SIGTERM after its graceful shutdown; turning it into SystemExit lets
    # atexit handlers run, so the embedded Postgres is stopped with us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    uvicorn.run(
        "taskroute.app:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        loop="uvloop",
        http="httptools",
        ws_ping_interval=20,
        # longer than typical clients' and load balancers' idle timeouts
        timeout_keep_alive=75,
        log_level=args.log_level,
        # Our JSON logging (configured in main) covers uvicorn's loggers; access lines come
        # from taskroute.observability.requests with the request id.
        log_config=None,
        access_log=False,
    )
    del server


def cmd_migrate(args: argparse.Namespace) -> None:
    from taskroute.db.migrate import migrate_url

    url, server = _database_url(Settings.from_env())
    applied = asyncio.run(migrate_url(url))
    print(f"applied {len(applied)} migration(s): {applied}" if applied else "up to date")
    del server


async def _admin(args: argparse.Namespace, url: str) -> dict[str, str]:
    from taskroute.db.pool import Database, create_pool
    from taskroute.resolvers import accounts

    pool = await create_pool(url, 1, 2)
    try:
        db = Database(pool, 10)
        if args.admin_cmd == "create-customer":
            cred = await accounts.create_customer(db, args.name)
        else:
            skills = [_skill_arg(s) for s in args.skill]
            cred = await accounts.create_expert(db, args.name, skills)
        return {"id": str(cred.id), "token": cred.token}
    finally:
        await pool.close()


def _skill_arg(raw: str) -> dict[str, Any]:
    name, _, quality = raw.partition(":")
    return {"skill": name, "quality": float(quality) if quality else 1.0}


def cmd_admin(args: argparse.Namespace) -> None:
    from taskroute.db.migrate import migrate_url
    from taskroute.errors import TaskrouteError

    url, server = _database_url(Settings.from_env())
    asyncio.run(migrate_url(url))
    try:
        print(json.dumps(asyncio.run(_admin(args, url))))
    except TaskrouteError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        sys.exit(2)
    del server


def cmd_schema(args: argparse.Namespace) -> None:
    from taskroute.schema.sdl import export_sdl

    sdl = export_sdl()
    if args.output == "-":
        sys.stdout.write(sdl)
    else:
        with open(args.output, "w") as f:
            f.write(sdl)
        print(f"wrote {args.output}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="taskroute")
    sub = parser.add_subparsers(dest="cmd", required=True)

    serve = sub.add_parser("serve", help="run the API server (migrates first)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1, help="server processes on one database")
    serve.add_argument("--log-level", default="info")
    serve.set_defaults(func=cmd_serve)

    migrate = sub.add_parser("migrate", help="apply pending database migrations")
    migrate.set_defaults(func=cmd_migrate)

    admin = sub.add_parser("admin", help="create customers and experts (prints their tokens)")
    admin_sub = admin.add_subparsers(dest="admin_cmd", required=True)
    cust = admin_sub.add_parser("create-customer")
    cust.add_argument("name")
    exp = admin_sub.add_parser("create-expert")
    exp.add_argument("name")
    exp.add_argument(
        "--skill", action="append", required=True, help="skill or skill:quality (repeatable)"
    )
    admin.set_defaults(func=cmd_admin)

    schema = sub.add_parser("schema", help="print the GraphQL schema (SDL)")
    schema.add_argument("-o", "--output", default="-", help="file to write (default: stdout)")
    schema.set_defaults(func=cmd_schema)

    args = parser.parse_args(argv)
    from taskroute.observability.logs import configure_logging

    configure_logging(getattr(args, "log_level", "info"))
    args.func(args)
