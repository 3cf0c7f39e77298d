"""Serving an exported file over HTTP: validators, single byte ranges, streamed bodies.

The ETag is the file's SHA-256 (a strong validator: the bytes under a version's path
never change). ``If-None-Match`` answers 304; one ``Range`` answers 206 with
``Content-Range`` (416 when it lies past the end); several ranges or a malformed header
are ignored and the whole file is sent, as RFC 9110 allows. HEAD answers with the
headers GET would send, and no body. Bodies are read in chunks in a worker thread, so
neither the size of a file nor a slow disk holds the event loop.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import BinaryIO

from fastapi import Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from herald.api.problems import Problem

CHUNK = 256 * 1024
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


@dataclass(frozen=True)
class ByteRange:
    start: int
    end: int  # inclusive

    @property
    def length(self) -> int:
        return self.end - self.start + 1


class Unsatisfiable(Exception):
    """The range starts past the end of the file (or asks for nothing of it)."""


def parse_range(header: str | None, size: int) -> ByteRange | None:
    """The one range ``header`` asks for; None to send the whole file."""
    if header is None:
        return None
    match = _RANGE.fullmatch(header.strip().replace(" ", ""))
    if match is None:  # several ranges, another unit, or garbage: ignore the header
        return None
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:  # the last N bytes
        suffix = int(last)
        if suffix == 0 or size == 0:
            raise Unsatisfiable
        return ByteRange(max(0, size - suffix), size - 1)
    start = int(first)
    if last and int(last) < start:  # syntactically invalid: ignore the header
        return None
    if start >= size:
        raise Unsatisfiable
    end = min(int(last), size - 1) if last else size - 1
    return ByteRange(start, end)


def _etag_matches(header: str, etag: str) -> bool:
    """Weak comparison, as If-None-Match uses."""
    if header.strip() == "*":
        return True
    wanted = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == wanted for tag in header.split(","))


async def _chunks(handle: BinaryIO, start: int, length: int) -> AsyncIterator[bytes]:
    try:
        await run_in_threadpool(handle.seek, start)
        remaining = length
        while remaining > 0:
            data = await run_in_threadpool(handle.read, min(CHUNK, remaining))
            if not data:
                break
            remaining -= len(data)
            yield data
    finally:
        await run_in_threadpool(handle.close)


def file_response(
    request: Request,
    handle: BinaryIO,
    *,
    size: int,
    sha256: str,
    media_type: str,
    filename: str,
) -> Response:
    """Answer a download of the open file ``handle`` (closed once the answer is sent)."""
    etag = f'"{sha256}"'
    headers = {
        "ETag": etag,
        "Accept-Ranges": "bytes",
        "Cache-Control": "public, max-age=31536000, immutable",
        "Content-Disposition": f'attachment; filename="{filename}"',
    }
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None and _etag_matches(if_none_match, etag):
        handle.close()
        return Response(status_code=304, headers=headers)
    range_header = request.headers.get("range")
    if_range = request.headers.get("if-range")
    if if_range is not None and if_range.strip() != etag:
        range_header = None  # the caller holds another representation: send it all
    try:
        wanted = parse_range(range_header, size)
    except Unsatisfiable:
        handle.close()
        raise Problem(
            416,
            "range-not-satisfiable",
            f"range {range_header} lies outside the file's {size} bytes",
            headers={"Content-Range": f"bytes */{size}", **headers},
        ) from None
    status, start, length = (200, 0, size) if wanted is None else (206, wanted.start, wanted.length)
    headers["Content-Length"] = str(length)
    if wanted is not None:
        headers["Content-Range"] = f"bytes {wanted.start}-{wanted.end}/{size}"
    if request.method == "HEAD":  # the same headers as GET, without reading the file
        handle.close()
        return Response(status_code=status, media_type=media_type, headers=headers)
    return StreamingResponse(
        _chunks(handle, start, length),
        status_code=status,
        media_type=media_type,
        headers=headers,
    )
