"""Real SPARQL servers started by the tests: Oxigraph's server and Virtuoso.

Oxigraph's server comes with the ``oxigraph`` package of the test extra; Virtuoso is
Debian's ``virtuoso-opensource`` (``virtuoso-t``), which the CI script installs. A
server missing here fails the test in CI and skips it elsewhere, saying how to get it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.eventually import eventually_sync


@dataclass(frozen=True)
class Endpoint:
    name: str
    query_url: str
    update_url: str


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _missing(what: str) -> None:
    message = f"{what} is not installed"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _wait_until_answering(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    """A readiness wait (the server answers a query), not a statement about speed."""

    def answers() -> bool:
        try:
            httpx.post(url, data={"query": "ASK {}"}, timeout=5).raise_for_status()
            return True
        except httpx.HTTPError:
            if server.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:]
                raise AssertionError(f"{url} exited: {tail}") from None
            return False

    eventually_sync(answers, what=f"{url} to answer", within=60)


@contextmanager
def oxigraph_server(location: Path) -> Iterator[Endpoint]:
    binary = shutil.which("oxigraph") or str(Path(sys.executable).parent / "oxigraph")
    if not Path(binary).exists():
        _missing("the oxigraph server (PyPI package oxigraph, in the test extra)")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = location / "server.log"
    with (
        log.open("wb") as out,
        subprocess.Popen(
            [binary, "serve", "--location", str(location / "data"), "--bind", f"127.0.0.1:{port}"],
            stdout=out,
            stderr=subprocess.STDOUT,
        ) as server,
    ):
        try:
            _wait_until_answering(f"{base}/query", server, log)
            yield Endpoint("oxigraph", f"{base}/query", f"{base}/update")
        finally:
            server.terminate()
            server.wait()


_VIRTUOSO_INI = """\
[Database]
DatabaseFile = {dir}/virtuoso.db
ErrorLogFile = {dir}/virtuoso.log
TransactionFile = {dir}/virtuoso.trx
xa_persistent_file = {dir}/virtuoso.pxa
Striping = 0
TempStorage = TempDatabase

[TempDatabase]
DatabaseFile = {dir}/virtuoso-temp.db
TransactionFile = {dir}/virtuoso-temp.trx

[Parameters]
ServerPort = {sql_port}
DisableUnixSocket = 1
ServerThreads = 10
NumberOfBuffers = 10000
MaxDirtyBuffers = 6000
DirsAllowed = ., {dir}

[HTTPServer]
ServerPort = {http_port}
ServerRoot = {dir}
ServerThreads = 10
EnabledDavVSP = 0

[SPARQL]
ResultSetMaxRows = 100000
MaxQueryExecutionTime = 60
"""


@contextmanager
def virtuoso_server(location: Path) -> Iterator[Endpoint]:
    """A fresh Virtuoso whose anonymous SPARQL user may update (a test server only)."""
    binary, isql = shutil.which("virtuoso-t"), shutil.which("isql-vt")
    if binary is None or isql is None:
        _missing("Virtuoso (Debian package virtuoso-opensource: apt-get install it)")
    assert binary is not None and isql is not None
    sql_port, http_port = free_port(), free_port()
    ini = location / "virtuoso.ini"
    ini.write_text(
        textwrap.dedent(_VIRTUOSO_INI).format(dir=location, sql_port=sql_port, http_port=http_port)
    )
    log = location / "server.log"
    url = f"http://127.0.0.1:{http_port}/sparql"
    with (
        log.open("wb") as out,
        subprocess.Popen(
            [binary, "-f", "-c", str(ini)],
            cwd=location,
            stdout=out,
            stderr=subprocess.STDOUT,
        ) as server,
    ):
        try:
            _wait_until_answering(url, server, log)
            # The SPARQL endpoint runs as the user "SPARQL", read-only unless granted.
            grant = 'GRANT SPARQL_UPDATE TO "SPARQL";'
            subprocess.run(
                [isql, str(sql_port), "dba", "dba", f"exec={grant}"],
                check=True,
                capture_output=True,
                timeout=60,
            )
            yield Endpoint("virtuoso", url, url)
        finally:
            server.terminate()
            server.wait()
