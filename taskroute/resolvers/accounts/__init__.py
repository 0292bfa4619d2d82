"""Accounts: customers and experts, their credentials (tokens, the viewer they resolve to, the
per-process cache of them), authentication, and the account rules with the admin audit (`rules`).
"""
