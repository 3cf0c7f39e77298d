-- A run is settled once none of its partitions is still queued, building or waiting.
UPDATE gen_runs r SET state = 'settled', settled_at = herald_now()
WHERE r.id = %(run_id)s AND r.state = 'running'
  AND NOT EXISTS (SELECT 1 FROM gen_run_partitions p
                  WHERE p.run_id = r.id AND p.state IN ('queued', 'building', 'waiting'))
RETURNING id
