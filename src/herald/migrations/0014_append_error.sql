-- The job's error history with one more entry, the oldest dropped past 20: the cap the
-- finish, rescue and cancel statements share (IMMUTABLE SQL: inlined where it is used).
CREATE FUNCTION herald_append_error(errors jsonb, error jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT (CASE WHEN jsonb_array_length(errors) >= 20 THEN errors - 0 ELSE errors END)
           || jsonb_build_array(error)
$$;
