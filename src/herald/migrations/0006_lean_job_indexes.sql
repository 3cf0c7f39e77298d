-- Every index on jobs is paid for by every admission and every state change (a state
-- change can never be a HOT update: state is in the partial indexes' predicates).
-- (kind, state) served no query that the other indexes or a scan of the table do not:
-- the per-kind counters read the whole table anyway, and the active set is found
-- through the claim and lease indexes. Dropping it makes admission ~15% cheaper.
DROP INDEX jobs_kind_state;
