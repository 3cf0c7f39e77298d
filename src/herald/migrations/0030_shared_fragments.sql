-- The writes several statements share, as functions, so each is written once:
-- a dead letter for a job that just died, and the record of a fenced write that lost
-- its fence (the error-history cap is herald_append_error, 0014).
--
-- SECURITY INVOKER (said outright): they run with the caller's rights, so row-level
-- security holds the caller to its tenant exactly as the INSERTs they replace did.
-- VOLATILE: they write. The callers invoke them for the rare rows only (jobs that died,
-- writes that went stale), never for every row of a batch.

-- A dead letter for a job that has just died (the row as the statement that killed it
-- left it), in the job's tenant. Its checkpoint is what may need cleaning up.
CREATE FUNCTION herald_dead_letter(job jobs, reason text) RETURNS bigint
    LANGUAGE sql VOLATILE SECURITY INVOKER
AS $$
    INSERT INTO dead_letters (tenant_id, job_id, kind, queue, key, version, payload, attempt,
                              step, cleanup, errors, reason)
    VALUES (job.tenant_id, job.id, job.kind, job.queue, job.key, job.version, job.payload,
            job.attempt, job.step, job.checkpoint, job.errors, reason)
    RETURNING id
$$;

-- A fenced write refused because its fence was stale, in the job's tenant (the job row
-- names it; a job the caller cannot see, or that is gone, falls back to the default).
CREATE FUNCTION herald_stale_write(job_id bigint, fence bigint, operation text, owner text)
    RETURNS bigint
    LANGUAGE sql VOLATILE SECURITY INVOKER
AS $$
    INSERT INTO stale_writes (tenant_id, job_id, fence, operation, owner)
    VALUES (coalesce((SELECT j.tenant_id FROM jobs j
                      WHERE j.id = herald_stale_write.job_id), 'default'),
            herald_stale_write.job_id, herald_stale_write.fence,
            herald_stale_write.operation, herald_stale_write.owner)
    RETURNING id
$$;
