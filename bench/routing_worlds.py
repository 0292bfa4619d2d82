"""The synthetic worlds of the routing simulator (bench/routing.py) and their makespan bound.

A world is experts with skill sets, projects of three priority classes arriving over time
with deadlines, and tasks with durations. `WORLDS` names the ones where the routing choice
matters (issue 17); each is the default generator with one thing changed, so a difference
between policies in a world comes from that thing:

- `default`: Zipf skill supply, demand falling off more slowly (the tail skills are scarce);
- `specialists`: a few rare skills held only by specialists who also hold common skills, and
  rare work needs nearly all of the specialists' time;
- `tight-low`: low-priority projects with tight (but feasible) deadlines;
- `bursts`: high-priority projects arrive in bursts on top of a steady load;
- `skewed`: task durations are heavy-tailed, per skill and per task;
- `one-class`: every project NORMAL and without a deadline, differing only in integer
  priority (fairness inside a class).

Every draw comes from one seeded generator, so a (world, seed) pair is the same world on
every run.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from dataclasses import dataclass, field, replace

import numpy as np

CLASS_LEVEL = {"high": 100, "normal": 0, "low": -100}
CLASSES = ("high", "normal", "low")


@dataclass
class Project:
    id: uuid.UUID
    cls: str
    priority: int
    release: float
    deadline: float = 0.0
    tasks: list[int] = field(default_factory=list)
    skills: set[str] = field(default_factory=set)


@dataclass
class World:
    name: str
    skills: list[str]
    experts: list[uuid.UUID]
    expert_skills: dict[uuid.UUID, list[str]]
    projects: list[Project]
    # per task (index): item id, project index, skill, duration (s), task priority
    item: list[uuid.UUID]
    project_of: list[int]
    skill_of: list[str]
    duration: list[float]
    task_priority: list[int]
    rare: set[str]


@dataclass(frozen=True)
class WorldSpec:
    name: str
    about: str
    experts: int = 120
    tasks: int = 1200
    skills: int = 16
    projects: int = 10
    zipf: float = 1.1  # skill supply exponent
    demand_exp: float = 0.8  # demand per skill = supply ** this
    mean_duration: float = 300.0  # median seconds of a skill's task
    skill_sigma: float = 0.4  # log-spread of the skills' typical durations
    task_sigma: float = 0.3  # log-spread of one task around its skill's typical duration
    class_mix: tuple[float, float, float] = (0.2, 0.5, 0.3)  # high, normal, low
    # deadline = release + U(lo, hi) x (the world's bound - release), per class
    slack: dict[str, tuple[float, float]] = field(
        default_factory=lambda: dict.fromkeys(CLASSES, (0.5, 1.5))
    )
    # > 0: high-priority projects arrive in this many bursts instead of spread out
    bursts: int = 0
    # > 0: this many rare skills, held only by specialists (who also hold common skills)
    specialist_skills: int = 0
    specialist_share: float = 0.05  # of the experts
    # of the projects, chosen at random: no deadline (fairness, not a deadline, serves them)
    deadline_free: float = 0.0
    # > 0: every project's integer priority is distinct, this far apart inside its class
    priority_step: int = 0


WORLDS: dict[str, WorldSpec] = {
    w.name: w
    for w in (
        WorldSpec("default", "Zipf supply, slower-falling demand: the tail skills are scarce"),
        WorldSpec(
            "specialists",
            "3 rare skills held only by specialists who also hold common skills",
            specialist_skills=3,
        ),
        WorldSpec(
            "tight-low",
            "low-priority projects with tight deadlines, the others loose",
            slack={"high": (0.8, 1.6), "normal": (0.8, 1.6), "low": (0.15, 0.4)},
        ),
        WorldSpec(
            "bursts",
            "high-priority projects arrive in 3 bursts over a steady load",
            class_mix=(0.35, 0.4, 0.25),
            bursts=3,
        ),
        WorldSpec(
            "skewed",
            "heavy-tailed task durations, per skill and per task",
            skill_sigma=1.0,
            task_sigma=1.0,
        ),
        WorldSpec(
            "one-class",
            "12 NORMAL projects differing only in integer priority (-24..20), none with a deadline",
            projects=12,
            class_mix=(0.0, 1.0, 0.0),
            deadline_free=1.0,
            priority_step=4,
        ),
    )
}


def custom_spec(experts: int, tasks: int, skills: int, projects: int, **kw: float) -> WorldSpec:
    """The default world at another size (the single-world mode's command line)."""
    return replace(
        WORLDS["default"], experts=experts, tasks=tasks, skills=skills, projects=projects, **kw
    )


def build_world(spec: WorldSpec, seed: int) -> World:
    rng = np.random.default_rng(seed)
    n_skills = spec.skills
    skills = [f"s{k:03d}" for k in range(n_skills)]
    ranks = np.arange(1, n_skills + 1)
    # Expert supply per skill is Zipf; demand falls off more slowly (supply ** demand_exp),
    # so there is more work per qualified expert in the tail: the rare skills are scarce.
    supply = 1.0 / ranks**spec.zipf
    n_rare = spec.specialist_skills
    if n_rare:
        supply[-n_rare:] = 0.0  # nobody but the specialists holds them
    supply /= supply.sum()
    demand = supply**spec.demand_exp
    demand /= demand.sum()

    def new_id() -> uuid.UUID:  # seeded, so a world (and its tie-breaks) is reproducible
        return uuid.UUID(bytes=rng.bytes(16), version=4)

    experts = [new_id() for _ in range(spec.experts)]
    held: dict[uuid.UUID, list[str]] = {}
    for e in experts:
        k = max(1, min(int(rng.geometric(0.5)), 6))
        picks = rng.choice(n_skills, size=min(k, int((supply > 0).sum())), replace=False, p=supply)
        held[e] = [skills[i] for i in picks]
    if n_rare:
        # Specialists: each holds one rare skill besides their common ones (at least two).
        n_spec = max(n_rare, int(spec.specialist_share * spec.experts))
        for i, e in enumerate(experts[:n_spec]):
            while len(held[e]) < 2:
                extra = skills[int(rng.choice(n_skills, p=supply))]
                if extra not in held[e]:
                    held[e].append(extra)
            held[e].append(skills[n_skills - n_rare + i % n_rare])
        # Rare work needs ~95% of the specialists' time if the world is to finish together.
        common_total = demand[:-n_rare].sum()
        rare_share = 0.95 * n_spec / spec.experts
        demand[:-n_rare] *= (1 - rare_share) / common_total
        demand[-n_rare:] = rare_share / n_rare
    covered = {s for ss in held.values() for s in ss}
    for s in skills:  # every skill has at least one expert
        if s not in covered:
            held[experts[int(rng.integers(len(experts)))]].append(s)
    holders: dict[str, int] = defaultdict(int)
    for ss in held.values():
        for s in ss:
            holders[s] += 1
    if n_rare:
        rare = set(skills[-n_rare:])
    else:
        counts = sorted(holders[s] for s in skills)
        rare_cut = counts[max(0, len(counts) // 10 - 1)]  # the scarcest tenth of the skills
        rare = {s for s in skills if holders[s] <= rare_cut}

    base_duration = {
        s: float(rng.lognormal(math.log(spec.mean_duration), spec.skill_sigma)) for s in skills
    }
    # Work arrives over the first half of the run: the world stays saturated.
    horizon = spec.tasks * spec.mean_duration / max(1, spec.experts * 2)
    classes = rng.choice(list(CLASSES), size=spec.projects, p=list(spec.class_mix))
    sizes = rng.dirichlet(np.ones(spec.projects) * 2) * spec.tasks
    burst_at = [horizon * (i + 0.5) / spec.bursts for i in range(spec.bursts)]
    projects: list[Project] = []
    for i in range(spec.projects):
        cls = str(classes[i])
        if spec.bursts and cls == "high":
            release = burst_at[int(rng.integers(spec.bursts))]
        else:
            release = 0.0 if i < spec.projects // 4 else float(rng.uniform(0, horizon))
        jitter = int(rng.integers(0, 40))
        priority = CLASS_LEVEL[cls] + (jitter if cls != "low" else -jitter)
        if cls == "normal":
            priority = jitter - 20
        if spec.priority_step:
            priority = CLASS_LEVEL[cls] + spec.priority_step * (i - spec.projects // 2)
        projects.append(Project(new_id(), cls, priority, release))
    projects.sort(key=lambda p: p.release)

    item: list[uuid.UUID] = []
    project_of: list[int] = []
    skill_of: list[str] = []
    duration: list[float] = []
    task_priority: list[int] = []
    for pi, p in enumerate(projects):
        n = max(1, int(round(sizes[pi])))
        for j in rng.choice(n_skills, size=n, p=demand):
            s = skills[int(j)]
            p.skills.add(s)
            idx = len(item)
            item.append(new_id())
            project_of.append(pi)
            skill_of.append(s)
            duration.append(max(10.0, base_duration[s] * float(rng.lognormal(0, spec.task_sigma))))
            task_priority.append(int(rng.integers(0, 4)))
            p.tasks.append(idx)
    return World(
        spec.name,
        skills,
        experts,
        held,
        projects,
        item,
        project_of,
        skill_of,
        duration,
        task_priority,
        rare,
    )


def assign_deadlines(world: World, spec: WorldSpec, bound: float, seed: int) -> None:
    rng = np.random.default_rng(seed + 1)
    for p in world.projects:
        lo, hi = spec.slack[p.cls]
        span = max(bound - p.release, 600.0)
        p.deadline = p.release + float(rng.uniform(lo, hi)) * span
        if spec.deadline_free and rng.random() < spec.deadline_free:
            p.deadline = math.inf


# --- the LP lower bound -------------------------------------------------------------------


def lp_makespan(world: World, tasks: list[int]) -> float:
    """Least T such that the work of `tasks` can be split (fractionally, preemptively) over
    the experts qualified for each skill with nobody working more than T: a max-flow / LP
    relaxation, so no schedule of the same tasks can finish sooner."""
    from scipy.optimize import linprog
    from scipy.sparse import lil_matrix

    work: dict[str, float] = defaultdict(float)
    for t in tasks:
        work[world.skill_of[t]] += world.duration[t]
    if not work:
        return 0.0
    skills = sorted(work)
    sidx = {s: i for i, s in enumerate(skills)}
    pairs = [
        (sidx[s], ei)
        for ei, e in enumerate(world.experts)
        for s in world.expert_skills[e]
        if s in sidx
    ]
    n = len(pairs) + 1  # x per (skill, expert) pair, then T
    a_eq = lil_matrix((len(skills), n))
    a_ub = lil_matrix((len(world.experts), n))
    for j, (si, ei) in enumerate(pairs):
        a_eq[si, j] = 1.0
        a_ub[ei, j] = 1.0
    a_ub[:, n - 1] = -1.0
    c = np.zeros(n)
    c[-1] = 1.0
    res = linprog(
        c,
        A_ub=a_ub.tocsr(),
        b_ub=np.zeros(len(world.experts)),
        A_eq=a_eq.tocsr(),
        b_eq=np.array([work[s] for s in skills]),
        bounds=(0, None),
        method="highs",
    )
    if res.status != 0:
        raise RuntimeError(f"LP failed: {res.message}")
    return float(res.x[-1])


def lower_bound(world: World) -> float:
    """Work released at or after r cannot start before r: max over releases of r + LP(r)."""
    best = max(
        world.projects[world.project_of[t]].release + world.duration[t]
        for t in range(len(world.item))
    )
    for r in sorted({p.release for p in world.projects}):
        later = [
            t for t in range(len(world.item)) if world.projects[world.project_of[t]].release >= r
        ]
        best = max(best, r + lp_makespan(world, later))
    return best
