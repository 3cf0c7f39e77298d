"""A sandbox of the social platforms Herald publishes to, on loopback.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): the
stand-in for Mastodon, Bluesky, Facebook Pages and webhook receivers that every step
talks to in tests, the demo and benchmarks. It answers with each platform's real
status codes, error bodies and rate-limit headers, enforces per-account quotas per
window, honours idempotency keys as each platform does, and records every post it
accepts so duplicates can be counted (``GET /_sandbox/counts``).

    with Sandbox() as sandbox:
        account = sandbox.account("mastodon")      # an Account pointing at the sandbox
        ...
        sandbox.counts()["accounts"]["mastodon"]

Run it alone with ``python -m herald.social.sandbox``.
"""

from herald.social.sandbox.server import Sandbox, build_app
from herald.social.sandbox.state import (
    DEFAULT_QUOTAS,
    Quota,
    SandboxAccount,
    SandboxConfig,
    SandboxState,
)

__all__ = [
    "DEFAULT_QUOTAS",
    "Quota",
    "Sandbox",
    "SandboxAccount",
    "SandboxConfig",
    "SandboxState",
    "build_app",
]
