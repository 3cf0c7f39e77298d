"""The query process: ``python -m herald.catalog.sparql.child MEMORY_BYTES``.

It runs one query at a time for the API (:mod:`.runner`), which may kill it at any
moment (deadline, client gone, shutdown); whatever it does, nothing else is affected. It
limits itself before reading any request: address space (``RLIMIT_AS``), no core dumps,
death with its parent, and for each query CPU time (``RLIMIT_CPU``) and the size of the
result file (``RLIMIT_FSIZE``). Results are streamed into the file the runner names,
counted as they go: past the row or byte limit the query stops with an error rather
than a silently truncated answer.

Protocol: one JSON line per request on stdin, one JSON line per reply on stdout; the
first line it writes says it is ready.
"""

from __future__ import annotations

import ctypes
import io
import json
import math
import resource
import signal
import sys
from collections.abc import Iterator
from typing import IO, Any, cast

PR_SET_PDEATHSIG = 1
RESULTS_JSON = "application/sparql-results+json"
XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"


class Refusal(Exception):
    def __init__(self, status: int, slug: str, detail: str) -> None:
        super().__init__(detail)
        self.reply = {"ok": False, "status": status, "slug": slug, "detail": detail}


def _limit_self(memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    # A file over its limit fails the write (EFBIG) instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner decides when this ends
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the runner still kills it on close
        pass


def _limit_query(timeout: float, max_bytes: int) -> None:
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu = math.ceil(used.ru_utime + used.ru_stime + timeout) + 1
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu if hard < 0 else min(cpu, hard), hard))
    _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    size = max_bytes + 65536
    resource.setrlimit(resource.RLIMIT_FSIZE, (size if hard < 0 else min(size, hard), hard))


class CappedFile:
    """A binary output that refuses to grow past ``limit`` bytes."""

    def __init__(self, handle: IO[bytes], limit: int) -> None:
        self.handle = handle
        self.limit = limit
        self.size = 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        if self.size > self.limit:
            raise self.refusal()
        return self.handle.write(data)

    def refusal(self) -> Refusal:
        return Refusal(422, "result-too-large", f"the result is larger than {self.limit} bytes")

    def flush(self) -> None:
        self.handle.flush()


def _term(term: Any) -> dict[str, Any]:
    import pyoxigraph as ox

    if isinstance(term, ox.NamedNode):
        return {"type": "uri", "value": term.value}
    if isinstance(term, ox.BlankNode):
        return {"type": "bnode", "value": term.value}
    if isinstance(term, ox.Literal):
        found: dict[str, Any] = {"type": "literal", "value": term.value}
        if term.language:
            found["xml:lang"] = term.language
        elif term.datatype.value not in (XSD_STRING, LANG_STRING):
            found["datatype"] = term.datatype.value
        return found
    return {
        "type": "triple",
        "value": {
            "subject": _term(term.subject),
            "predicate": _term(term.predicate),
            "object": _term(term.object),
        },
    }


def _too_many(max_rows: int) -> Refusal:
    return Refusal(
        422,
        "result-too-large",
        f"the result has more than {max_rows} rows; narrow the query or add a LIMIT",
    )


def write_solutions(result: Any, out: CappedFile, max_rows: int) -> int:
    """SPARQL 1.1 JSON results, one row at a time."""
    import pyoxigraph as ox

    if isinstance(result, ox.QueryBoolean):
        out.write(json.dumps({"head": {}, "boolean": bool(result)}).encode())
        return 0
    names = [v.value for v in result.variables]
    out.write(b'{"head":{"vars":' + json.dumps(names).encode() + b'},"results":{"bindings":[')
    rows = 0
    for solution in result:
        rows += 1
        if rows > max_rows:
            raise _too_many(max_rows)
        binding = {}
        for name in names:
            term = solution[name]
            if term is not None:
                binding[name] = _term(term)
        out.write((b"," if rows > 1 else b"") + json.dumps(binding).encode())
    out.write(b"]}}")
    return rows


def write_triples(
    triples: Any,
    out: CappedFile,
    max_rows: int,
    media_type: str,
    prefixes: dict[str, str],
    exceeded: list[bool],
) -> int:
    import pyoxigraph as ox

    count = 0

    def counted() -> Iterator[Any]:
        nonlocal count
        for triple in triples:
            count += 1
            if count > max_rows:
                exceeded.append(True)
                raise _too_many(max_rows)
            yield triple

    syntax = ox.RdfFormat.from_media_type(media_type)
    if syntax is None:
        raise Refusal(406, "not-acceptable", f"cannot write {media_type}")
    ox.serialize(counted(), cast(IO[bytes], out), syntax, prefixes=prefixes)
    return count


_ASK_COLUMN = "__ASK_RETVAL"


def boolean_answer(data: dict[str, Any]) -> dict[str, Any]:
    """An ASK answer (SPARQL JSON results) in the standard form: Virtuoso answers one row
    holding the truth as a number (``__ASK_RETVAL``) instead of ``boolean``."""
    bindings = data.get("results", {}).get("bindings")
    if "boolean" in data or data.get("head", {}).get("vars") != [_ASK_COLUMN]:
        return data
    truth = bool(bindings) and str(bindings[0][_ASK_COLUMN]["value"]) not in ("0", "false")
    return {"head": {}, "boolean": truth}


def _standard_ask(answer: bytes) -> bytes:
    try:
        data = json.loads(answer)
    except ValueError:
        return answer  # the parser below refuses it
    return json.dumps(boolean_answer(data)).encode() if isinstance(data, dict) else answer


