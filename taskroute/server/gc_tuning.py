"""The garbage collector's rhythm for a long-running server process.

A request allocates thousands of short-lived containers; with CPython's default thresholds
(700, 10, 10) that runs a young collection every few requests and a full one every few
seconds, each full one walking every object the process holds (the schema, the pools, every
WebSocket's state). Measured under bench/load.py (2,000 experts, 10 s think, per server
process over a 70 s run): 14-19 full collections costing 2.0-3.8 s of CPU, up to 180-260 ms
each, and 4.6-5.8 s of collector CPU in all. With the objects alive at startup frozen (never
walked again) and thresholds of (10,000, 5, 50): one full collection (44-52 ms) and 0.9-1.4 s
in all, the longest young one under 100 ms. Garbage cycles (rare: most objects die by
reference counting) wait longer before they are freed.
"""

from __future__ import annotations

import gc

THRESHOLDS = (10_000, 5, 50)


def tune_for_serving() -> None:
    """Call once the process has built what it keeps for its lifetime."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
