"""Operating the engine: audit trail, dead letters, job actions, cleanup, limits.

Modules (import the one you need; this package imports nothing on its own so the
registry and the worker can refer to it without import cycles):

* :mod:`herald.ops.audit`       - who did what, why, when, before and after;
* :mod:`herald.ops.deadletters` - list, inspect, replay and discard dead letters;
* :mod:`herald.ops.jobs`        - retry-now and cancel for jobs not yet finished;
* :mod:`herald.ops.cleanup`     - the runner calling compensation hooks of dead letters;
* :mod:`herald.ops.housekeeping` - maintenance, cleanup and application duties, each run
  by one process of the deployment at a time;
* :mod:`herald.ops.limits`      - token-bucket rate limits and per-key concurrency limits.

Every function is async and takes a connection or a pool (see
:data:`herald.ops.conn.Source`). Manual actions run in one transaction together with
their audit record: both are written or neither.
"""
