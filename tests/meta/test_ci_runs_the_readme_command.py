"""CI runs exactly what the README tells a developer to run."""

from __future__ import annotations

import re

from ..procs import ROOT


def test_ci_runs_the_readmes_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("**Run the tests**", 1)[1]
    found = re.search(r"```sh\n(.*?)\n```", section, re.S)
    assert found is not None, "README: the test command's ```sh block is gone"
    command = found.group(1).strip()
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert command in ci, f".ci/run must run the README's test command verbatim:\n{command}"
