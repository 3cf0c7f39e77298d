"""Small charts drawn on the server as inline SVG (no script, no library).

Each chart is an image with a title and a description that say in words what it shows
(for screen readers, and for anyone who cannot tell the shades apart); colours come from
CSS classes, so they follow the stylesheet's light and dark themes.
"""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup

WIDTH = 240
HEIGHT = 48
_PAD = 2


def _frame(chart_id: str, title: str, description: str, body: Markup) -> Markup:
    return Markup(
        '<svg class="chart" viewBox="0 0 {w} {h}" preserveAspectRatio="none" role="img" '
        'aria-labelledby="{id}-t {id}-d" focusable="false">'
        '<title id="{id}-t">{title}</title><desc id="{id}-d">{description}</desc>'
        '<line class="axis" x1="0" y1="{base}" x2="{w}" y2="{base}"/>{body}</svg>'
    ).format(
        w=WIDTH,
        h=HEIGHT,
        id=chart_id,
        title=title,
        description=description,
        base=HEIGHT - 0.5,
        body=body,
    )


def bars(
    chart_id: str,
    title: str,
    description: str,
    good: Sequence[int],
    bad: Sequence[int] = (),
) -> Markup:
    """One bar per bucket: ``good`` below, ``bad`` stacked on top in the warning shade."""
    count = len(good)
    bad = list(bad) or [0] * count
    top = max((g + b for g, b in zip(good, bad, strict=True)), default=0) or 1
    step = WIDTH / max(count, 1)
    usable = HEIGHT - _PAD
    parts = []
    for index, (g, b) in enumerate(zip(good, bad, strict=True)):
        x = index * step + step * 0.1
        w = max(step * 0.8, 0.5)
        g_h = usable * g / top
        b_h = usable * b / top
        if g:
            parts.append(
                Markup(
                    '<rect class="bar" x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" height="{h:.2f}"/>'
                ).format(x=x, y=HEIGHT - g_h, w=w, h=g_h)
            )
        if b:
            parts.append(
                Markup(
                    '<rect class="bar bad" x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" '
                    'height="{h:.2f}"/>'
                ).format(x=x, y=HEIGHT - g_h - b_h, w=w, h=b_h)
            )
    return _frame(chart_id, title, description, Markup("").join(parts))


def rate_line(chart_id: str, title: str, description: str, rates: Sequence[float | None]) -> Markup:
    """A line of percentages (0 to 100) per bucket; a bucket with no attempts is a gap."""
    return line(chart_id, title, description, rates, 100.0)


def line(
    chart_id: str,
    title: str,
    description: str,
    values: Sequence[float | None],
    top: float | None = None,
) -> Markup:
    """A line of values per bucket, from 0 to ``top`` (default: the largest value);
    a bucket without a value (None) is a gap."""
    count = len(values)
    step = WIDTH / max(count, 1)
    usable = HEIGHT - _PAD
    ceiling = top if top is not None else max((v for v in values if v is not None), default=0.0)
    ceiling = ceiling or 1.0
    segments: list[list[str]] = [[]]
    for index, value in enumerate(values):
        if value is None:
            if segments[-1]:
                segments.append([])
            continue
        x = index * step + step / 2
        y = HEIGHT - usable * min(max(value, 0.0), ceiling) / ceiling
        segments[-1].append(f"{x:.2f},{y:.2f}")
    parts = []
    for points in segments:
        if len(points) == 1:  # a lone bucket: a dot, not an invisible line
            cx, cy = points[0].split(",")
            parts.append(
                Markup('<circle class="dot" cx="{x}" cy="{y}" r="1.6"/>').format(x=cx, y=cy)
            )
        elif points:
            parts.append(Markup('<polyline class="line" points="{p}"/>').format(p=" ".join(points)))
    return _frame(chart_id, title, description, Markup("").join(parts))
