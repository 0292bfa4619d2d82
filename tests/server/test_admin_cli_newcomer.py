"""`taskroute admin` as a newcomer meets it: it says which database it uses, never creates one,
prints a table to a person and JSON to a pipe, names experts by name, and explains itself."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from taskroute.server.cli import build_parser

from ..procs import ROOT


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **extra}
    for name in ("DATABASE_URL", "TASKROUTE_DATA_DIR"):
        if name not in extra:
            env.pop(name, None)
    return env


def run(*argv: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taskroute", "admin", *argv],
        env=_env(**env), cwd=cwd, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def run_on_a_terminal(*argv: str, **env: str) -> tuple[int, str, str]:
    """The command with its stdout on a pseudo-terminal (what a person at a shell sees)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "taskroute", "admin", *argv],
        env=_env(**env), stdout=follower, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, b"".join(chunks).decode().replace("\r\n", "\n"), err


def test_no_database_url_and_no_embedded_folder_is_refused_not_created() -> None:
    elsewhere = Path(tempfile.mkdtemp(prefix="taskroute-cli-"))
    named = elsewhere / "typo"
    for argv, where in (
        (["list-customers"], elsewhere / ".taskroute"),
        (["list-customers", "--data-dir", str(named)], named),
        (["--data-dir", str(named), "create-customer", "acme"], named),
    ):
        out = run(*argv, cwd=elsewhere)
        assert out.returncode == 3, (out.stdout, out.stderr)
        assert out.stdout == ""
        # where it looked, and how to point it elsewhere
        assert str(where.resolve()) in out.stderr
        assert "--data-dir" in out.stderr and "DATABASE_URL" in out.stderr
        assert not where.exists() and list(elsewhere.iterdir()) == []
    out = run("list-customers", cwd=elsewhere, TASKROUTE_DATA_DIR=str(named))
    assert out.returncode == 3 and str(named) in out.stderr
    elsewhere.rmdir()


def test_says_which_database_with_the_password_masked(database_url: str) -> None:
    # trust auth ignores the password, so the command works and must not print it
    parts = urlsplit(database_url)
    user, host = parts.username or "postgres", parts.netloc.rpartition("@")[2]
    with_password = urlunsplit(parts._replace(netloc=f"{user}:s3cr3t@{host}"))
    out = run("create-customer", "acme", DATABASE_URL=with_password)
    assert out.returncode == 0, out.stderr
    assert "s3cr3t" not in out.stderr + out.stdout
    masked = urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
    assert out.stderr.splitlines() == [f"database: {masked}"]


def test_table_on_a_terminal_json_when_piped_or_asked(database_url: str) -> None:
    created = json.loads(run("create-customer", "Acme Labs", DATABASE_URL=database_url).stdout)
    code, table, err = run_on_a_terminal("list-customers", DATABASE_URL=database_url)
    assert code == 0, err
    header, rule, *rows = table.strip().splitlines()
    assert re.match(r"^id\s+name\s+", header) and set(rule) <= {"-", " "}
    assert any(created["id"] in r and "Acme Labs" in r for r in rows), table
    # --json on a terminal; JSON without asking through a pipe
    code, text, _ = run_on_a_terminal("list-customers", "--json", DATABASE_URL=database_url)
    assert [c["id"] for c in json.loads(text)] == [created["id"]]
    piped = run("list-customers", DATABASE_URL=database_url)
    assert [c["name"] for c in json.loads(piped.stdout)] == ["Acme Labs"]


def test_show_expert_by_name_and_an_ambiguous_name_lists_the_matches(database_url: str) -> None:
    def expert(name: str) -> str:
        out = run("create-expert", name, "--skill", "grading", DATABASE_URL=database_url)
        return str(json.loads(out.stdout)["id"])

    ada = expert("Ada Lovelace")
    twins = [expert("Sam"), expert("sam")]
    shown = json.loads(run("show-expert", "ada lovelace", DATABASE_URL=database_url).stdout)
    assert shown["id"] == ada and [s["skill"] for s in shown["skills"]] == ["grading"]
    assert json.loads(run("show-expert", ada, DATABASE_URL=database_url).stdout)["id"] == ada

    out = run("show-expert", "Sam", DATABASE_URL=database_url)
    assert out.returncode == 2 and out.stdout == ""
    assert "2 experts are named 'Sam'" in out.stderr
    assert all(t in out.stderr for t in twins)
    out = run("show-expert", "Nobody", DATABASE_URL=database_url)
    assert out.returncode == 2 and "no expert is named 'Nobody'" in out.stderr

    code, table, _ = run_on_a_terminal("show-expert", "Ada Lovelace", DATABASE_URL=database_url)
    assert code == 0 and re.search(rf"^id\s+{ada}$", table, re.M), table
    assert re.search(r"^skills:\nskill\s+status", table, re.M), table


def test_every_admin_command_and_option_has_a_help_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "taskroute", "admin", "--help"],
        env=_env(), capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "cmd").choices
    admin_commands = next(a for a in commands["admin"]._actions if a.dest == "admin_cmd").choices
    assert len(admin_commands) >= 16
    for name in admin_commands:
        # one line each in `admin --help`: the name and what it does
        assert re.search(rf"^\s+{name}\s+\S", out, re.M), name
    every = [(f"admin {n}", c) for n, c in admin_commands.items()] + list(commands.items())
    for name, command in [("taskroute", parser), *every]:
        for action in command._actions:
            assert action.help, f"{name}: {action.dest} has no help"
