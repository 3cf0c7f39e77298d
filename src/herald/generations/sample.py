"""The sample application used by ``herald demo late-partition`` and the tests: a daily
``orders`` dataset built by transform version v18.

Run its workers with ``herald --app herald.generations.sample:app worker``. The transform
can be made to pause a worker process (SIGSTOP, as a long GC pause or a frozen VM
would) after an attempt wrote its output and before it registers it: create the file
``$HERALD_GENERATIONS_PAUSE_DIR/run-<run>-fence-<fence>``. That is how the demo plays
"the worker loses its lease after writing output but before reporting completion".
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from herald.generations.definitions import Attempt, Definition, Definitions, Record
from herald.generations.records import DatasetSpec
from herald.generations.runtime import install
from herald.registry import Herald

PAUSE_DIR_VARIABLE = "HERALD_GENERATIONS_PAUSE_DIR"
DATASET = "orders"
VERSION = "v18"
ORDERS = DatasetSpec(
    name=DATASET,
    owner="team-orders",
    fields=("order_id", "amount_cents", "currency", "event_time"),
    min_rows=1,
    max_rows=1_000_000,
    quality_rules={"not_null": ["order_id", "amount_cents"], "unique": ["order_id"]},
    quarantine_cap=100,
    quarantine_ttl_s=7 * 86400,
    redacted_fields=("customer_email",),
)


def orders_v18(partition: str, records: list[Record]) -> list[Record]:
    """The partition's orders (by event date), one row per order id, latest record wins."""
    latest: dict[str, Record] = {}
    for record in records:
        if str(record["event_time"])[:10] != partition:
            continue
        latest[str(record["order_id"])] = record
    return [
        {
            "order_id": r["order_id"],
            "amount_cents": int(r["amount_cents"]),
            "currency": r.get("currency", "EUR"),
            "event_time": r["event_time"],
        }
        for _, r in sorted(latest.items())
    ]


def pause_if_asked(attempt: Attempt) -> None:
    folder = os.environ.get(PAUSE_DIR_VARIABLE)
    if not folder:
        return
    # Keyed on the fence, which every claim moves on: a rescued job's retry may keep its
    # attempt number (an expiry is not always charged), never its fence.
    gate = Path(folder) / f"run-{attempt.run_id}-fence-{attempt.fence}"
    if gate.exists():
        (Path(folder) / f"paused-{attempt.run_id}-{attempt.fence}").write_text(
            f"{os.getpid()} {attempt.location}\n"
        )
        os.kill(os.getpid(), signal.SIGSTOP)  # the whole process stops: no heartbeats


definitions = Definitions()
definitions.add(
    Definition(
        DATASET,
        VERSION,
        orders_v18,
        required=("order_id", "amount_cents", "event_time"),
        after_write=pause_if_asked,
    )
)
app = Herald()
gens = install(app, definitions)
