"""`taskroute serve | migrate | admin ...`"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import signal
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from taskroute.config import Settings
from taskroute.server.cli_tables import render_table


def _database_url(settings: Settings) -> tuple[str, Any]:
    """The configured URL, or an embedded Postgres started here (kept alive by the handle)."""
    if settings.database_url:
        return settings.database_url, None
    from taskroute.server.embedded import start_embedded_postgres

    return start_embedded_postgres(settings.data_dir)


def _direct_url(settings: Settings, url: str) -> str:
    """Postgres itself, for migrations (a session advisory lock cannot go through PgBouncer in
    transaction mode); the embedded Postgres has no pooler in front."""
    return settings.session_url(url) if settings.database_url else url


def masked_url(url: str) -> str:
    """The URL with its password (if any) replaced by ***, for saying which database is used."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


class NoDatabase(Exception):
    """An admin command found no database to use (and will not create one)."""


def _admin_database(settings: Settings) -> tuple[str, Any, str]:
    """The URL, the embedded server's handle and a line saying which database this is. An admin
    command never creates a database: a typo'd folder would otherwise get a new, empty one."""
    if settings.database_url:
        return settings.database_url, None, f"database: {masked_url(settings.database_url)}"
    folder = Path(settings.data_dir).resolve()
    if not (folder / "pg" / "PG_VERSION").is_file():
        raise NoDatabase(
            f"error: no taskroute database: DATABASE_URL is not set and there is no embedded "
            f"database in {folder} (admin commands never create one).\n"
            "Run the command in the folder where `taskroute serve` runs, or name its data "
            "folder with --data-dir DIR or TASKROUTE_DATA_DIR=DIR, or set DATABASE_URL."
        )
    url, server = _database_url(settings)
    return url, server, f"database: embedded Postgres in {folder}"


def cmd_serve(args: argparse.Namespace) -> None:
    import uvicorn

    from taskroute.db.migrate import migrate_url
    from taskroute.server.websocket_protocol import SlimSansIOWebSocketProtocol

    settings = Settings.from_env()
    url, server = _database_url(settings)
    # Worker processes inherit the URL, so they all share this one database.
    os.environ["DATABASE_URL"] = url
    asyncio.run(migrate_url(_direct_url(settings, url)))
    # uvicorn re-raises SIGTERM after its graceful shutdown; turning it into SystemExit lets
    # atexit handlers run, so the embedded Postgres is stopped with us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    uvicorn.run(
        "taskroute.server.app:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        loop="uvloop",
        http="httptools",
        # uvicorn's sans-I/O WebSockets, keeping less per idle connection (websocket_protocol.py)
        ws=SlimSansIOWebSocketProtocol,
        ws_ping_interval=20,
        # SIGTERM: requests still running after this are cancelled (drain.py)
        # (uvicorn takes whole seconds: rounded up, never shorter than asked)
        timeout_graceful_shutdown=math.ceil(settings.shutdown_grace),
        # No permessage-deflate: browsers and the websockets client offer it, and each
        # accepted offer keeps a zlib compressor and decompressor per connection, for hints of
        # ~100 bytes that compression cannot shrink.
        ws_per_message_deflate=False,
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

    settings = Settings.from_env()
    url, server = _database_url(settings)
    applied = asyncio.run(migrate_url(_direct_url(settings, url)))
    print(f"applied {len(applied)} migration(s): {applied}" if applied else "up to date")
    del server


def _actor() -> str:
    """Who runs the CLI, in the admin audit."""
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli:unknown"


def _json_row(row: Any) -> dict[str, Any]:
    return {k: (v if isinstance(v, int | float | bool | str | None | list | dict) else str(v))
            for k, v in dict(row).items() if k != "token_hash"}  # fmt: skip


