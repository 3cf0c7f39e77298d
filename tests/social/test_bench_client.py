"""The social benchmark's lean HTTP client (benchmarks.lean_http) against a real server:
what it sends, that it keeps one connection alive, and that it refuses what it cannot
read instead of guessing."""

from __future__ import annotations

import json

import pytest
from benchmarks.lean_http import LeanConnection, LeanHttpError

from tests.social.echo import echo_server


async def test_posts_json_with_its_headers_on_one_kept_alive_connection() -> None:
    async with echo_server() as echo:
        conn = LeanConnection("127.0.0.1", echo.port, {"Authorization": "Bearer t"})
        try:
            for n in range(3):
                answer = await conn.post_json(
                    "/social/posts", {"message": f"post {n}"}, {"Idempotency-Key": f"k{n}"}
                )
                assert answer.status == 202
                head = answer.body.decode()
                assert head.startswith("POST /social/posts HTTP/1.1\r\n")
                assert "Authorization: Bearer t\r\n" in head
                assert f"Idempotency-Key: k{n}\r\n" in head
                assert "Content-Type: application/json\r\n" in head
        finally:
            await conn.close()
        assert echo.connections == 1
        assert len(echo.heads) == 3


async def test_the_body_is_the_json_sent() -> None:
    async with echo_server() as echo:
        conn = LeanConnection("127.0.0.1", echo.port)
        try:
            body = {"account_id": 7, "message": "héllo"}
            answer = await conn.post_json("/x", body)
            sent = json.dumps(body, separators=(",", ":")).encode()
            assert f"Content-Length: {len(sent)}\r\n".encode() in answer.body
        finally:
            await conn.close()


async def test_a_connection_the_server_closes_is_opened_again() -> None:
    async with echo_server() as echo:
        conn = LeanConnection("127.0.0.1", echo.port)
        try:
            first = await conn.post_json("/x", {}, {"X-Echo-Close": "1"})
            second = await conn.post_json("/x", {})
            assert (first.status, second.status) == (202, 202)
        finally:
            await conn.close()
        assert echo.connections == 2


async def test_an_answer_it_cannot_read_is_an_error_and_the_next_request_works() -> None:
    async with echo_server() as echo:
        conn = LeanConnection("127.0.0.1", echo.port)
        try:
            with pytest.raises(LeanHttpError, match="chunked"):
                await conn.post_json("/x", {}, {"X-Echo-Chunked": "1"})
            assert (await conn.post_json("/x", {})).status == 202
        finally:
            await conn.close()
        assert echo.connections == 2


async def test_a_refused_connection_is_an_error() -> None:
    async with echo_server() as echo:
        port = echo.port
    conn = LeanConnection("127.0.0.1", port)
    with pytest.raises(LeanHttpError):
        await conn.post_json("/x", {})
