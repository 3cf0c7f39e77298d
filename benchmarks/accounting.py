"""Where a benchmark's CPU time went: per process, and per process's database backends.

Linux only (``/proc``). A :class:`Ledger` names groups of processes ("api", "workers",
...); :meth:`Ledger.snapshot` reads the CPU seconds (user + system) of each group's
processes and of the PostgreSQL backends serving their connections (found by matching
the processes' TCP source ports with ``pg_stat_activity.client_port``). The difference
of two snapshots, divided by the posts or jobs done between them, says what one cost.

On a machine shared with other work the figures are CPU time, not wall time: they do not
grow with the load as latencies do, which is what makes them comparable between runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from herald.db import AsyncConn

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_BACKENDS = "SELECT pid, client_port FROM pg_stat_activity WHERE client_port = ANY(%s)"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process so far (0 once it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    return inodes


def database_ports(pids: Iterable[int], server_port: int) -> list[int]:
    """Local TCP ports of these processes' connections to ``server_port``."""
    inodes = set().union(*(_socket_inodes(p) for p in pids))
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            remote_port = int(parts[2].rsplit(":", 1)[1], 16)
            if parts[9] in inodes and remote_port == server_port:
                ports.append(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


@dataclass
class Ledger:
    """Groups of processes whose CPU time (and their backends') is accounted."""

    conn: AsyncConn
    server_port: int = 5432
    groups: dict[str, list[int]] = field(default_factory=dict)

    def add(self, group: str, pids: Iterable[int]) -> None:
        self.groups.setdefault(group, []).extend(pids)

    async def snapshot(self) -> dict[str, dict[int, float]]:
        """CPU seconds per process of each group and of ``<group> db`` (its backends)."""
        taken: dict[str, dict[int, float]] = {}
        for group, pids in self.groups.items():
            taken[group] = {p: cpu_seconds(p) for p in pids}
            ports = database_ports(pids, self.server_port)
            cur = await self.conn.execute(_BACKENDS, [ports])
            backends = [int(row["pid"]) for row in await cur.fetchall()]
            taken[f"{group} db"] = {p: cpu_seconds(p) for p in backends}
        return taken


def spent(
    before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]
) -> dict[str, float]:
    """CPU seconds per group between two snapshots (a backend opened since counts whole)."""
    return {
        group: sum(now - before.get(group, {}).get(pid, 0.0) for pid, now in pids.items())
        for group, pids in after.items()
    }
