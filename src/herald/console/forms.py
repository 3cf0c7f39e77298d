"""HTML form bodies (``application/x-www-form-urlencoded``), read with limits.

The console's forms carry a few short fields (and at most a schedule's payload), so a
body is capped; anything else (another media type, invalid UTF-8, a NUL character,
thousands of fields) is refused with a clear status instead of being half-read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from urllib.parse import parse_qs

from starlette.requests import Request

MAX_BYTES = 1_100_000  # a schedule payload may be up to 1 MB of JSON
MAX_FIELDS = 1000
_FORM = "application/x-www-form-urlencoded"


class BadForm(Exception):
    """A form body the console refuses; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Form(Mapping[str, str]):
    """A parsed form: ``form[name]`` is the first value, ``getlist`` every value."""

    def __init__(self, fields: dict[str, list[str]]) -> None:
        self._fields = fields

    def __getitem__(self, name: str) -> str:
        return self._fields[name][0]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def getlist(self, name: str) -> list[str]:
        return list(self._fields.get(name, []))


def parse(body: bytes) -> Form:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadForm(400, "the form is not valid UTF-8") from None
    try:
        fields = parse_qs(text, keep_blank_values=True, max_num_fields=MAX_FIELDS, errors="strict")
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadForm(400, f"the form cannot be read: {exc}") from None
    if any("\x00" in key or any("\x00" in v for v in values) for key, values in fields.items()):
        raise BadForm(400, "the form contains a NUL character")
    return Form(fields)


async def read_form(request: Request) -> Form:
    """The request's form, read once (later calls get the same one)."""
    cached = getattr(request.state, "form", None)
    if isinstance(cached, Form):
        return cached
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != _FORM:
        raise BadForm(415, f"a console form is sent as {_FORM}")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BYTES:
        raise BadForm(413, f"the form is over {MAX_BYTES} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BYTES:
            raise BadForm(413, f"the form is over {MAX_BYTES} bytes")
        chunks.append(chunk)
    form = parse(b"".join(chunks))
    request.state.form = form
    return form
