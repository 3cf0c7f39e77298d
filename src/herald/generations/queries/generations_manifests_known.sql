-- The manifests accepted for a partition: every one received, except those whose file
-- is held in quarantine or was discarded (or replaced by a repaired file) by an operator.
SELECT m.id FROM gen_input_manifests m
WHERE m.dataset = %(dataset)s AND %(partition)s = ANY(m.partitions)
  AND NOT EXISTS (SELECT 1 FROM gen_quarantine q
                  WHERE q.manifest_id = m.id AND q.state IN ('held', 'discarded', 'repaired'))
ORDER BY m.id
