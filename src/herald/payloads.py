"""How deep a JSON value nests: bounded at admission, so every stored payload can be
encoded back (JSON encoders give up somewhere past a few hundred levels)."""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 64  # levels of objects and arrays; far beyond any real payload


def depth(value: Any) -> int:
    """Levels of nested objects and arrays in ``value`` (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        level += 1
        deepest = max(deepest, level)
        stack.extend((child, level) for child in children)
    return deepest


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    return depth(value) > limit
