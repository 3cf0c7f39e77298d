"""Social publishing: posts to Mastodon, Bluesky, Facebook Pages and signed webhooks.

A social post is a pipeline of three checkpointed steps - auth check -> media ->
publish - so a retry resumes at the first unfinished step and a post appears once on
its platform whatever fails in between. This package holds the parts that need no
database: the platform adapters (:mod:`herald.social.adapters`), error classification
(:mod:`herald.social.errors`), rate-limit headers (:mod:`herald.social.ratelimit`),
media fetching within limits (:mod:`herald.social.media`), credential encryption and
redaction (:mod:`herald.ops.crypto`, :mod:`herald.ops.secrets`), the steps
themselves (:mod:`herald.social.steps`), the failure simulator
(:mod:`herald.social.simulator`) and a sandbox of the platforms
(:mod:`herald.social.sandbox`).

Guarantee, as everywhere in Herald: at-least-once execution, exactly-once recorded
outcomes, exactly-once side effects where transactional or idempotency-keyed - here,
every create carries a key bound to its job and step, or is looked up before it is
made again.
"""

from herald.ops.crypto import CipherError, TokenCipher
from herald.ops.secrets import Redactor, Secret, redact
from herald.social.adapters import (
    Account,
    AccountInfo,
    Adapter,
    Capabilities,
    MediaRef,
    Post,
    Published,
    Revoked,
    adapter_for,
    operation_key,
)
from herald.social.errors import (
    Disposition,
    InvalidPost,
    NotReady,
    PermanentError,
    RateLimited,
    ReauthRequired,
    SocialError,
    TransientError,
    to_job_outcome,
)
from herald.social.media import FetchedMedia, MediaFetcher, MediaLimits, MediaRejected
from herald.social.ratelimit import RateInfo, SlowDown
from herald.social.simulator import FailureSimulator, FaultPlan, FaultProfile, Latency
from herald.social.steps import StepKeys, check_auth, prepare_media, publish

__all__ = [
    "Account",
    "AccountInfo",
    "Adapter",
    "Capabilities",
    "CipherError",
    "Disposition",
    "FailureSimulator",
    "FaultPlan",
    "FaultProfile",
    "FetchedMedia",
    "InvalidPost",
    "Latency",
    "MediaFetcher",
    "MediaLimits",
    "MediaRef",
    "MediaRejected",
    "NotReady",
    "PermanentError",
    "Post",
    "Published",
    "RateInfo",
    "RateLimited",
    "ReauthRequired",
    "Redactor",
    "Revoked",
    "Secret",
    "SlowDown",
    "SocialError",
    "StepKeys",
    "TokenCipher",
    "TransientError",
    "adapter_for",
    "check_auth",
    "operation_key",
    "prepare_media",
    "publish",
    "redact",
    "to_job_outcome",
]
