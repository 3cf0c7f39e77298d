INSERT INTO gen_decisions (dataset, partition, run_id, candidate_id, job_id, fence, decision,
                           reason_code, reason, base_generation, current_generation,
                           generation, actor)
VALUES (%(dataset)s, %(partition)s, %(run_id)s, %(candidate_id)s, %(job_id)s, %(fence)s,
        %(decision)s, %(reason_code)s, %(reason)s, %(base_generation)s,
        %(current_generation)s, %(generation)s, %(actor)s)
RETURNING *
