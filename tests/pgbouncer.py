"""A real PgBouncer in transaction mode, started by the tests in front of the test server.

Debian's ``pgbouncer`` package; missing, the tests that need it fail in CI (``CI`` set)
and skip elsewhere. It refuses to run as root, so as root it is started as ``postgres``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

CONFIG = """\
[databases]
{name} = host={host} port={port} dbname={dbname} user={user}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = {size}
max_client_conn = 200
ignore_startup_parameters = extra_float_digits
logfile = {dir}/pgbouncer.log
pidfile = {dir}/pgbouncer.pid
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def pgbouncer(server_url: str, user: str, pool_size: int = 3) -> Iterator[str]:
    """Run PgBouncer (transaction mode, ``pool_size`` server connections) in front of
    ``server_url``'s database, connecting as ``user``; yields the URL to connect to."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not Path(binary).exists():
        if os.environ.get("CI"):
            pytest.fail("pgbouncer is not installed (Debian package pgbouncer)")
        pytest.skip("pgbouncer is not installed (Debian package pgbouncer)")
    server = conninfo_to_dict(server_url)
    workdir = Path(tempfile.mkdtemp(prefix="herald-pgbouncer-"))
    listen = _free_port()
    dbname = str(server.get("dbname") or "postgres")
    (workdir / "pgbouncer.ini").write_text(
        CONFIG.format(
            name=dbname,
            host=server.get("host") or "127.0.0.1",
            port=server.get("port") or 5432,
            dbname=dbname,
            user=user,
            listen=listen,
            size=pool_size,
            dir=workdir,
        )
    )
    command = [binary, str(workdir / "pgbouncer.ini")]
    if os.geteuid() == 0:
        account = pwd.getpwnam("postgres")
        os.chown(workdir, account.pw_uid, account.pw_gid)
        command[1:1] = ["-u", "postgres"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", listen), 0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                log = workdir / "pgbouncer.log"
                raise RuntimeError(
                    f"pgbouncer did not start: {log.read_text() if log.exists() else ''}"
                )
            time.sleep(0.05)
        yield make_conninfo("", host="127.0.0.1", port=str(listen), dbname=dbname, user=user)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        shutil.rmtree(workdir, ignore_errors=True)
