"""The quality report: counts, Krippendorff's alpha, the rules in words, each expert's evidence."""

from __future__ import annotations

import math
from typing import Any
from uuid import UUID

from taskroute.db.pool import Database
from taskroute.db.queries import Q
from taskroute.resolvers.quality.agreement import answer_key, krippendorff_alpha_nominal


def evidence_ratio(llr: float | None) -> float | None:
    """The pause test's evidence as a plain ratio (capped where a float ends)."""
    return None if llr is None else math.exp(min(llr, 700.0))


def describe_rules(p: Any) -> list[str]:
    """The project's quality rules as built, in words a customer can follow."""
    sequential = p["pause_rule"] == "sequential"
    onboarding = (
        f"{p['exploration_gold_ratio']:.0%} during their first {p['exploration_tasks']} tasks "
        f"of a skill"
    )
    if sequential and p["gold_ratio"] > 0:
        rules = [
            f"Gold: questions with a known answer are mixed into real work; experts cannot tell "
            f"them apart. How much gold an expert gets depends on what their gold answers show: "
            f"{max(p['suspect_gold_ratio'], p['gold_ratio']):.0%} while they are not cleared "
            f"(below), then {p['gold_ratio']:.0%} ({onboarding}), and "
            f"{min(p['proven_gold_ratio'], p['gold_ratio']):.0%} once they are proven good."
        ]
    else:
        rules = [
            f"Gold: about {p['gold_ratio']:.0%} of an expert's tasks are gold questions with a "
            f"known answer ({onboarding}); experts cannot tell them apart."
        ]
    if sequential:
        bar, trusted = f"{p['pause_below']:.0%}", f"{p['trusted_accuracy']:.0%}"
        ratio = 1 / p["pause_risk"]
        rules.append(
            f"Pausing: after each gold answer we weigh how much likelier the expert's gold "
            f"answers since their last unpause are from someone right less than {bar} of the "
            f"time than from someone right {trusted} of the time. At {ratio:.0f} times likelier "
            f"(and at least {p['pause_min_gold']} gold answers) the expert is paused for that "
            f"skill. An expert right {trusted} of the time or more is paused with a chance of "
            f"at most {p['pause_risk']:.2%}, however long they work and however their gold is "
            f"given out. Only an admin unpauses."
        )
        if p["gold_ratio"] > 0:
            rules.append(
                f"Cleared and proven: an expert is cleared once their gold answers are "
                f"{p['clear_evidence']:g} times likelier from someone right {trusted} of the "
                f"time than from someone below {bar}, and proven good at {ratio:.0f} times "
                f"(the certainty a pause needs). A new expert has no evidence either way, so "
                f"starts not cleared, with the "
                f"{max(p['suspect_gold_ratio'], p['gold_ratio']):.0%} gold share: a bad "
                f"expert is paused within a few tasks, and one lucky answer does not send them "
                f"back to a slow trickle of gold."
            )
    else:
        rules.append(
            f"Pausing: an expert is paused for a skill once they have at least "
            f"{p['pause_min_gold']} gold answers and their estimated accuracy is below "
            f"{p['pause_below']:.0%}. Only an admin unpauses."
        )
    if p["resolution"] == "weighted":
        overlap = (
            f"Each item starts with {p['min_answers']} answers and gets one more at a time "
            f"while it is not confident, up to the project's redundancy."
            if p["min_answers"] is not None
            else "Every item collects the project's redundancy in answers."
        )
        rules.append(
            f"Results: each answer counts in proportion to how reliable its expert measured on "
            f"gold (log-odds of their accuracy, assuming {p['answer_choices']} possible "
            f"answers). An item resolves once its best answer is at least "
            f"{p['confidence_threshold']:.1%} likely. {overlap} Agreement still shows the share "
            f"of answers that match the result."
        )
    else:
        rules.append(
            f"Results: an item resolves when at least {p['agreement_threshold']:.0%} of its "
            f"answers agree."
        )
    if p["adjudicate"] and p["resolution"] == "weighted":
        rules.append(
            "Otherwise, at the redundancy, a more experienced expert adjudicates: their answer "
            "is weighed with the others by their measured reliability, and the heaviest answer "
            "is the result (method 'adjudicated')."
        )
    elif p["adjudicate"]:
        rules.append("Otherwise a more experienced expert adjudicates (method 'adjudicated').")
    else:
        rules.append("Otherwise the best-supported answer is taken (a 'plurality' method).")
    return rules


async def report(db: Database, project_id: UUID) -> dict[str, Any]:
    async with db.connection() as conn:
        policy = await conn.fetchrow(Q["quality_policy_get"], project_id)
        counts = await conn.fetchrow(Q["project_result_counts"], project_id)
        answers = await conn.fetch(Q["project_answers_for_report"], project_id)
        evidence = await conn.fetch(Q["project_expert_evidence"], project_id)
    assert policy is not None and counts is not None
    units: dict[UUID, list[str]] = {}
    for r in answers:
        units.setdefault(r["item_id"], []).append(
            answer_key(r["answer"], policy["answer_field"]) or "\0missing"
        )
    return {
        **dict(counts),
        "krippendorff_alpha": krippendorff_alpha_nominal(list(units.values())),
        "rules": describe_rules(policy),
        "experts": [
            {
                "skill": r["skill"],
                "status": r["status"],
                "gold_seen": r["gold_seen"],
                "gold_correct": r["gold_correct"],
                "gold_since_unpause": r["gold_since_unpause"],
                "pause_evidence": evidence_ratio(r["pause_llr"]),
            }
            for r in evidence
        ],
    }
