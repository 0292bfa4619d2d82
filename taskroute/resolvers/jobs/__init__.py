"""The background jobs: what runs periodically in every server process (one at a time where
it must), beside the rules it applies. `taskroute.server.jobs` runs them and stops them.

A job whose rule a request also applies (the deadline judge, the admin's "evaluate now") finds
that rule where requests do, in the domain's modules.
"""
