"""Hardened incremental XML parsing: byte chunks in, one mapped record at a time out.

Place in the pipeline: the fetcher feeds each chunk of the HTTP body to a
:class:`StreamParser` as it arrives (no document tree, no temporary copy); the parser
builds a small tree for one record element at a time, hands it to the format's mapper
and keeps the mapped records until the fetcher takes them for the sink.

Hardening (expat underneath, driven directly):

- A DTD is refused at ``<!DOCTYPE``, before any declaration is read, so no entity is
  ever declared: no external entity (XXE) can be read, no expansion (billion laughs) can
  start, no URL is ever fetched. A reference to an undeclared entity is an XML error.
- Nesting depth, attributes per element, elements and bytes per record, and the size
  of a single markup token held by expat are bounded, so memory stays bounded whatever
  the document.
- A record that is not well-formed, too deep or too large is skipped: the parser is
  restarted at the next record boundary and the skipped bytes are reported (bounded)
  with the reason. A record that is well-formed but fails its mapping is reported the
  same way. Too many such records and the document counts as broken.
- A broken document (not XML, a DTD, the wrong root, truncated, an error outside any
  record) raises :class:`DocumentError`; records mapped before it stay with the caller,
  who must treat the whole parse as failed.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, NoReturn, TypeVar
from xml.parsers import expat

from herald.ingest.errors import DocumentError, InvalidRecord

R = TypeVar("R")


@dataclass(frozen=True)
class ParseLimits:
    """Bounds that keep a hostile or broken document from costing unbounded memory."""

    max_depth: int = 32  # element nesting, counted from the root
    max_attributes: int = 64  # per element
    max_attribute_chars: int = 16_384  # per attribute value
    max_record_bytes: int = 1 << 20  # one record element, start tag to end tag
    max_record_elements: int = 10_000  # elements inside one record
    max_token_bytes: int = 1 << 20  # one tag, comment or name held unfinished by expat
    max_rejects: int = 10_000  # malformed records before the document counts as broken
    max_raw_bytes: int = 8_192  # raw text kept with a rejected record

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            if getattr(self, name) < 1:
                raise ValueError(f"parse limit {name} must be at least 1")


@dataclass(frozen=True)
class RecordLayout:
    """Where records sit in a document: the element path from the root to a record.

    ``("planList", "output", "base_plan")`` means every ``base_plan`` child of
    ``output`` under the root ``planList`` is a record. Other elements along the way are
    ignored (counted). ``text`` keeps character data of elements inside records.
    """

    path: tuple[str, ...]
    text: bool = False

    def __post_init__(self) -> None:
        if len(self.path) < 2:
            raise ValueError("a record layout needs a root element and a record element")

    @property
    def root(self) -> str:
        return self.path[0]

    @property
    def record(self) -> str:
        return self.path[-1]


class RawElement:
    """One element of a record as parsed: name, attributes, children, text."""

    __slots__ = ("attrs", "children", "name", "text")

    def __init__(self, name: str, attrs: dict[str, str]) -> None:
        self.name = name
        self.attrs = attrs
        self.children: list[RawElement] = []
        self.text = ""

    def __repr__(self) -> str:
        return f"RawElement({self.name!r}, {self.attrs!r}, children={len(self.children)})"


@dataclass(frozen=True, slots=True)
class Rejected:
    """A record that was skipped, with why and the raw bytes it spanned (bounded).

    ``offset``/``line`` locate it in the document; ``size`` is how many bytes it spanned
    (``None`` when it was cut short by the skip); ``truncated`` says ``raw`` is only the
    first ``max_raw_bytes`` of it.
    """

    reason: str
    raw: bytes
    truncated: bool
    offset: int
    line: int
    size: int | None


@dataclass(frozen=True, slots=True)
class ParseStats:
    records: int
    rejected: int
    ignored_elements: int
    bytes: int


Mapper = Callable[[RawElement], Sequence["R | InvalidRecord"]]


class _RecordFault(Exception):
    """Internal: the current record must be skipped and the parser restarted after it."""


class _Refused(Exception):
    """Internal: the document is refused as a whole (raised from an expat handler)."""


# Errors expat raises on the final call when the input stopped too early.
_ENDED_EARLY = {
    expat.errors.codes[expat.errors.XML_ERROR_UNCLOSED_TOKEN],
    expat.errors.codes[expat.errors.XML_ERROR_NO_ELEMENTS],
    expat.errors.codes[expat.errors.XML_ERROR_PARTIAL_CHAR],
    expat.errors.codes[expat.errors.XML_ERROR_UNCLOSED_CDATA_SECTION],
}
_DTD_REFUSED = (
    "the document declares a DTD (<!DOCTYPE>): refused, DTDs and entity declarations "
    "are never processed"
)


class StreamParser(Generic[R]):
    """Feed bytes with :meth:`feed`, finish with :meth:`close`, collect with :meth:`take`.

    After a :class:`DocumentError` the parser is dead: every later call raises again.
    """

    def __init__(
        self, layout: RecordLayout, mapper: Mapper[R], limits: ParseLimits | None = None
    ) -> None:
        self.layout = layout
        self.limits = limits or ParseLimits()
        self._mapper = mapper
        self._records: list[R] = []
        self._rejects: list[Rejected] = []
        self._n_records = 0
        self._n_rejects = 0
        self._ignored = 0
        self._fed = 0  # bytes of document received
        # The document's bytes from _window_start to _fed: the record being parsed (for
        # its raw text) and what expat has not consumed yet. Trimmed after every chunk.
        self._window = bytearray()
        self._window_start = 0
        self._record_start = -1  # offset of the record being parsed, -1 outside one
        self._record_line = 0
        self._root_seen = False
        self._container_seen = False
        self._encoding: str | None = None
        self._ascii_markup = True
        self._closed = False
        self._failure: DocumentError | None = None
        # Skipping a bad record: where it started, why, and where to look for the next.
        self._skip_start = -1
        self._skip_reason = ""
        self._skip_line = 0
        self._scan_from = 0
        record = re.escape(layout.record.encode())
        self._record_tag = re.compile(rb"<%s[\s/>]" % record)
        self._last_end = 0  # offset where the last record ended (or 0)
        # Where parsing can restart after a skipped record: the next record, or the end
        # of the element that holds the records; never inside a comment, a CDATA section
        # or a processing instruction (their openers are matched so they can be passed).
        container = re.escape(layout.path[-2].encode())
        self._boundary = re.compile(
            rb"(?P<at><%s[\s/>]|</%s[\s>])|(?P<open><!--|<!\[CDATA\[|<\?)" % (record, container)
        )
        self._shift = 0  # document offset of the current expat parser's byte 0
        self._line_shift = 0  # document line of the current expat parser's line 1, minus 1
        self._parser = self._new_parser(None)

    # -- public surface ---------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Parse the next chunk of the document (any size, split anywhere)."""
        self._usable()
        if not data:
            return
        if self._fed == 0:
            self._sniff(data)
        self._fed += len(data)
        self._window += data
        self._run(data, final=False)
        self._bound_and_trim()

    def close(self) -> None:
        """The document ended: raise :class:`DocumentError` unless it was complete."""
        self._usable()
        self._closed = True
        if self._fed == 0:
            self._fail("the document is empty", 0)
        self._run(b"", final=True)
        if not self._container_seen:
            self._fail(
                f"the document has no <{'/'.join(self.layout.path[:-1])}> element: "
                "it is not a snapshot of this format",
                None,
            )

    def take(self) -> tuple[list[R], list[Rejected]]:
        """Records and rejects parsed since the last call (the caller owns them)."""
        records, rejects = self._records, self._rejects
        self._records, self._rejects = [], []
        return records, rejects

    @property
    def pending(self) -> int:
        """How many records and rejects :meth:`take` would return now."""
        return len(self._records) + len(self._rejects)

    @property
    def stats(self) -> ParseStats:
        return ParseStats(self._n_records, self._n_rejects, self._ignored, self._fed)

    # -- driving expat ----------------------------------------------------------------

    def _usable(self) -> None:
        if self._failure is not None:
            raise DocumentError(f"the parse already failed: {self._failure}", self._failure.offset)
        if self._closed:
            raise RuntimeError("the parser is closed")

    def _sniff(self, data: bytes) -> None:
        # UTF-16/32 (a BOM or NUL bytes early on) spell markup in more than one byte.
        head = data[:4]
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or b"\x00" in head:
            self._ascii_markup = False

    def _run(self, data: bytes, final: bool) -> None:
        while True:
            if self._skip_start >= 0:
                if not self._resume(final):
                    return
                data = bytes(self._window[self._scan_from - self._window_start :])
            try:
                self._parser.Parse(data, final)
                return
            except _Refused as exc:
                self._fail(str(exc), self._position())
            except _RecordFault as exc:
                self._skip(str(exc), self._position())
            except expat.ExpatError as exc:
                self._expat_error(exc, final)

    def _expat_error(self, exc: expat.ExpatError, final: bool) -> None:
        where = self._shift + self._parser.ErrorByteIndex
        line = self._line_shift + exc.lineno
        message = f"{expat.ErrorString(exc.code)} at line {line}, column {exc.offset}"
        if final and exc.code in _ENDED_EARLY:
            self._fail(f"the document is truncated ({self._fed} bytes): {message}", where)
        if not self._root_seen:
            self._fail(f"the document is not XML: {message}", where)
        if not self._ascii_markup:
            self._fail(f"{message} (a record cannot be skipped in this encoding)", where)
        if self._record_start < 0 and not self._in_start_tag(where, line):
            self._fail(f"the document is malformed outside any record: {message}", where)
        self._skip(f"not well-formed XML: {message}", where)

    def _in_start_tag(self, where: int, line: int) -> bool:
        """Whether ``where`` lies in a record's start tag (expat fails before the handler).

        If so, that record becomes the current one, so it is skipped like any other.
        """
        if not self._container_seen:
            return False
        lo = max(0, self._last_end - self._window_start)
        hi = where - self._window_start
        # expat may place the error at the tag's "<" itself: let a match start there.
        reach = hi + len(self.layout.record) + 2
        found = None
        for match in self._record_tag.finditer(self._window, lo, max(lo, reach)):
            found = match
        if found is None:
            return False
        self._record_start = self._window_start + found.start()
        self._record_line = line - self._window.count(b"\n", found.start(), hi)
        return True

    def _position(self) -> int:
        """Document offset of expat's current event (or of its unfinished token)."""
        index = self._parser.CurrentByteIndex
        return self._fed if index < 0 else self._shift + index

    def _bound_and_trim(self) -> None:
        limits = self.limits
        if self._skip_start < 0:
            start = self._record_start
            if start >= 0 and self._fed - start > limits.max_record_bytes:
                self._skip(f"the record exceeds {limits.max_record_bytes} bytes", self._fed)
                self._run(b"", final=False)
            elif self._fed - self._position() > limits.max_token_bytes:
                reason = f"a markup token exceeds {limits.max_token_bytes} bytes"
                if start < 0:
                    self._fail(f"{reason} outside any record", self._position())
                self._skip(reason, self._fed)
                self._run(b"", final=False)
        if self._skip_start >= 0:
            if self._fed - self._skip_start > limits.max_record_bytes + limits.max_token_bytes:
                self._fail(
                    f"no record boundary within {self._fed - self._skip_start} bytes after "
                    f"the malformed record at byte {self._skip_start}",
                    self._skip_start,
                )
            keep = self._skip_start
        elif self._record_start >= 0:
            keep = self._record_start
        else:
            keep = self._position()
        drop = keep - self._window_start
        if drop > 0:
            del self._window[:drop]  # bytearray drops its head in place, amortised O(1)
            self._window_start = keep

    # -- skipping a malformed record ----------------------------------------------------

    def _skip(self, reason: str, where: int) -> None:
        """Abandon the current record; :meth:`_resume` restarts at the next boundary."""
        if not self._ascii_markup:
            self._fail(f"{reason} (a record cannot be skipped in this encoding)", where)
        self._skip_reason = reason
        self._skip_start = self._record_start
        self._skip_line = self._record_line
        self._scan_from = max(where, self._record_start + 1)
        self._record_start = -1

    def _resume(self, final: bool) -> bool:
        """Find the next record or the container's end tag and restart expat there."""
        match = self._find_boundary()
        if match is None:
            if final:
                self._fail(
                    f"the document is truncated ({self._fed} bytes) inside the malformed "
                    f"record at byte {self._skip_start} ({self._skip_reason})",
                    self._skip_start,
                )
            return False
        lo = self._skip_start - self._window_start
        boundary = self._window_start + match.start()
        line = self._skip_line + self._window.count(b"\n", lo, match.start())
        self._reject(self._skip_reason, self._skip_start, self._skip_line, boundary, cut=True)
        self._skip_start = -1
        self._scan_from = boundary
        self._last_end = boundary
        # Reopen the record's ancestors so the rest of the document nests as before.
        prefix = "".join(f"<{name}>" for name in self.layout.path[:-1]).encode()
        self._parser = self._new_parser(self._encoding)
        self._shift = boundary - len(prefix)
        self._line_shift = line - 1
        self._parser.Parse(prefix, False)
        return True

    def _find_boundary(self) -> re.Match[bytes] | None:
        """The next boundary in the window past comments, CDATA and PIs, or ``None``.

        On ``None`` it sets where to look again once more data has come.
        """
        window = self._window
        at = max(0, self._scan_from - self._window_start)
        while True:
            match = self._boundary.search(window, at)
            if match is None:
                # A boundary may straddle this chunk and the next: rescan the tail.
                self._scan_from = max(self._window_start + at, self._fed - 64)
                return None
            if match.group("at"):
                return match
            closer = _CLOSERS[match.group("open")]
            end = window.find(closer, match.end())
            if end < 0:  # still open: look again from its opener when more has come
                self._scan_from = self._window_start + match.start()
                return None
            at = end + len(closer)

    def _reject(self, reason: str, start: int, line: int, end: int, cut: bool) -> None:
        self._n_rejects += 1
        if self._n_rejects > self.limits.max_rejects:
            self._fail(
                f"more than {self.limits.max_rejects} malformed records: the document is "
                f"treated as broken (the last: {reason})",
                start,
            )
        lo = start - self._window_start
        raw = bytes(
            self._window[lo : min(end - self._window_start, lo + self.limits.max_raw_bytes)]
        )
        self._rejects.append(
            Rejected(
                reason=reason,
                raw=raw,
                truncated=end - start > len(raw),
                offset=start,
                line=line,
                size=None if cut else end - start,
            )
        )

    def _fail(self, message: str, offset: int | None) -> NoReturn:
        self._failure = DocumentError(message, offset)
        raise self._failure

    # -- expat and its handlers ---------------------------------------------------------

    def _new_parser(self, encoding: str | None) -> expat.XMLParserType:
        """A fresh expat parser whose handlers build one record at a time.

        The handlers are closures over local state
        (the hot path of a large snapshot), the rare branches are methods.
        """
        parser = expat.ParserCreate(encoding)
        parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        path = self.layout.path
        record_depth = len(path)
        limits = self.limits
        max_depth = limits.max_depth
        max_attrs = limits.max_attributes
        max_elements = limits.max_record_elements
        depth = 0
        on_path = 0  # how many leading levels match the layout's path
        node: RawElement | None = None
        stack: list[RawElement] = []
        elements = 0

        def start(name: str, attrs: dict[str, str]) -> None:
            nonlocal depth, node, elements, on_path
            depth += 1
            if node is not None:
                elements += 1
                if depth > max_depth:
                    raise _RecordFault(f"nesting deeper than {max_depth} elements")
                if elements > max_elements:
                    raise _RecordFault(f"the record has more than {max_elements} elements")
                if len(attrs) > max_attrs:
                    raise _RecordFault(f"<{name}> has more than {max_attrs} attributes")
                child = RawElement(name, attrs)
                node.children.append(child)
                stack.append(node)
                node = child
            elif on_path == record_depth - 1 and depth == record_depth and name == path[-1]:
                self._record_start = self._shift + parser.CurrentByteIndex
                self._record_line = self._line_shift + parser.CurrentLineNumber
                if len(attrs) > max_attrs:
                    raise _RecordFault(f"<{name}> has more than {max_attrs} attributes")
                node = RawElement(name, attrs)
                elements = 1
            else:
                on_path = self._outside(name, attrs, depth, on_path)

        def end(_name: str) -> None:
            nonlocal depth, node, on_path
            depth -= 1
            if stack:
                node = stack.pop()
            elif node is not None:
                record, node = node, None
                self._finished(record, self._shift + parser.CurrentByteIndex)
            elif on_path > depth:
                on_path = depth

        def text(data: str) -> None:
            if node is not None:
                node.text += data

        def refuse(*_: object) -> NoReturn:
            raise _Refused(_DTD_REFUSED)

        parser.StartElementHandler = start
        parser.EndElementHandler = end
        if self.layout.text:
            parser.buffer_text = True
            parser.CharacterDataHandler = text
        parser.StartDoctypeDeclHandler = refuse
        parser.EntityDeclHandler = refuse
        parser.UnparsedEntityDeclHandler = refuse
        parser.NotationDeclHandler = refuse
        parser.ExternalEntityRefHandler = refuse
        parser.XmlDeclHandler = self._declared
        return parser

    def _outside(self, name: str, attrs: dict[str, str], depth: int, on_path: int) -> int:
        """An element outside any record: check the root, follow the path, count others.

        Returns how many leading levels now match the layout's path.
        """
        path = self.layout.path
        limits = self.limits
        if depth > limits.max_depth:
            raise _Refused(f"nesting deeper than {limits.max_depth} elements")
        fault = _attribute_fault(name, attrs, limits)
        if fault:
            raise _Refused(f"{fault} outside any record")
        if depth == 1:
            if name != path[0]:
                raise _Refused(
                    f"the root element is <{name}>, expected <{path[0]}>: "
                    "not a snapshot of this format"
                )
            self._root_seen = True
            self._container_seen = self._container_seen or len(path) == 2
            return 1
        if on_path == depth - 1 and depth < len(path) and name == path[depth - 1]:
            if depth == len(path) - 1:
                self._container_seen = True
            return depth
        if depth == on_path + 1:
            self._ignored += 1  # an unknown element (its subtree is skipped with it)
        return on_path

    def _declared(self, _version: str, encoding: str | None, _standalone: int) -> None:
        if encoding is None:
            return
        self._encoding = encoding
        try:
            spelled = _ASCII.decode(encoding).encode(encoding)
        except (LookupError, UnicodeError):
            spelled = b""
        if spelled != _ASCII:
            self._ascii_markup = False

    def _finished(self, element: RawElement, end_index: int) -> None:
        start, line = self._record_start, self._record_line
        self._record_start = -1
        self._last_end = end_index
        limits = self.limits
        # end_index is at the end tag's "<" (or past an empty element): exact enough for
        # the bounds; the exact end is only worked out for a record that is rejected.
        size = end_index - start
        fault = None
        if size > limits.max_record_bytes:
            fault = f"the record is over the limit of {limits.max_record_bytes} bytes"
        elif size > limits.max_attribute_chars:
            # Only a record this large can hold a value over the limit: walk it then only.
            fault = _oversized_value(element, limits)
        if fault is None:
            try:
                results = self._mapper(element)
            except InvalidRecord as exc:
                fault = str(exc)
        if fault is not None:
            self._reject(fault, start, line, self._record_end(start, end_index), cut=False)
            return
        for result in results:
            if isinstance(result, InvalidRecord):
                self._reject(
                    str(result), start, line, self._record_end(start, end_index), cut=False
                )
            else:
                self._n_records += 1
                self._records.append(result)

    def _record_end(self, start: int, end_index: int) -> int:
        """Document offset just past a record's end tag (or its empty-element tag).

        expat reports an end tag's event at its ``<`` but an empty element's end just
        past its ``/>``, so tell the two apart by the record's start tag.
        """
        window, base = self._window, self._window_start
        tag_end = _tag_end(window, start - base)
        if tag_end is not None and window[tag_end - 2 : tag_end] == b"/>":
            return base + tag_end
        close = window.find(b">", end_index - base)
        return end_index if close < 0 else base + close + 1


