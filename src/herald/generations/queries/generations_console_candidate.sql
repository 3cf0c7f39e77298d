-- A candidate with its run and the coordinator's last word on it (an action's review).
SELECT k.id, k.run_id, k.dataset, k.partition, k.state, k.row_count, k.checksum,
       k.job_id, k.fence, r.policy, r.purpose,
       d.decision, d.reason_code, d.reason
FROM gen_candidates k
JOIN gen_runs r ON r.id = k.run_id
LEFT JOIN LATERAL (
    SELECT * FROM gen_decisions x WHERE x.candidate_id = k.id ORDER BY x.id DESC LIMIT 1
) d ON true
WHERE k.id = %(id)s
