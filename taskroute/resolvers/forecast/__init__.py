"""Deadline forecasts: remaining work against the pace measured from the work itself.

The facts are maintained as the work happens (by triggers), so a forecast reads a few rows
whatever the history: `forecast_counts` (task counts per project and skill) and
`forecast_experts` (the present experts, their skills, and their newest submissions). Per
(project, skill):
- remaining = open slots + in-flight (claimed) slots; the ETA counts an in-flight slot as half
  done (on average it is);
- cycle of one submission = the seconds it cost its expert (from their previous submission when
  they went straight on, else from the claim: breaks are not pace);
- an expert's pace in a skill = 1 / their mean cycle since their last change of pace: the
  newest cycles are tested against the older ones (log scale, pooled t statistic, the best
  split); only a split beyond CHANGE_T restarts the measure, so a steady expert's pace uses
  all their history (as precise as it gets) and a changed one forgets the old pace within a
  few tasks. The mean is shrunk towards the skill's typical cycle (median over its experts)
  by PRIOR_WEIGHT pseudo-submissions; a present expert with no history in the skill gets the
  typical cycle, and a skill with no history the median over the other skills;
- a mean of k cycles is an unbiased time per task but 1 / it over-estimates the rate (Jensen,
  by about cv^2 / k), and the ETA of n experts is remaining / the sum of their rates: the
  throughput an ETA is computed at takes out that bias to second order from each mean's own
  sampling variance (`_capacity`; one expert's ETA stays remaining x their mean);
- present = active and seen within the presence window or holding a live lease, and not idle
  (no live lease, nothing done) for more than IDLE_CYCLES of their own cycles (and at least
  IDLE_MIN_SECONDS): someone who logged off stops counting within minutes, not at the end of
  the presence window;
- throughput = sum over present qualified experts of share x pace. An expert's time is split
  evenly over every (project, skill) with work left they qualify for, then the part on the
  skills asked about moves towards the work of theirs that would finish last (`_allocate`:
  work-conserving, as the claim's scarce-first order does); the projects of one skill share
  its rate, each finished project's part going to the others (`_part`), so the largest ends
  with the skill's whole backlog and a small one early;
- eta = now + remaining / throughput + the tail while tasks are open (the first claim after
  the shortest residual of the tasks in progress, then the last claimer's fresh cycle or the
  others' residuals, whichever is longer: `_tail`; a task in progress seen at a random
  moment is length-biased, and each expert has their own pace and spread); once all are
  claimed, now + the longest residual of the tasks in progress, each from its holder's pace
  and its age (the leases: `_held_end`; `_dry_end`, anyone's at a random moment, when a
  holder's pace is unknown)
  (None when work remains and nobody present holds the skill, or nothing at all was measured
  yet: `reason` says which);
- range: the relative spread of the ETA combines the uncertainty of the measured means (the
  cycles' coefficient of variation / sqrt(samples)) and the luck of the remaining tasks
  (cv / sqrt(remaining)); early/late are the 90% band, throughput x (1 +/- 1.645 x spread);
- extra_experts: experts at the skill's typical pace to add so the ETA meets the deadline.
The project's forecast is the latest of its skills (skills progress in parallel).
"""

from taskroute.resolvers.forecast.load import (
    Forecast,
    SkillForecast,
    clear_caches,
    forecasts,
    project_forecast,
    quote_forecast,
)

__all__ = [
    "Forecast",
    "SkillForecast",
    "clear_caches",
    "forecasts",
    "project_forecast",
    "quote_forecast",
]
