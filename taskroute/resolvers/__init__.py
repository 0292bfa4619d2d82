"""The domain: the rules. Who may claim, what pays, what a forecast says; no HTTP, no GraphQL here.
The background jobs that apply them periodically are in `jobs/`; the API layers above call in.
"""
