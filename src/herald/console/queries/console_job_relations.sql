-- What the console shows around one job: its dead letter, who submitted it, and the
-- rescues and stale writes recorded against it (as JSON arrays, oldest first).
SELECT (SELECT id FROM dead_letters WHERE job_id = %(id)s) AS dead_letter_id,
       (SELECT k.name FROM api_submissions s JOIN api_keys k ON k.id = s.api_key_id
        WHERE s.job_id = %(id)s) AS submitted_by,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', r.id, 'fence', r.fence, 'owner', r.owner,
                   'outcome', r.outcome, 'at', r.at) ORDER BY r.id), '[]'::jsonb)
        FROM rescues r WHERE r.job_id = %(id)s) AS rescues,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'id', w.id, 'fence', w.fence, 'operation', w.operation,
                   'owner', w.owner, 'at', w.at) ORDER BY w.id), '[]'::jsonb)
        FROM stale_writes w WHERE w.job_id = %(id)s) AS stale_writes
