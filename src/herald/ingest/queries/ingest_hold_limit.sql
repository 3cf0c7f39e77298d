-- Bound how long this session may sit inside a transaction holding a batch's row locks:
-- a worker that hangs or freezes mid-batch loses its session after this many
-- milliseconds, its transaction rolls back and the rows are claimable again.
SELECT set_config('idle_in_transaction_session_timeout', %(ms)s::text, false) AS hold_limit
