"""Quality decisions (issue 15) through the public API: the sequential pause test (a clearly bad
expert is paused within a few gold answers, a good one is not, on fixed seeds), resolution
weighted by measured accuracy, and dynamic overlap (answers collected until confident)."""

from __future__ import annotations

import random
import statistics
from typing import Any
from uuid import UUID

import asyncpg
import pytest

from taskroute.resolvers import claims

from ..helpers import ADMIN_TOKEN, Api
from .test_redundancy_gold_and_adjudication import (
    SKILL,
    all_results,
    items_of,
    set_policy,
    work_until_empty,
)


def gold_of(n: int, start: int = 1000) -> list[dict[str, Any]]:
    return [
        {"skill": SKILL, "payload": {"n": start + i}, "gold": {"label": "yes"}} for i in range(n)
    ]


async def pause_evidence(api: Api, expert_id: str) -> dict[str, Any]:
    data = await api.gql(
        "query($e: ID!) { expertSkills(expertId: $e) { skill status statusReason goldSeen"
        " goldCorrect pauseEvidence } }",
        {"e": expert_id},
        ADMIN_TOKEN,
    )
    return {s["skill"]: s for s in data["expertSkills"]}[SKILL]


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_sequential_test_pauses_the_bad_expert_fast_and_not_the_good_one(
    api: Api, db: asyncpg.Connection, seed: int
) -> None:
    customer = await api.create_customer()
    good = await api.create_expert([SKILL], name="good")
    bad = await api.create_expert([SKILL], name="bad")
    created = await api.create_project(
        customer["token"], items_of(60) + gold_of(80), redundancy=2, payCents=5
    )
    project_id = created["project"]["id"]
    # The defaults are the sequential rule; a steady gold share high enough to test the good
    # expert on many gold answers in a short test.
    policy = await set_policy(
        api, customer["token"], project_id, goldRatio=0.4, provenGoldRatio=0.4
    )
    assert policy["pauseBelow"] == 0.5

    rng = random.Random(seed)
    # Right 85% of the time (gold and real work alike): above the trusted 75%.
    good_claims = await work_until_empty(
        api, good["token"], lambda c: {"label": "yes" if rng.random() < 0.85 else "no"}
    )
    bad_claims = await work_until_empty(api, bad["token"], lambda c: {"label": "no"})

    g = await pause_evidence(api, good["id"])
    assert g["status"] == "active", g
    assert g["goldSeen"] >= 15, "the good expert was tested on enough gold to mean something"
    assert g["pauseEvidence"] < 1

    b = await pause_evidence(api, bad["id"])
    assert b["status"] == "paused"
    assert b["goldCorrect"] == 0
    # 0 of 5 wrong answers: 336 times likelier from an expert below 0.5 than from one at 0.75;
    # the default risk 0.005 needs 200 times. Five gold answers, never fewer than pauseMinGold.
    assert b["goldSeen"] == 5
    assert b["pauseEvidence"] >= 200
    assert "sequential test" in b["statusReason"] and "200 times" in b["statusReason"]
    # Adaptive gold share: a new expert is not cleared, so every claim was gold and the pause
    # came on the 5th task (the fixed rule took 26 to 38 in issue 15).
    assert len(bad_claims) == 5
    kinds = [
        r["kind"]
        for r in await db.fetch(
            """SELECT t.kind FROM assignments a JOIN tasks t ON t.id = a.task_id
               WHERE a.expert_id = $1 ORDER BY a.claimed_at""",
            UUID(bad["id"]),
        )
    ]
    assert kinds == ["gold"] * 5
    assert len(good_claims) > len(bad_claims)

    # The report states the rule in words and shows the evidence, without naming anyone.
    data = await api.gql(
        "query($p: ID!) { qualityReport(projectId: $p) { rules experts { skill status"
        " goldSeen pauseEvidence } } }",
        {"p": project_id},
        customer["token"],
    )
    report = data["qualityReport"]
    assert any("200 times likelier" in r for r in report["rules"])
    assert sorted(e["status"] for e in report["experts"]) == ["active", "paused"]

    # Unpausing is an admin's decision and restarts the test from no evidence.
    await api.gql(
        'mutation($e: ID!) { unpauseExpert(expertId: $e, skill: "labeling") { status } }',
        {"e": bad["id"]},
        ADMIN_TOKEN,
    )
    assert (await pause_evidence(api, bad["id"]))["pauseEvidence"] == 1.0