async def _admin(args: argparse.Namespace, url: str, statement_cache_size: int) -> Any:
    from datetime import UTC, datetime, timedelta

    from taskroute.db.pool import Database, create_pool
    from taskroute.resolvers.accounts import rules as accounts
    from taskroute.resolvers.accounts.credentials import Viewer, parse_id

    pool = await create_pool(url, 1, 2, statement_cache_size)
    actor = _actor()
    admin = Viewer("admin")
    cmd = args.admin_cmd
    try:
        db = Database(pool, 10)
        if cmd == "create-customer":
            cred = await accounts.create_customer(db, args.name, actor)
            return {"id": str(cred.id), "token": cred.token}
        if cmd == "create-expert":
            skills = [_skill_arg(s) for s in args.skill]
            cred = await accounts.create_expert(db, args.name, skills, args.capability, actor)
            return {"id": str(cred.id), "token": cred.token}
        if cmd == "list-experts":
            page = await accounts.experts_page(
                db, args.skill, args.status, args.search, None, args.limit
            )
            return [_json_row(r) for r in page.rows]
        if cmd == "list-customers":
            page = await accounts.customers_page(db, args.search, None, args.limit)
            return [_json_row(r) for r in page.rows]
        if cmd == "show-expert":
            eid = await _expert_named(db, args.expert)
            claim = await accounts.current_claim(db, eid)
            return {
                **_json_row(await accounts.get_expert(db, eid)),
                "skills": [_json_row(r) for r in await accounts.expert_skills(db, eid)],
                "current_claim": None if claim is None else _json_row(claim),
            }
        if cmd in ("grant-skill", "remove-skill", "set-quality", "set-capabilities",
                   "deactivate", "reactivate"):  # fmt: skip
            eid = parse_id(args.expert, "expert")
            result: dict[str, Any] = {"expert": str(eid)}
            if cmd == "grant-skill":
                await accounts.grant_skill(db, actor, eid, args.skill, args.quality, args.reason)
            elif cmd == "remove-skill":
                await accounts.remove_skill(db, actor, eid, args.skill, args.reason)
            elif cmd == "set-quality":
                await accounts.set_starting_quality(
                    db, actor, eid, args.skill, args.quality, args.override_measured, args.reason
                )
            elif cmd == "set-capabilities":
                await accounts.set_capabilities(db, actor, eid, args.tag, args.reason)
            else:
                status = "disabled" if cmd == "deactivate" else "active"
                released = await accounts.set_status(db, actor, eid, status, args.reason)
                result["leases_released"] = released
            result["status"] = (await accounts.get_expert(db, eid))["status"]
            return result
        if cmd == "create-token":
            expires = None
            if args.expires_in is not None:
                expires = datetime.now(UTC) + timedelta(seconds=args.expires_in)
            issued = await accounts.create_credential(
                db, admin, actor,
                customer_id=parse_id(args.customer, "customer") if args.customer else None,
                expert_id=parse_id(args.expert, "expert") if args.expert else None,
                label=args.label, expires_at=expires, read_only=args.read_only,
                project_id=parse_id(args.project, "project") if args.project else None,
                reason=args.reason,
            )  # fmt: skip
            return {**_json_row(issued.row), "token": issued.token}
        if cmd == "list-tokens":
            rows = await accounts.list_credentials(
                db, admin,
                parse_id(args.customer, "customer") if args.customer else None,
                parse_id(args.expert, "expert") if args.expert else None,
            )  # fmt: skip
            return [_json_row(r) for r in rows]
        if cmd == "revoke-token":
            row = await accounts.revoke_credential(
                db, admin, actor, parse_id(args.credential, "credential"), args.reason
            )
            return _json_row(row)
        if cmd == "rotate-token":
            issued = await accounts.rotate_credential(
                db, admin, actor, parse_id(args.credential, "credential"), args.grace, args.reason
            )
            return {**_json_row(issued.row), "token": issued.token}
        if cmd == "audit":
            subject = parse_id(args.subject, "subject") if args.subject else None
            page = await accounts.audit_page(db, subject, args.action, None, None, args.limit)
            return [_json_row(r) for r in page.rows]
        raise AssertionError(cmd)
    finally:
        await pool.close()


