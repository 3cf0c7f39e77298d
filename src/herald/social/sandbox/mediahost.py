"""The sandbox's media host: sample images at a URL, able to misbehave on request.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): posts in
tests, the demo and benchmarks name a media URL here, and the media step fetches it
within its limits. Query parameters make the host misbehave the ways real media hosts
do, so every limit can be exercised over real HTTP:

``GET /_sandbox/media/{name}.png?size=N`` answers a valid PNG of about ``N`` bytes;
``declared=TYPE`` sends another ``Content-Type``; ``length=omit`` sends no
``Content-Length`` (chunked); ``drip=S`` waits ``S`` seconds between 16 KiB chunks;
``redirects=K`` answers ``K`` redirects first; ``status=CODE`` answers that status;
``body=text`` serves text instead of an image.
"""

from __future__ import annotations

import asyncio
import random
import struct
import zlib
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from herald.social.sandbox.common import guarded, reply
from herald.social.sandbox.state import SandboxState

CHUNK = 16 * 1024


def sample_png(size: int, seed: int = 0) -> bytes:
    """A valid RGB PNG of about ``size`` bytes (at least a few hundred) of noise."""
    side = max(4, int((max(size, 64) / 3) ** 0.5))
    rng = random.Random(seed)
    rows = b"".join(b"\x00" + rng.randbytes(side * 3) for _ in range(side))

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 0))
        + chunk(b"IEND", b"")
    )


def routes(state: SandboxState) -> list[Route]:
    async def media(request: Request) -> Response:
        query = request.query_params
        try:
            size = int(query.get("size", "2048"))
            redirects = int(query.get("redirects", "0"))
            status = int(query.get("status", "200"))
            drip = float(query.get("drip", "0"))
        except ValueError:
            return reply({"error": "size, redirects and status are numbers"}, 400)
        if redirects > 0:
            params = dict(query)
            params["redirects"] = str(redirects - 1)
            target = request.url.replace_query_params(**params)
            return Response(status_code=302, headers={"Location": str(target)})
        if status != 200:
            return reply({"error": f"status {status} as asked"}, status)
        name = request.path_params["name"]
        if query.get("body") == "text":
            data = b"this is not an image " * max(1, size // 21)
        else:
            data = sample_png(size, seed=sum(name.encode()))
        headers = {"Content-Type": query.get("declared", "image/png")}

        async def chunks() -> AsyncIterator[bytes]:
            for start in range(0, len(data), CHUNK):
                if drip > 0 and start:
                    await asyncio.sleep(drip)
                yield data[start : start + CHUNK]

        if query.get("length") != "omit":
            headers["Content-Length"] = str(len(data))
        return StreamingResponse(chunks(), headers=headers)

    return [Route("/_sandbox/media/{name}", guarded(state, media, platform=False))]
