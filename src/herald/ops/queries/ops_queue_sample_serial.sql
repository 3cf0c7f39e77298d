-- For the rest of this transaction, one backend per statement: a monitoring pass must not
-- take every core of the database (a parallel count of a deep backlog used three
-- processes for 0.4 s on two cores, where one process takes 0.3 s).
SET LOCAL max_parallel_workers_per_gather = 0
