"""A query's text checked before anything runs it: form, federation, size and depth.

The check is lexical and linear in the text: strings, IRIs, comments and prefixed names
are tokenized exactly as SPARQL defines them, so a keyword hidden in one of them is never
taken for a real one, and a real one is never missed. It refuses:

- updates (the endpoint is read-only) and anything but SELECT, ASK, CONSTRUCT, DESCRIBE;
- federation: ``SERVICE`` anywhere, and dataset clauses (``FROM``, ``FROM NAMED``), which
  some servers dereference over the network (entries are named graphs: use ``GRAPH``);
- queries longer than the limit, nested deeper than the limit, or whose chains of
  operators (``||``, ``+``, ``/``, ``UNION``...) would build an expression tree deeper
  than the limit: such trees overflow the evaluator's stack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FORMS = ("SELECT", "ASK", "CONSTRUCT", "DESCRIBE")
UPDATES = frozenset(
    {"INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH"}
)
FEDERATION = frozenset({"SERVICE", "FROM"})
# Operators and keywords whose repetition the evaluator folds into a left-deep tree.
CHAINING = frozenset({"||", "&&", "+", "-", "*", "/", "|", "^", "UNION", "OPTIONAL", "MINUS"})
OPENING = {"(": ")", "{": "}", "[": "]"}

_PN = r"[A-Za-z\u00C0-\U000EFFFF]"
_PN_REST = r"[\w.\-\u00B7\u00C0-\U000EFFFF]"
_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>\#[^\r\n]*)
  | (?P<iri><[^<>"{}|^`\\\x00-\x20]*>)
  | (?P<string>"{3}(?:(?:"|"")?(?:[^"\\]|\\.))*"{3}
      | '{3}(?:(?:'|'')?(?:[^'\\]|\\.))*'{3}
      | "(?:[^"\\\r\n]|\\.)*"
      | '(?:[^'\\\r\n]|\\.)*')
  | (?P<var>[?$][\w\u00B7\u00C0-\U000EFFFF]+)
  | (?P<blank>_:[\w.\-\u00B7\u00C0-\U000EFFFF]+)
  | (?P<pname>(?:"""
    + _PN
    + _PN_REST
    + r"""*)?:(?:[\w\-.:\u00B7\u00C0-\U000EFFFF]|%[0-9A-Fa-f]{2}|\\[_~.\-!$&'()*+,;=/?\#@%])*)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)
  | (?P<lang>@[A-Za-z]+(?:-[A-Za-z0-9]+)*)
  | (?P<op>\|\||&&|!=|<=|>=|\^\^|[(){}\[\].,;|/^*+\-!=<>?])
    """,
    re.VERBOSE,
)
_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")


class QueryRefused(Exception):
    """The query is refused before it runs; ``status`` and ``slug`` name the problem."""

    def __init__(self, status: int, slug: str, detail: str, retry_after: int | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.slug = slug
        self.detail = detail
        self.retry_after = retry_after


@dataclass(frozen=True)
class Checked:
    form: str  # SELECT, ASK, CONSTRUCT or DESCRIBE
    depth: int  # the deepest expression tree the text can build


def _tokens(text: str) -> list[tuple[str, str]]:
    found = []
    at = 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise QueryRefused(
                400, "invalid-query", f"not a SPARQL query: unexpected {text[at]!r} at {at}"
            )
        kind = match.lastgroup or ""
        if kind not in ("ws", "comment"):
            found.append((kind, match.group()))
        at = match.end()
    return found


def _unescaped(text: str) -> str:
    """SPARQL 1.1 lets \\u escapes stand for any character before parsing."""

    def decode(match: re.Match[str]) -> str:
        code = int(match.group(1) or match.group(2), 16)
        return chr(code) if code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"

    return _ESCAPE.sub(decode, text)


def _form(tokens: list[tuple[str, str]]) -> str:
    at = 0
    while at < len(tokens):  # the prologue: BASE <iri>, PREFIX p: <iri>
        word = tokens[at][1].upper() if tokens[at][0] == "word" else ""
        if word == "BASE":
            at += 2
        elif word == "PREFIX":
            at += 3
        else:
            break
    kind, value = tokens[at] if at < len(tokens) else ("", "")
    word = value.upper() if kind == "word" else ""
    if word in UPDATES:
        raise QueryRefused(400, "update-refused", "this endpoint is read-only: updates are refused")
    if word not in FORMS:
        raise QueryRefused(
            400, "invalid-query", "not a SPARQL query (SELECT, ASK, CONSTRUCT, DESCRIBE)"
        )
    return word


def _depth(tokens: list[tuple[str, str]], limit: int) -> int:
    """The deepest tree the brackets and operator chains build (stops past ``limit``)."""
    parents: list[int] = [-1]
    chains: list[int] = [0]
    closers: list[str] = [""]
    open_frames = [0]
    for kind, value in tokens:
        if kind == "op" and value in OPENING:
            parents.append(open_frames[-1])
            chains.append(0)
            closers.append(OPENING[value])
            open_frames.append(len(parents) - 1)
            if len(open_frames) - 1 > limit:
                break
        elif kind == "op" and value in (")", "}", "]"):
            if len(open_frames) == 1 or closers[open_frames[-1]] != value:
                raise QueryRefused(
                    400, "invalid-query", f"not a SPARQL query: unbalanced {value!r}"
                )
            open_frames.pop()
        elif (kind == "op" and value in CHAINING) or (kind == "word" and value.upper() in CHAINING):
            chains[open_frames[-1]] += 1
    costs: list[int] = []
    for frame, parent in enumerate(parents):
        costs.append(chains[frame] + 1 + (costs[parent] if parent >= 0 else 0))
    return max(costs)


def check_query(text: str, *, max_chars: int, max_depth: int) -> Checked:
    """The query's form, or :class:`QueryRefused`."""
    if len(text) > max_chars:
        raise QueryRefused(
            413, "query-too-large", f"a query may have at most {max_chars} characters"
        )
    if "\x00" in text:
        raise QueryRefused(400, "invalid-query", "a query cannot contain NUL characters")
    forms = []
    depth = 0
    for variant in dict.fromkeys((_unescaped(text), text)):  # escapes may hide keywords
        tokens = _tokens(variant)
        words = {value.upper() for kind, value in tokens if kind == "word"}
        if words & FEDERATION:
            raise QueryRefused(
                400,
                "federation-refused",
                "SERVICE and dataset clauses (FROM, FROM NAMED) are refused: this endpoint "
                "reads the catalog only (entries are named graphs: query them with GRAPH)",
            )
        forms.append(_form(tokens))
        depth = max(depth, _depth(tokens, max_depth))
    if depth > max_depth:
        raise QueryRefused(
            400,
            "query-too-deep",
            f"the query nests or chains operators more than {max_depth} levels deep",
        )
    return Checked(forms[0], depth)
