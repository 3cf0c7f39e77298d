"""A provider sandbox: seeded snapshots of any size and every fault a provider can show.

Place in the pipeline: the provider the tests, the demo and the benchmark fetch from,
over real loopback sockets. Start it in-process (``async with Sandbox(...)``) or as a
process (``python -m herald.ingest.sandbox --port 8765``, or :func:`spawn_sandbox`).
"""

from herald.ingest.sandbox.process import SandboxProcess, spawn_sandbox
from herald.ingest.sandbox.server import FeedConfig, Sandbox
from herald.ingest.sandbox.snapshots import SnapshotSpec, expected_snapshot, snapshot_chunks

__all__ = [
    "FeedConfig",
    "Sandbox",
    "SandboxProcess",
    "SnapshotSpec",
    "expected_snapshot",
    "snapshot_chunks",
    "spawn_sandbox",
]
