"""How many subscriptions a socket, a credential and an account may hold at once (per server
process).

Each subscription holds a hub registration, a queue and, for forecasts, a share of the
re-evaluations: a client that opens thousands on one socket (or across sockets with one token)
must be refused with a clear error instead of being served until the process runs out. A
customer mints tokens freely, so each token's budget alone is no bound: the account (the
customer, or the expert) has one too, across all its tokens.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

from taskroute.errors import TooManySubscriptions


class SubscriptionBudget:
    def __init__(self, per_socket: int, per_credential: int, per_account: int) -> None:
        self.per_socket = per_socket
        self.per_credential = per_credential
        self.per_account = per_account
        self._by_credential: Counter[Any] = Counter()
        self._by_account: Counter[Any] = Counter()
        self._by_socket: Counter[int] = Counter()

    @contextlib.contextmanager
    def slot(self, socket: object, credential: Any, account: Any) -> Iterator[None]:
        """Hold one subscription of `credential` (of `account`) on `socket` for the block's
        duration."""
        self.take(socket, credential, account)
        try:
            yield
        finally:
            self.give_back(socket, credential, account)

    def take(self, socket: object, credential: Any, account: Any) -> None:
        """`slot` without a context manager: `give_back` with the same arguments after."""
        sock = id(socket)
        if self._by_socket[sock] >= self.per_socket:
            raise TooManySubscriptions(
                f"at most {self.per_socket} subscriptions per connection; close one first"
            )
        if self._by_credential[credential] >= self.per_credential:
            raise TooManySubscriptions(
                f"at most {self.per_credential} subscriptions per credential on this server"
            )
        if self._by_account[account] >= self.per_account:
            raise TooManySubscriptions(
                f"at most {self.per_account} subscriptions per account on this server, across"
                " its credentials"
            )
        self._by_socket[sock] += 1
        self._by_credential[credential] += 1
        self._by_account[account] += 1

    def give_back(self, socket: object, credential: Any, account: Any) -> None:
        for counter, key in (
            (self._by_socket, id(socket)),
            (self._by_credential, credential),
            (self._by_account, account),
        ):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]

    def stats(self) -> dict[str, int]:
        return {
            "sockets": len(self._by_socket),
            "credentials": len(self._by_credential),
            "accounts": len(self._by_account),
        }
