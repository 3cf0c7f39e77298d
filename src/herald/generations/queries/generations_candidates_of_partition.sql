-- Every candidate of a partition with the coordinator's last word on it.
SELECT k.*, r.purpose, r.policy, r.intent, r.definition_version, r.manifest_ids,
       r.base_generations ->> k.partition AS base_generation,
       d.decision, d.reason_code, d.reason, d.generation, d.decided_at
FROM gen_candidates k
JOIN gen_runs r ON r.id = k.run_id
LEFT JOIN LATERAL (
    SELECT * FROM gen_decisions x WHERE x.candidate_id = k.id ORDER BY x.id DESC LIMIT 1
) d ON true
WHERE k.dataset = %(dataset)s AND k.partition = %(partition)s
ORDER BY k.id
