CREATE OR REPLACE FUNCTION fault_record_claim() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fault_claims (job_id, fence, owner, at)
    VALUES (NEW.id, NEW.fence, NEW.lease_owner, NEW.attempted_at)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$
