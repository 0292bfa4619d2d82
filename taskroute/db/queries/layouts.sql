-- Layouts: how the workbench presents a project's tasks (projects.layout).

-- name: assignment_candidates_swapped
-- $1 assignment_id. PAIRWISE: whether candidate b is shown on the left to this assignment's
-- expert (drawn by the column's default as the claim inserted the row; meaningful only for
-- pairwise projects). By primary key, inside taskroute_claim: the claim's own insert is
-- visible to this statement, not to the statement that called the function.
SELECT candidates_swapped FROM assignments WHERE id = $1;
