"""Webhooks: a customer's endpoints and the signed delivery of events to them.

Events are written by triggers in the transaction that makes the change
(db/functions/webhooks.sql), one delivery row per matching endpoint; the sender job
(resolvers/jobs/webhooks.py) claims due deliveries with a lease (`FOR UPDATE SKIP LOCKED`, at
most one attempt per delivery at a time across processes, a bounded number per endpoint),
signs them as Standard Webhooks does (`signing`), posts them to an address checked to be public
(`addresses`), and records each attempt; failures are retried with exponential back-off and
jitter until the give-up window, and an endpoint failing for days is disabled with a reason.
`endpoints` holds the API's rules: who manages which endpoint, the delivery log, redelivery,
replay from a change-feed cursor, and the test ping.
"""
