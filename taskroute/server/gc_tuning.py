"""The garbage collector's rhythm for a long-running server process: CPython's default
thresholds run a full collection, which walks every object the process holds, every few seconds.
"""

from __future__ import annotations

import gc

THRESHOLDS = (10_000, 5, 50)


def tune_for_serving() -> None:
    """Call once the process has built what it keeps for its lifetime."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