class _Body:
    """A streamed HTTP body as a readable binary file (for Oxigraph's parsers)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks
        self.buffer = b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self.buffer) < size:
            chunk = next(self.chunks, None)
            if chunk is None:
                break
            self.buffer += chunk
        if size < 0:
            size = len(self.buffer)
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def readable(self) -> bool:
        return True


class Evaluator:
    """Runs requests; keeps the snapshot it opened last (snapshots never change)."""

    def __init__(self) -> None:
        self.opened: tuple[str, Any] | None = None
        self.too_many = False

    def _store(self, snapshot: str) -> Any:
        import pyoxigraph as ox

        if self.opened is None or self.opened[0] != snapshot:
            self.opened = None
            try:
                self.opened = (snapshot, ox.Store.read_only(snapshot))
            except OSError:
                raise Refusal(503, "unavailable", "the triple store cannot be read") from None
        return self.opened[1]

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        form = request["form"]
        self.too_many = False
        with open(request["output"], "wb") as handle:
            out = CappedFile(handle, int(request["max_bytes"]))
            try:
                rows = (
                    self._remote(request, out)
                    if request.get("endpoint")
                    else self._local(request, out)
                )
            except Exception as exc:
                # Raised through Oxigraph's writer, a limit may come back wrapped.
                if out.size > out.limit:
                    raise out.refusal() from None
                if self.too_many:
                    raise _too_many(int(request["max_rows"])) from None
                if isinstance(exc, Refusal | MemoryError):
                    raise
                if isinstance(exc, SyntaxError):
                    raise Refusal(
                        400, "invalid-query", f"not a valid SPARQL query: {exc}"
                    ) from None
                raise Refusal(422, "query-failed", "the query could not be evaluated") from None
            out.flush()
        return {"ok": True, "rows": rows, "form": form}

    def _write(self, request: dict[str, Any], result: Any, out: CappedFile) -> int:
        max_rows = int(request["max_rows"])
        if request["form"] in ("SELECT", "ASK"):
            return write_solutions(result, out, max_rows)
        exceeded: list[bool] = []
        try:
            return write_triples(
                result, out, max_rows, request["media_type"], request["prefixes"], exceeded
            )
        finally:
            self.too_many = bool(exceeded)

    def _local(self, request: dict[str, Any], out: CappedFile) -> int:
        import pyoxigraph as ox

        store = self._store(request["snapshot"])
        graphs = request.get("graphs")
        if graphs is None:
            return self._write(request, store.query(request["query"]), out)
        named = [ox.NamedNode(g) for g in graphs]  # the only graphs GRAPH can reach
        return self._write(request, store.query(request["query"], named_graphs=named), out)

    def _remote(self, request: dict[str, Any], out: CappedFile) -> int:
        import httpx
        import pyoxigraph as ox

        timeout = float(request["timeout"])
        select = request["form"] in ("SELECT", "ASK")
        accept = RESULTS_JSON if select else "application/n-triples"
        try:
            with (
                httpx.Client(timeout=httpx.Timeout(timeout, connect=min(5.0, timeout))) as http,
                http.stream(
                    "POST",
                    request["endpoint"],
                    # the protocol's dataset parameters: the only graphs GRAPH can reach
                    data={
                        "query": request["query"],
                        **_dataset(request.get("graphs")),
                    },
                    headers={"Accept": accept},
                ) as response,
            ):
                if response.status_code >= 500:  # its body is never shown to the caller
                    raise Refusal(
                        503, "unavailable", f"the triple store failed (HTTP {response.status_code})"
                    )
                if response.status_code >= 400:
                    raise Refusal(
                        400,
                        "query-failed",
                        f"the triple store refused the query (HTTP {response.status_code})",
                    )
                body = cast(IO[bytes], _Body(response.iter_bytes()))
                if request["form"] == "ASK":  # small: read whole, in the standard form
                    body = io.BytesIO(_standard_ask(body.read()))
                parsed: Any
                try:
                    if select:
                        parsed = ox.parse_query_results(body, ox.QueryResultsFormat.JSON)
                    else:
                        parsed = ox.parse(body, ox.RdfFormat.N_TRIPLES)
                    return self._write(request, parsed, out)
                except (SyntaxError, ValueError):
                    raise Refusal(
                        503, "unavailable", "the triple store answered something unreadable"
                    ) from None
        except httpx.TimeoutException:
            raise Refusal(504, "timeout", "the triple store did not answer in time") from None
        except httpx.HTTPError:
            raise Refusal(503, "unavailable", "the triple store is unreachable") from None


def _dataset(graphs: list[str] | None) -> dict[str, list[str]]:
    """The SPARQL protocol's named-graph parameters for ``graphs`` (None: no restriction)."""
    return {} if graphs is None else {"named-graph-uri": list(graphs)}


def main() -> None:
    _limit_self(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    import httpx  # noqa: F401  (imported now: a request never waits for it)
    import pyoxigraph  # noqa: F401

    evaluator = Evaluator()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        _limit_query(float(request["timeout"]), int(request["max_bytes"]))
        try:
            reply = evaluator.run(request)
        except Refusal as refusal:
            reply = refusal.reply
        except MemoryError:
            reply = Refusal(422, "query-too-costly", "the query needs too much memory").reply
        except OSError as exc:  # the result file passed its size limit (EFBIG)
            reply = Refusal(422, "result-too-large", f"the result is too large ({exc.errno})").reply
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
