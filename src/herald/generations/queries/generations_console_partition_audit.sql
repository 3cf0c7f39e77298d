-- Manual actions on a partition: on its candidates, its runs' tasks and its quarantined
-- input, newest first (who, what, why, when).
SELECT a.id, a.at, a.actor, a.action, a.target_type, a.target_id, a.reason
FROM audit_log a
WHERE (a.target_type = 'gen_candidate' AND a.target_id IN (
          SELECT k.id::text FROM gen_candidates k
          WHERE k.dataset = %(dataset)s AND k.partition = %(partition)s))
   OR (a.target_type = 'gen_run_partition' AND a.target_id IN (
          SELECT t.run_id || ':' || t.partition FROM gen_run_partitions t
          JOIN gen_runs r ON r.id = t.run_id
          WHERE r.dataset = %(dataset)s AND t.partition = %(partition)s))
   OR (a.target_type = 'gen_quarantine' AND a.target_id IN (
          SELECT q.id::text FROM gen_quarantine q
          WHERE q.dataset = %(dataset)s AND q.partition = %(partition)s))
ORDER BY a.id DESC
LIMIT %(limit)s