async def test_a_random_guesser_is_paused_within_fifteen_tasks_and_a_good_expert_never(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The case issue 15 measured slowest: an expert guessing among 4 answers (right a quarter
    of the time), next to one right 80% of the time, under the default policy (steady gold 10%,
    onboarding 30%, suspects 100%, cleared at 5 times). Five fixed seeds, each its own project
    and experts: every guesser is paused, after a median of at most 15 tasks (the issue's
    target), and no good expert is. The service's gold draw is seeded too, so each seed's
    outcome is fixed."""
    labels = ["yes", "no", "maybe", "skip"]
    tasks_until_paused = []
    for seed in range(5):
        monkeypatch.setattr(claims, "random", random.Random(f"draw/{seed}"))
        rng = random.Random(seed)
        customer = await api.create_customer()
        created = await api.create_project(
            customer["token"], items_of(80) + gold_of(60), redundancy=1, payCents=5
        )
        await set_policy(api, customer["token"], created["project"]["id"], answerField="label")
        guesser = await api.create_expert([SKILL], name=f"guesser{seed}")
        good = await api.create_expert([SKILL], name=f"good{seed}")

        guessed = await work_until_empty(
            api, guesser["token"], lambda c, r=rng: {"label": r.choice(labels)}
        )
        g = await pause_evidence(api, guesser["id"])
        assert g["status"] == "paused", (seed, g)
        assert g["pauseEvidence"] >= 200
        tasks_until_paused.append(len(guessed))

        await work_until_empty(
            api, good["token"], lambda c, r=rng: {"label": "yes" if r.random() < 0.8 else "no"}
        )
        e = await pause_evidence(api, good["id"])
        assert e["status"] == "active", (seed, e)
        assert e["goldSeen"] >= 5, "the good expert answered gold too"
    # seeds 0-4 give 8, 14, 15, 10 and 16 tasks (clearEvidence 1, the rule before, was slower:
    # issue 15 measured a median of 16.5 in bench/quality.py)
    assert statistics.median(tasks_until_paused) <= 15, tasks_until_paused


async def test_a_new_expert_gets_the_suspect_share_until_cleared(
    api: Api, db: asyncpg.Connection
) -> None:
    """A new expert has no evidence either way, so is not cleared: every claim is gold
    (suspectGoldRatio 1.0) until the gold answers are clearEvidence (5) times likelier from a
    trusted expert than from one below the bar. One right answer is 3 times, two are 6.75
    times. With clearEvidence 1 (the rule before) a new expert was not a suspect at all."""
    customer = await api.create_customer()
    created = await api.create_project(
        customer["token"], items_of(20) + gold_of(20), redundancy=1, payCents=5
    )
    project_id = created["project"]["id"]
    # Outside the suspect share, practically no gold: the steady share is 1e-9, no onboarding.
    await set_policy(
        api,
        customer["token"],
        project_id,
        goldRatio=1e-9,
        explorationGoldRatio=0.0,
        answerField="label",
    )

    async def kinds_of_claims(token: str, n: int) -> list[str]:
        kinds = []
        for _ in range(n):
            claim = await api.claim(token)
            assert claim is not None
            gold = claim["task"]["payload"]["n"] >= 1000
            kinds.append("gold" if gold else "real")
            await api.submit(token, claim["assignmentId"], {"label": "yes"})
        return kinds

    fresh = await api.create_expert([SKILL], name="fresh")
    assert await kinds_of_claims(fresh["token"], 1) == ["gold"]
    e = await pause_evidence(api, fresh["id"])
    assert e["pauseEvidence"] == pytest.approx(1 / 3, rel=1e-3)  # 3 times in their favour
    assert await kinds_of_claims(fresh["token"], 1) == ["gold"]  # not cleared yet
    e = await pause_evidence(api, fresh["id"])
    assert 1 / e["pauseEvidence"] == pytest.approx(6.75, rel=0.01)  # cleared at 5
    assert await kinds_of_claims(fresh["token"], 3) == ["real"] * 3
    assert (e["goldSeen"], e["status"]) == (2, "active")

    # The customer reads the rule in the report.
    data = await api.gql(
        "query($p: ID!) { qualityReport(projectId: $p) { rules } }",
        {"p": project_id},
        customer["token"],
    )
    assert any(
        "cleared once their gold answers are 5 times" in r for r in data["qualityReport"]["rules"]
    )

    # clearEvidence 1: suspect only while the evidence leans against the expert; a new
    # expert (no evidence) gets the steady share.
    data = await api.gql(
        "mutation($p: ID!) { setQualityPolicy(projectId: $p, input: {clearEvidence: 1})"
        " { clearEvidence } }",
        {"p": project_id},
        customer["token"],
    )
    assert data["setQualityPolicy"]["clearEvidence"] == 1
    other = await api.create_expert([SKILL], name="other")
    assert await kinds_of_claims(other["token"], 2) == ["real"] * 2


async def _answer_gold(api: Api, token: str, n: int, label: str) -> None:
    for _ in range(n):
        claim = await api.claim(token)
        assert claim is not None and "n" in claim["task"]["payload"]
        assert claim["task"]["payload"]["n"] >= 1000, "expected a gold serving"
        await api.submit(token, claim["assignmentId"], {"label": label})


async def test_weighted_resolution_follows_the_measured_expert(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    experts = [await api.create_expert([SKILL], name=f"e{i}") for i in range(3)]
    created = await api.create_project(customer["token"], items_of(1) + gold_of(30), redundancy=3)
    project_id = created["project"]["id"]
    # Everyone answers 8 gold first (nobody is paused: this test is about weights).
    await set_policy(
        api,
        customer["token"],
        project_id,
        goldRatio=1.0,
        explorationTasks=0,
        pauseRule="fixed",
        pauseBelow=0.0,
        answerField="label",
    )
    await _answer_gold(api, experts[0]["token"], 8, "yes")  # 8 of 8 right
    await _answer_gold(api, experts[1]["token"], 8, "no")  # 0 of 8
    await _answer_gold(api, experts[2]["token"], 8, "no")
    data = await api.gql(
        "mutation($p: ID!) { setQualityPolicy(projectId: $p, input: {goldRatio: 0,"
        ' resolution: "weighted", answerChoices: 4, adjudicate: false}) { resolution } }',
        {"p": project_id},
        customer["token"],
    )
    assert data["setQualityPolicy"]["resolution"] == "weighted"

    # The measured expert says cat, the two who failed every gold say dog: a head count
    # would answer dog; the weights answer cat (not confident enough to call it 'weighted',
    # and adjudication is off, so the heaviest answer at the redundancy cap).
    for e, label in zip(experts, ["cat", "dog", "dog"], strict=True):
        claim = await api.claim(e["token"])
        assert claim is not None and claim["task"]["payload"] == {"n": 0}
        await api.submit(e["token"], claim["assignmentId"], {"label": label})
    data = await api.gql(
        "query($p: ID!) { results(projectId: $p) { items { answer agreement method confidence"
        " } } }",
        {"p": project_id},
        customer["token"],
    )
    [result] = data["results"]["items"]
    assert result["answer"] == {"label": "cat"}
    assert result["method"] == "weighted-plurality"
    assert result["agreement"] == pytest.approx(1 / 3, abs=1e-6)  # customers still see it
    # weight of 8/8 right: ln(0.9 / 0.1) + ln(3); 0/8 right weighs nothing
    w = 2.1972245773 + 1.0986122887
    expected = 2.718281828**w / (2.718281828**w + 1 + 2)
    assert result["confidence"] == pytest.approx(expected, abs=1e-4)


async def test_dynamic_overlap_stops_when_confident_and_asks_for_more_when_not(
    api: Api, db: asyncpg.Connection
) -> None:
    customer = await api.create_customer()
    experts = [await api.create_expert([SKILL], name=f"e{i}") for i in range(4)]
    # A warm-up item gives gold something to be mixed into.
    created = await api.create_project(
        customer["token"], items_of(1, "warmup") + gold_of(40), redundancy=5
    )
    project_id = created["project"]["id"]
    await set_policy(
        api,
        customer["token"],
        project_id,
        goldRatio=1.0,
        provenGoldRatio=1.0,  # proven experts would get less gold
        explorationTasks=0,
        answerField="label",
    )
    for e in experts:  # 10 of 10 gold right each: measured accuracy 11/12
        await _answer_gold(api, e["token"], 10, "yes")
    await api.gql(
        "mutation($p: ID!) { setQualityPolicy(projectId: $p, input: {goldRatio: 0,"
        ' resolution: "weighted", answerChoices: 4, confidenceThreshold: 0.98, minAnswers: 2})'
        " { minAnswers } }",
        {"p": project_id},
        customer["token"],
    )
    # Added after the policy: each item starts with 2 slots (not 5); ahead of the warm-up.
    added = await api.gql(
        "mutation($p: ID!, $t: [TaskInput!]!) { addTasks(projectId: $p, tasks: $t) { added } }",
        {
            "p": project_id,
            "t": [
                {"skill": SKILL, "payload": {"n": n}, "externalId": f"x{n}", "priority": 5}
                for n in (1, 2)
            ],
        },
        customer["token"],
    )
    assert added["addTasks"]["added"] == 2
    slots = await db.fetch(
        """SELECT i.external_id, count(t.id) AS n FROM items i JOIN tasks t ON t.item_id = i.id
           WHERE i.project_id = $1 AND i.external_id IN ('x1', 'x2') GROUP BY 1""",
        UUID(project_id),
    )
    assert {r["external_id"]: r["n"] for r in slots} == {"x1": 2, "x2": 2}

    # Item 1: the first two agree -> confident (0.997), resolved with 2 answers, no more slots.
    # Item 2: the first two disagree -> one more slot at a time until confident.
    answers = {1: ["cat", "cat"], 2: ["cat", "dog", "cat", "cat"]}
    given: dict[int, int] = {1: 0, 2: 0}

    def answer_for(claim: dict[str, Any]) -> dict[str, Any]:
        n = claim["task"]["payload"]["n"]
        label = answers[n][given[n]]
        given[n] += 1
        return {"label": label}

    for e in experts:
        for _ in range(2):
            claim = await api.claim(e["token"])
            if claim is None or claim["task"]["payload"].get("n") not in answers:
                break
            await api.submit(e["token"], claim["assignmentId"], answer_for(claim))
    assert given == {1: 2, 2: 4}

    results = {
        r["externalId"]: r
        for r in await all_results(api, customer["token"], project_id)
        if r["externalId"] in ("x1", "x2")
    }
    assert results["x1"]["answer"] == {"label": "cat"}
    assert results["x1"]["method"] == "weighted"
    assert results["x2"]["answer"] == {"label": "cat"}
    assert results["x2"]["method"] == "weighted"
    assert results["x2"]["agreement"] == pytest.approx(0.75)
    counts = await db.fetch(
        """SELECT i.external_id, count(t.id) AS slots, count(t.id) FILTER (WHERE t.status = 'done')
                  AS done, r.answers
           FROM items i JOIN tasks t ON t.item_id = i.id JOIN item_results r ON r.item_id = i.id
           WHERE i.project_id = $1 AND i.external_id IN ('x1', 'x2') GROUP BY 1, r.answers""",
        UUID(project_id),
    )
    # Every slot made was answered: 2 for the easy item, 4 (below the cap of 5) for the other.
    assert {r["external_id"]: (r["slots"], r["done"], r["answers"]) for r in counts} == {
        "x1": (2, 2, 2),
        "x2": (4, 4, 4),
    }


async def test_dynamic_overlap_asks_for_answers_up_to_the_cap_and_no_further(
    api: Api, db: asyncpg.Connection
) -> None:
    """Experts with no gold answers weigh the prior's ln(3) each: even 4 agreeing answers of 5
    are not 98% confident (81 / 86), so the item keeps asking for one more answer at a time,
    up to the redundancy cap of 5, and then resolves by the heaviest answer (adjudication
    off). A sixth expert finds nothing to do."""
    customer = await api.create_customer()
    created = await api.create_project(customer["token"], [], redundancy=5)
    project_id = created["project"]["id"]
    await set_policy(
        api,
        customer["token"],
        project_id,
        answerField="label",
        resolution="weighted",
        answerChoices=4,
        confidenceThreshold=0.98,
        minAnswers=2,
        adjudicate=False,
    )
    await api.gql(
        "mutation($p: ID!, $t: [TaskInput!]!) { addTasks(projectId: $p, tasks: $t) { added } }",
        {"p": project_id, "t": [{"skill": SKILL, "payload": {"n": 1}, "externalId": "x"}]},
        customer["token"],
    )
    experts = [await api.create_expert([SKILL], name=f"e{i}") for i in range(6)]

    async def slots() -> tuple[int, int]:
        row = await db.fetchrow(
            """SELECT count(*) AS made,
                      count(*) FILTER (WHERE status IN ('open', 'claimed')) AS live
               FROM tasks WHERE project_id = $1 AND kind = 'normal'""",
            UUID(project_id),
        )
        return row["made"], row["live"]

    assert await slots() == (2, 2)  # minAnswers slots to start
    seen = []
    for e, label in zip(experts[:5], ["cat", "cat", "dog", "cat", "cat"], strict=True):
        claim = await api.claim(e["token"])
        assert claim is not None, f"answer {len(seen) + 1} was not asked for"
        await api.submit(e["token"], claim["assignmentId"], {"label": label})
        seen.append(await slots())
    # One more slot whenever none was live, never more than 5 in all.
    assert seen == [(2, 1), (3, 1), (4, 1), (5, 1), (5, 0)]
    assert await api.claim(experts[5]["token"]) is None

    [result] = [
        r for r in await all_results(api, customer["token"], project_id) if r["externalId"] == "x"
    ]
    assert result["answer"] == {"label": "cat"}
    assert result["method"] == "weighted-plurality"
    assert result["agreement"] == pytest.approx(0.8)
    row = await db.fetchrow(
        "SELECT answers, confidence FROM item_results WHERE project_id = $1", UUID(project_id)
    )
    # 3^4 / (3^4 + 3 + 2): below the threshold, so not 'weighted'
    assert row["answers"] == 5
    assert row["confidence"] == pytest.approx(81 / 86, abs=1e-4)


async def test_weighted_adjudication_is_one_more_answer_not_a_veto(
    api: Api, db: asyncpg.Connection
) -> None:
    """Under the weighted rule an adjudicator is one more expert: their answer is weighed with
    the others by measured accuracy, and the heaviest answer resolves the item. (It used to
    replace them all: in bench/quality.py one adjudicator overruling five answers was the
    largest source of wrong results.) Nobody has gold answers here, so everyone weighs ln(3)."""
    customer = await api.create_customer()
    created = await api.create_project(customer["token"], items_of(1), redundancy=3)
    project_id = created["project"]["id"]
    await set_policy(
        api,
        customer["token"],
        project_id,
        answerField="label",
        resolution="weighted",
        answerChoices=4,
        confidenceThreshold=0.999,  # never confident here: the item reaches the cap
    )
    experts = [await api.create_expert([SKILL], name=f"e{i}") for i in range(4)]
    for e, label in zip(experts[:3], ["cat", "cat", "dog"], strict=True):
        claim = await api.claim(e["token"])
        assert claim is not None
        await api.submit(e["token"], claim["assignmentId"], {"label": label})
    # At the cap and 9 / (9 + 3 + 1 + 1) = 64% sure: one adjudication task opens.
    kinds = await db.fetch(
        "SELECT kind, status FROM tasks WHERE project_id = $1 ORDER BY seq", UUID(project_id)
    )
    assert [(r["kind"], r["status"]) for r in kinds][-1] == ("adjudication", "open")
    claim = await api.claim(experts[3]["token"])
    assert claim is not None
    await api.submit(experts[3]["token"], claim["assignmentId"], {"label": "bird"})

    [result] = await all_results(api, customer["token"], project_id)
    assert result["answer"] == {"label": "cat"}  # not the adjudicator's bird
    assert result["method"] == "adjudicated"
    assert result["agreement"] == pytest.approx(2 / 3)
    confidence = await db.fetchval(
        "SELECT confidence FROM item_results WHERE project_id = $1", UUID(project_id)
    )
    assert confidence == pytest.approx(9 / (9 + 3 + 3 + 1), abs=1e-4)
