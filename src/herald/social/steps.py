"""The three steps of a social post, as the worker will run them: auth -> media -> publish.

Place in the pipeline: this *is* the pipeline's body, minus the engine wiring. The job
handler calls each step in turn and checkpoints what it returns (all JSON-able), so a
retry resumes at the first unfinished step:

1. :func:`check_auth` -> :class:`AccountInfo` (a 401 here marks the account for
   re-authorisation);
2. :func:`prepare_media` -> :class:`MediaRef` (fetch within limits, upload; skipped for a
   post without media);
3. :func:`publish` -> :class:`Published`.

Protocol for the publish step, which is what keeps a post from appearing twice:

* before calling :func:`publish` the first time, checkpoint "publish started" (the
  database's time); on every later attempt pass ``since_first_try`` = seconds since
  that mark, measured by the database clock;
* :func:`publish` then relies on the platform's own deduplication while the key is
  still inside its window (Mastodon one hour, Bluesky record keys and webhook ids
  forever), and otherwise first asks :meth:`Adapter.find_published` (Facebook, and
  Mastodon after an hour), creating the post only if the lookup finds nothing.

Every step raises :class:`~herald.social.errors.SocialError` on failure; the handler
turns it into the engine's outcome with :func:`~herald.social.errors.to_job_outcome`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from herald.social.adapters.base import (
    AccountInfo,
    Adapter,
    MediaRef,
    Post,
    Published,
    operation_key,
)
from herald.social.media import MediaFetcher

# Allowance for request latency and clocks when comparing "first try" with the
# platform's idempotency window and its post timestamps.
SAFETY_MARGIN = 300.0


@dataclass(frozen=True)
class StepKeys:
    """The idempotency keys of a job's creating steps."""

    media: str
    publish: str

    @classmethod
    def for_job(cls, job_ref: str) -> StepKeys:
        return cls(media=operation_key(job_ref, "media"), publish=operation_key(job_ref, "publish"))


async def check_auth(adapter: Adapter) -> AccountInfo:
    return await adapter.verify()


async def prepare_media(
    adapter: Adapter,
    fetcher: MediaFetcher,
    url: str,
    *,
    key: str,
    description: str | None = None,
) -> MediaRef:
    """Fetch ``url`` within the fetcher's limits narrowed to the platform's, and upload it."""
    caps = adapter.capabilities
    limits = fetcher.limits.narrowed(caps.media_types, caps.max_media_bytes)
    with await fetcher.fetch(url, limits) as media:
        return await adapter.upload_media(media, key=key, description=description)


def lookup_needed(adapter: Adapter, since_first_try: float | None) -> bool:
    """Whether an earlier try may have created the post beyond the platform's dedupe."""
    if since_first_try is None:
        return False
    window = adapter.capabilities.dedupe_window
    return window is None or since_first_try + SAFETY_MARGIN >= window


async def publish(
    adapter: Adapter,
    post: Post,
    media: Sequence[MediaRef],
    *,
    key: str,
    since_first_try: float | None,
) -> Published:
    """Publish once: see the protocol in the module docstring."""
    adapter.check_post(post, media)
    if lookup_needed(adapter, since_first_try) and adapter.capabilities.lookup:
        assert since_first_try is not None
        found = await adapter.find_published(
            post, media, key=key, within=since_first_try + SAFETY_MARGIN
        )
        if found is not None:
            return found
    return await adapter.publish(post, media, key=key)
