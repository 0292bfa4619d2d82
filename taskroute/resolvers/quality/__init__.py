"""Quality: gold serving and scoring, agreement and adjudication, pausing, retraction, results.

Rules (docs/quality-and-payment.md says the same for customers):

The rules that run on every claim and submit are SQL (queries/quality.sql `gold_claim`,
functions/quality.sql), so a claim and a submit are one round trip each; this package holds the
admin and customer paths around them:

- `policy`: a project's quality policy and its partial update
- `gold`: gold items added on their own, the gold pool's status
- `resolution`: resolving an item again, waking experts for the tasks that opened
- `pausing`, `retraction`: the admin's pause, unpause and retraction
- `adjudication`: what an adjudicator is shown of the other answers
- `result_feed`: results and their change feed, paged
- `agreement`, `report`: comparing answers, Krippendorff's alpha, the quality report

- Gold items (`TaskInput.gold`, or `addGoldItems`) get no redundancy slots. `gold_claim` serves
  one, before the normal claim, with probability `gold_ratio` of the item's project (the higher
  `exploration_gold_ratio` during an expert's first `exploration_tasks` tasks of the skill), only
  while that project has open work of the skill the expert qualifies for. A gold serving is a
  fresh task row with a random id, claimed at once, answered through the same claim shape.
- Gold is paid like any task: the expert cannot tell it apart, and paying it keeps it so. Its
  cost is the customer's quality budget; it is kept out of the progress counts and results.
- Quality estimate per (expert, skill): the mean of the Beta(1 + correct, 1 + wrong) posterior,
  i.e. (1 + correct) / (2 + seen). Few samples are pulled toward 0.5 (2 of 2 right reads 0.75).
- Exploration: an expert with no gold answers yet in a skill keeps the quality the admin gave
  at creation (default 1.0), so a new expert is admitted by trust; the onboarding gold share
  makes the first gold answers, which replace that trust, arrive early.
- Pausing ('sequential', the default): after each gold answer, the likelihood ratio of the gold
  answers since the last unpause, "accuracy below `pause_below`" (a mixture over 64 accuracies)
  against "accuracy `trusted_accuracy`", is kept in `expert_skills.pause_llr`; at 1 / `pause_risk`
  (and >= `pause_min_gold` answers) the skill is paused and the live claims released. An expert
  at or above trusted_accuracy is ever paused with probability <= pause_risk (Ville's
  inequality; it holds for any gold allocation that depends only on answers already scored).
  Adaptive gold share: `suspect_gold_ratio` until the expert is cleared (the ratio at or below
  1 / `clear_evidence`; a new expert, at 1, is not), `proven_gold_ratio` once it is below
  pause_risk. 'fixed' keeps the old rule (>= pause_min_gold gold answers and an estimate
  below pause_below). Admins unpause; the test restarts from no evidence.
- Weighted resolution (`resolution: weighted`): answers weigh the log-odds of their expert's
  measured accuracy; an item resolves once its best answer's probability reaches
  `confidence_threshold`, else asks for one more answer up to the redundancy (dynamic overlap,
  items start with `min_answers` slots); at the cap an adjudicator's answer is weighed with the
  others, not put in their place. Details: functions/quality.sql taskroute_resolve_item.
- Agreement: once an item has k valid answers, the share of the majority answer (compared on
  `answer_field`, or whole) at or above `agreement_threshold` resolves it; a tie for the top
  never does. Otherwise one adjudication task (same skill, `adjudication_min_quality`, never to
  an expert who answered the item) is opened; its answer resolves the item. A project may turn
  adjudication off (`adjudicate: false`): then the most common answer, earliest on a tie,
  resolves it (method 'plurality').
- Retraction marks answers (never deletes); the item gets fresh slots for the missing answers
  and its result is recomputed; already paid lines stay, a clawback is a reversal line.
"""
