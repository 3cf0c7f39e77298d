-- An account was disconnected: its posts still waiting end failed with the reason, and
-- their waiting jobs are cancelled (a running one meets the revoked account itself).
WITH failed AS (
    UPDATE social_posts
    SET state = 'failed', error = %(reason)s, updated_at = herald_now()
    WHERE account_id = %(account_id)s AND state IN ('queued', 'publishing')
    RETURNING id, job_id
), cancelled AS (
    UPDATE jobs j
    SET state = 'cancelled', finished_at = herald_now(),
        errors = herald_append_error(j.errors, jsonb_build_object(
                     'at', herald_now(), 'attempt', j.attempt, 'kind', 'cancelled',
                     'message', %(reason)s))
    FROM failed f
    WHERE j.id = f.job_id AND j.state = 'waiting'
    RETURNING j.id
)
SELECT f.id, f.job_id, (c.id IS NOT NULL) AS job_cancelled
FROM failed f LEFT JOIN cancelled c ON c.id = f.job_id
