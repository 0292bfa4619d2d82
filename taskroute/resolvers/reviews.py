"""Review as work: what a reviewer's answer is (docs/quality-and-payment.md, Review by
experts). The routing, pay and decision live in SQL (queries/reviews.sql,
functions/reviews.sql); this checks the reviewer's answer before it is submitted.

A reviewer answers {"verdict": "accept" | "reject" | "correct", "reason": text,
"correction": an answer}: a rejection needs a reason, a correction needs a correction that
matches the project's answer schema (the claim's `answerSchema`).
"""

from __future__ import annotations

from typing import Any

from taskroute.errors import BadInput
from taskroute.resolvers import answer_schema
from taskroute.resolvers.json_values import json_text

VERDICTS = ("accept", "reject", "correct")
REASON_MAX = 1000


def skill_of(skill: str) -> str:
    """The skill a reviewer of `skill` holds."""
    return f"review:{skill}"


async def check_answer(schema: Any, answer: Any) -> None:
    """BAD_INPUT (naming the field) unless `answer` is a well-formed review."""
    if not isinstance(answer, dict):
        raise BadInput("a review is an object with a verdict", field="answer")
    unknown = set(answer) - {"verdict", "reason", "correction"}
    if unknown:
        raise BadInput(f"unknown fields in the review: {sorted(unknown)}", field="answer")
    verdict = answer.get("verdict")
    if verdict not in VERDICTS:
        raise BadInput(f"verdict must be one of {', '.join(VERDICTS)}", field="answer.verdict")
    reason = answer.get("reason")
    if reason is not None and (
        not isinstance(reason, str) or not reason.strip() or len(reason) > REASON_MAX
    ):
        raise BadInput(
            f"reason must be a non-empty text of at most {REASON_MAX} characters",
            field="answer.reason",
        )
    if verdict == "reject" and reason is None:
        raise BadInput("a rejection needs a reason (the expert is owed one)", field="answer.reason")
    if verdict == "correct":
        if "correction" not in answer or answer["correction"] is None:
            raise BadInput("a correction needs the corrected answer", field="answer.correction")
        correction = answer["correction"]
        await answer_schema.check_answer(
            schema, correction, json_text(correction) or "null", "answer.correction"
        )
    elif "correction" in answer:
        raise BadInput("only a 'correct' verdict carries a correction", field="answer.correction")
