"""The deadline alerts job: every deadline judged by `alerts.evaluate`, the rule the admin's
`evaluateDeadlines` mutation also runs."""

from __future__ import annotations

from taskroute.config import Settings
from taskroute.db.pool import Database
from taskroute.resolvers import alerts


async def alerts_pass(db: Database, settings: Settings) -> None:
    """One pass: judge every deadline, writing each flip once (skipped while another process
    holds the evaluator's lock)."""
    await alerts.evaluate(db, settings)
