"""How close to the LP makespan bound a policy that does not know task durations can get.

    PYTHONPATH=. python bench/routing_tail.py               # bench/routing.py's worlds, seeds 7-11
    PYTHONPATH=. python bench/routing_tail.py --issue-size  # the issue's 2000-expert world

The LP bound (routing_worlds.lower_bound) splits work fractionally. A real schedule hands out
whole tasks, and the claim cannot know a task's duration before it is done, so the holders of
the bottleneck skill finish their last tasks at different times. This reference is optimistic
for any policy: every skill's holders work on that skill alone (no competing skill, no
priority), taking its tasks in random order from their release, never idle while one is open;
the world's makespan is then at least its slowest skill's drain (up to list-scheduling
anomalies). `LPT` (longest task first) is what knowing durations would buy. Printed as
multiples of the LP bound, the median over random orders per seed (heavy-tailed durations
make the mean a poor summary: one order that leaves the longest task last dominates it).
"""

from __future__ import annotations

import argparse
import heapq
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from routing_worlds import WORLDS, World, build_world, custom_spec, lower_bound  # noqa: E402


def drain(world: World, skill: str, holders: int, key: np.ndarray) -> float:
    """List scheduling of the skill's tasks on its `holders`, in `key` order within a release."""
    tasks = [t for t, s in enumerate(world.skill_of) if s == skill]
    release = [world.projects[world.project_of[t]].release for t in range(len(world.item))]
    tasks.sort(key=lambda t: (release[t], key[t]))
    free = [0.0] * holders
    end = 0.0
    for t in tasks:
        done = max(heapq.heappop(free), release[t]) + world.duration[t]
        heapq.heappush(free, done)
        end = max(end, done)
    return end


def reference(world: World, reps: int, seed: int) -> tuple[float, float, int]:
    """(median random-order makespan, LPT makespan, holders of the slowest skill)."""
    holders: dict[str, int] = defaultdict(int)
    for e in world.experts:
        for s in world.expert_skills[e]:
            holders[s] += 1
    skills = sorted(set(world.skill_of))
    rng = np.random.default_rng(1000 + seed)
    runs = []
    for _ in range(reps):
        key = rng.random(len(world.item))
        runs.append(max(drain(world, s, holders[s], key) for s in skills))
    durations = -np.array(world.duration)
    by_skill = {s: drain(world, s, holders[s], durations) for s in skills}
    slowest = max(by_skill, key=lambda s: by_skill[s])
    return float(np.median(runs)), by_skill[slowest], holders[slowest]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--issue-size", action="store_true", help="2000 experts, 20k tasks, 200 skills")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20, help="random orders per seed")
    args = ap.parse_args()
    seeds = range(7, 7 + args.seeds)
    specs = [custom_spec(2000, 20000, 200, 40)] if args.issue_size else list(WORLDS.values())
    for spec in specs:
        rows = []
        for seed in seeds:
            world = build_world(spec, seed)
            bound = lower_bound(world)
            med, lpt, n = reference(world, args.reps, seed)
            rows.append((med / bound, lpt / bound, n))
        label = f"{spec.name} ({spec.experts} experts)"
        print(
            f"{label:<26} random order "
            + " ".join(f"{r:.3f}" for r, _, _ in rows)
            + f"  (median {np.median([r for r, _, _ in rows]):.3f});  LPT "
            + " ".join(f"{x:.3f}" for _, x, _ in rows)
            + "; holders of the slowest skill "
            + " ".join(str(n) for _, _, n in rows),
            flush=True,
        )


if __name__ == "__main__":
    main()