async def _expert_named(db: Any, ref: str) -> Any:
    """An expert id, or a name (case-insensitive, whole name) that names exactly one expert."""
    from uuid import UUID

    from taskroute.errors import BadInput, NotFound
    from taskroute.resolvers.accounts import rules as accounts

    try:
        return UUID(ref)
    except ValueError:
        pass
    found = await accounts.experts_named(db, ref, 20)
    if not found:
        raise NotFound(f"no expert is named {ref!r} (ids and whole names are accepted)")
    if len(found) > 1:
        listed = "\n".join(f"  {r['id']}  {r['name']}  ({r['status']})" for r in found)
        raise BadInput(f"{len(found)} experts are named {ref!r}; name one by id:\n{listed}")
    return found[0]["id"]


def _skill_arg(raw: str) -> dict[str, Any]:
    name, _, quality = raw.partition(":")
    return {"skill": name, "quality": float(quality) if quality else 1.0}


def cmd_admin(args: argparse.Namespace) -> None:
    from taskroute.db.migrate import migrate_url
    from taskroute.errors import TaskrouteError

    settings = Settings.from_env()
    if args.data_dir is not None:
        settings = dataclasses.replace(settings, data_dir=args.data_dir)
    try:
        url, server, which = _admin_database(settings)
    except NoDatabase as exc:
        print(exc, file=sys.stderr)
        sys.exit(3)
    print(which, file=sys.stderr)
    asyncio.run(migrate_url(_direct_url(settings, url)))
    try:
        result = asyncio.run(_admin(args, url, settings.pool_statement_cache(url)))
    except TaskrouteError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        sys.exit(2)
    # a person at a terminal reads a table; anything else (a pipe, a file) gets JSON
    if args.json or not sys.stdout.isatty():
        print(json.dumps(result, indent=None, default=str))
    else:
        print(render_table(result))
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="taskroute")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND", help="one of:")
    defaults = argparse.ArgumentDefaultsHelpFormatter

    serve = sub.add_parser(
        "serve",
        help="run the API server (migrates first)",
        description="Serve GraphQL, REST, /dashboard and /work. Without DATABASE_URL an "
        "embedded Postgres starts in TASKROUTE_DATA_DIR. Settings: docs/operations.md.",
        formatter_class=defaults,
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on")
    serve.add_argument("--workers", type=int, default=1, help="server processes on one database")
    serve.add_argument(
        "--log-level",
        default="info",
        help="debug, info, warning, error (logs: JSON, or text "
        "on a terminal; TASKROUTE_LOG_FORMAT=json|text decides)",
    )
    serve.set_defaults(func=cmd_serve)

    migrate = sub.add_parser("migrate", help="apply pending database migrations")
    migrate.set_defaults(func=cmd_migrate)

    admin = sub.add_parser(
        "admin",
        help="manage accounts and credentials (every change is in the admin audit)",
        description="Manage accounts and credentials; every change is kept in the admin audit. "
        "Uses DATABASE_URL, or else the embedded database in --data-dir (never creates one), "
        "and says which on stderr. Prints a table on a terminal, else JSON.",
    )
    # accepted before the command and after it (`admin list-experts --json`)
    common = argparse.ArgumentParser(add_help=False)
    for target, default in ((admin, None), (common, argparse.SUPPRESS)):
        target.add_argument(
            "--data-dir",
            default=default,
            help="the embedded database's folder, where `taskroute serve` ran without "
            "DATABASE_URL (default: TASKROUTE_DATA_DIR, else ./.taskroute)",
        )
        target.add_argument(
            "--json",
            action="store_true",
            default=default if default is not None else False,
            help="print JSON even on a terminal (always when piped)",
        )
    admin_sub = admin.add_subparsers(
        dest="admin_cmd", required=True, metavar="COMMAND", help="one of:"
    )

    def add_admin(name: str, help: str) -> argparse.ArgumentParser:
        return admin_sub.add_parser(name, help=help, parents=[common])

    cust = add_admin("create-customer", help="a new customer; prints its id and token")
    cust.add_argument("name", help="the customer's name")
    exp = add_admin("create-expert", help="a new expert; prints its id and token")
    exp.add_argument("name", help="the expert's name")
    exp.add_argument(
        "--skill", action="append", required=True, help="skill or skill:quality (repeatable)"
    )
    exp.add_argument("--capability", action="append", help="capability tag (repeatable)")
    lst = add_admin("list-experts", help="experts, newest first")
    lst.add_argument("--skill", help="only experts holding this skill")
    lst.add_argument("--status", choices=["active", "disabled"], help="only experts in this status")
    lst.add_argument("--search", help="part of the name")
    lst.add_argument("--limit", type=int, default=200, help="at most this many (default 200)")
    lc = add_admin("list-customers", help="customers, newest first")
    lc.add_argument("--search", help="part of the name")
    lc.add_argument("--limit", type=int, default=200, help="at most this many (default 200)")
    show = add_admin("show-expert", help="an expert's status, skills and current claim")
    show.add_argument(
        "expert", help="expert id, or whole name (an ambiguous name lists the matches)"
    )

    def expert_cmd(name: str, help: str) -> argparse.ArgumentParser:
        p = add_admin(name, help=help)
        p.add_argument("expert", help="expert id")
        p.add_argument("--reason", help="why (kept in the admin audit)")
        return p

    p = expert_cmd("grant-skill", "the expert may claim the skill's tasks at once")
    p.add_argument("skill", help="the skill to grant")
    p.add_argument("--quality", type=float, default=1.0, help="starting quality (0-1, default 1)")
    p = expert_cmd("remove-skill", "live claims on the skill return to the pool")
    p.add_argument("skill", help="the skill to remove")
    p = expert_cmd("set-quality", "the admin-given starting quality of a skill")
    p.add_argument("skill", help="the expert's skill")
    p.add_argument("quality", type=float, help="starting quality (0-1)")
    p.add_argument("--override-measured", action="store_true", help="overwrite what gold measured")
    p = expert_cmd("set-capabilities", "replace the capability tags")
    p.add_argument("tag", nargs="*", help="the new tags (none: clear them)")
    p = expert_cmd("deactivate", "tokens stop working, live claims return to the pool")
    expert_cmd("reactivate", "tokens work again")

    tok = add_admin("create-token", help="a new token for an account (printed once)")
    owner = tok.add_mutually_exclusive_group(required=True)
    owner.add_argument("--customer", help="customer id (one of --customer, --expert)")
    owner.add_argument("--expert", help="expert id (one of --customer, --expert)")
    tok.add_argument("--label", default="", help="a name to tell tokens apart")
    tok.add_argument("--expires-in", type=int, help="seconds until it expires")
    tok.add_argument("--read-only", action="store_true", help="customers: reads only")
    tok.add_argument("--project", help="customers: limited to this project")
    tok.add_argument("--reason", help="why (kept in the admin audit)")
    lt = add_admin("list-tokens", help="an account's credentials (never secrets)")
    owner = lt.add_mutually_exclusive_group(required=True)
    owner.add_argument("--customer", help="customer id (one of --customer, --expert)")
    owner.add_argument("--expert", help="expert id (one of --customer, --expert)")
    rv = add_admin("revoke-token", help="refused everywhere within a second")
    rv.add_argument("credential", help="credential id")
    rv.add_argument("--reason", help="why (kept in the admin audit)")
    rt = add_admin("rotate-token", help="a new token; the old one lives --grace s")
    rt.add_argument("credential", help="credential id")
    rt.add_argument("--grace", type=int, default=3600, help="seconds (default 3600)")
    rt.add_argument("--reason", help="why (kept in the admin audit)")
    au = add_admin("audit", help="the admin audit, oldest first")
    au.add_argument("--subject", help="an expert, customer or credential id")
    au.add_argument("--action", help="only this action (e.g. skill.grant)")
    au.add_argument("--limit", type=int, default=200, help="at most this many (default 200)")
    admin.set_defaults(func=cmd_admin)

    schema = sub.add_parser("schema", help="print the GraphQL schema (SDL)")
    schema.add_argument("-o", "--output", default="-", help="file to write (default: stdout)")
    schema.set_defaults(func=cmd_schema)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    from taskroute.observability.logs import configure_logging

    # Only the server logs by default: an admin command prints its one result, and its logs
    # (migrations, the embedded database) would bury it; warnings and errors still show.
    configure_logging(getattr(args, "log_level", "info" if args.cmd == "serve" else "warning"))
    args.func(args)


if __name__ == "__main__":
    main()
