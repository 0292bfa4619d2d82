"""Probes asked at one moment share one statement (db/batched_probe.py): while a statement is
out, the probes that arrive wait and are answered together by the next one; every waiter gets
its own row (or None), and a failed statement fails exactly its own batch."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from taskroute.db.batched_probe import BatchedProbe
from taskroute.errors import Unavailable


class Fake:
    """A statement that answers {"k": key} for the keys it is given, except "absent", once the
    test lets it (`release`); it records the keys of each call."""

    def __init__(self) -> None:
        self.calls: list[list[Any]] = []
        self.gates: list[asyncio.Event] = []
        self.fail: set[int] = set()  # call numbers that raise

    async def fetch(self, query: str, keys: list[Any]) -> list[dict[str, Any]]:
        assert query == "q"
        self.calls.append(list(keys))
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()
        if len(self.calls) - 1 in self.fail:
            raise Unavailable("no answer", retry_after=7)
        return [{"k": k} for k in keys if k != "absent"]

    async def release(self, call: int) -> None:
        while len(self.gates) <= call:
            await asyncio.sleep(0)
        self.gates[call].set()


async def test_probes_arriving_while_one_is_out_share_the_next_statement() -> None:
    fake = Fake()
    probe = BatchedProbe(fake.fetch, "q", "k")  # type: ignore[arg-type]
    first = asyncio.create_task(probe.get("a"))
    while not fake.calls:
        await asyncio.sleep(0)
    # The first statement is out: these four wait for the next one (b twice).
    later = [asyncio.create_task(probe.get(k)) for k in ("b", "c", "b", "absent")]
    await asyncio.sleep(0)
    await fake.release(0)
    assert await first == {"k": "a"}
    await fake.release(1)
    assert [await t for t in later] == [{"k": "b"}, {"k": "c"}, {"k": "b"}, None]
    assert fake.calls == [["a"], ["b", "c", "absent"]]


async def test_a_failed_statement_fails_its_batch_only() -> None:
    fake = Fake()
    fake.fail = {0}
    probe = BatchedProbe(fake.fetch, "q", "k")  # type: ignore[arg-type]
    doomed = [asyncio.create_task(probe.get(k)) for k in ("a", "b")]
    while not fake.calls:
        await asyncio.sleep(0)
    survivor = asyncio.create_task(probe.get("c"))
    await asyncio.sleep(0)
    await fake.release(0)
    for task in doomed:
        with pytest.raises(Unavailable):
            await task
    # each waiter raised an exception of its own
    errors = [t.exception() for t in doomed]
    assert errors[0] is not errors[1]
    for error in errors:  # the same error: message, class and attributes
        assert isinstance(error, Unavailable)
        assert (str(error), error.retry_after) == ("no answer", 7)
    await fake.release(1)
    assert await survivor == {"k": "c"}
    assert fake.calls == [["a", "b"], ["c"]]


async def test_a_waiter_that_gives_up_leaves_the_others_answered() -> None:
    fake = Fake()
    probe = BatchedProbe(fake.fetch, "q", "k", max_batch=2)  # type: ignore[arg-type]
    tasks = [asyncio.create_task(probe.get(k)) for k in ("a", "b", "c")]
    while not fake.calls:
        await asyncio.sleep(0)
    tasks[0].cancel()  # its request went away while the statement was out
    await fake.release(0)
    await fake.release(1)
    assert [await t for t in tasks[1:]] == [{"k": "b"}, {"k": "c"}]
    assert tasks[0].cancelled()
    # at most max_batch keys per statement
    assert fake.calls == [["a", "b"], ["c"]]
