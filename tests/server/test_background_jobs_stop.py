"""Background jobs stop at a safe point: a running pass finishes, no new one starts."""

from __future__ import annotations

import asyncio

from taskroute.errors import Unavailable
from taskroute.server.jobs import Jobs


async def test_stop_lets_the_running_pass_finish_and_starts_no_other() -> None:
    jobs = Jobs()
    inside = asyncio.Event()
    release = asyncio.Event()
    finished: list[int] = []

    async def one_pass() -> None:
        inside.set()
        await release.wait()  # e.g. a transaction in progress
        finished.append(len(finished))

    jobs.every("job", 3600, one_pass)
    await inside.wait()
    stopping = asyncio.create_task(jobs.stop(grace=60))
    await asyncio.sleep(0)  # the stop is requested; the pass is still running
    assert jobs.stopping and not stopping.done()
    release.set()
    await stopping
    assert finished == [0]


async def test_a_full_batch_runs_again_at_once_until_the_stop() -> None:
    jobs = Jobs()
    passes = 0

    async def one_pass() -> bool:
        nonlocal passes
        passes += 1
        if passes == 3:
            jobs.request_stop()
        return True  # always "more waiting": only the stop ends the loop

    jobs.every("batches", 3600, one_pass)
    while not jobs.stopping:
        await asyncio.sleep(0)
    await jobs.stop(grace=60)
    assert passes == 3


async def test_a_pass_past_the_grace_is_cancelled() -> None:
    jobs = Jobs()
    inside = asyncio.Event()
    cancelled = asyncio.Event()

    async def stuck() -> None:
        inside.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    jobs.every("stuck", 3600, stuck)
    await inside.wait()
    await jobs.stop(grace=0.05)
    assert cancelled.is_set()


async def test_failures_are_retried_after_the_interval_not_raised() -> None:
    jobs = Jobs()
    calls = 0

    async def flaky() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise Unavailable("the database is restarting")
        if calls == 2:
            raise RuntimeError("transient")
        jobs.request_stop()

    jobs.every("flaky", 0, flaky)
    while not jobs.stopping:
        await asyncio.sleep(0)
    await jobs.stop(grace=60)
    assert calls == 3


async def test_spawned_jobs_are_told_to_stop() -> None:
    jobs = Jobs()
    told = asyncio.Event()

    async def own_loop() -> None:
        await told.wait()

    jobs.spawn("worker", own_loop(), on_stop=told.set)
    await jobs.stop(grace=60)
    assert told.is_set()
