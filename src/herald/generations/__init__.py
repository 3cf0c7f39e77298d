"""Datasets as immutable generations: an application on the Herald engine.

Records (migration 0012): input manifests, runs, output candidates, publications, the
per-partition pointer, the coordinator's decisions, the outbox, webhook subscriptions and
deliveries, quarantine and backfills. Tasks are ordinary Herald jobs: their attempt,
lease, fence and checkpoint are the engine's. See docs/generations.md.

Modules: :mod:`.runtime` (install the kinds), :mod:`.records` (declare datasets,
manifests, runs), :mod:`.build` (the task), :mod:`.rules` and :mod:`.coordinator`
(publication), :mod:`.outbox`, :mod:`.quarantine`, :mod:`.backfill`, :mod:`.operator`.
The engine core never imports this package.
"""