_CLOSERS = {b"<!--": b"-->", b"<![CDATA[": b"]]>", b"<?": b"?>"}

# Markup in an encoding that spells ASCII as ASCII bytes: only there can the parser find
# the next record boundary itself after a malformed record.
_ASCII = b"<a/>"


def _attribute_fault(name: str, attrs: dict[str, str], limits: ParseLimits) -> str | None:
    if len(attrs) > limits.max_attributes:
        return f"<{name}> has more than {limits.max_attributes} attributes"
    for key, value in attrs.items():
        if len(value) > limits.max_attribute_chars:
            return (
                f"<{name}> attribute {key!r} is {len(value)} characters, over the limit "
                f"of {limits.max_attribute_chars}"
            )
    return None


def _oversized_value(element: RawElement, limits: ParseLimits) -> str | None:
    pending = [element]
    while pending:
        current = pending.pop()
        fault = _attribute_fault(current.name, current.attrs, limits)
        if fault:
            return fault
        pending.extend(current.children)
    return None


def _tag_end(window: bytearray, lo: int) -> int | None:
    """Index just past the start tag at ``lo``, skipping quoted attribute values."""
    quote = 0
    for i in range(lo + 1, len(window)):
        byte = window[i]
        if quote:
            if byte == quote:
                quote = 0
        elif byte in (0x22, 0x27):
            quote = byte
        elif byte == 0x3E:
            return i + 1
    return None
