"""Realtime: Postgres LISTEN/NOTIFY behind broadcaster's backend interface, fanned out to
GraphQL subscriptions (`taskAvailable`, `projectProgress`) by a per-process `Hub`."""
