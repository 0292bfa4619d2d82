"""The event loop's lateness, measured all the time in every server process.

A request's latency has three parts on the server: the wait for the event loop (parsing,
other requests' Python, a garbage collection), the wait for a database slot (admission.py)
and the SQL itself. The first is invisible from inside a request, so a timer measures it: it
asks to wake in PERIOD seconds and records how much later it woke. Cheap (ten wake-ups a
second) and exported as `taskroute_event_loop_lag_seconds`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from taskroute.observability import metrics

PERIOD = 0.1


async def watch_event_loop(
    pause: Callable[[float], Awaitable[None]], stopping: Callable[[], bool]
) -> None:
    """Observe the loop's lateness every PERIOD until `stopping()`; `pause` returns early
    on a stop (Jobs.pause), so a shutdown does not wait for the timer."""
    loop = asyncio.get_running_loop()
    while not stopping():
        asked = loop.time()
        await pause(PERIOD)
        if stopping():
            return
        metrics.EVENT_LOOP_LAG_SECONDS.observe(max(0.0, loop.time() - asked - PERIOD))
