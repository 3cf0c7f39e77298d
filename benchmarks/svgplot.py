"""A small SVG line chart (panels stacked over one x axis), standard library only: the
benchmarks draw their own output without a plotting dependency."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

WIDTH, PANEL_HEIGHT, LEFT, RIGHT, TOP, GAP = 760, 170, 70, 150, 40, 40
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


@dataclass(frozen=True)
class Panel:
    unit: str  # the y axis label
    series: dict[str, list[float]]  # name -> one value per x


def render(title: str, xs: list[float], panels: list[Panel], x_label: str = "minutes") -> str:
    if not xs:
        raise ValueError("nothing to plot")
    for panel in panels:
        for name, ys in panel.series.items():
            if len(ys) != len(xs):
                raise ValueError(f"{name}: {len(ys)} values for {len(xs)} x positions")
    height = TOP + len(panels) * (PANEL_HEIGHT + GAP) + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="{LEFT}" y="20" font-size="14">{escape(title)}</text>',
    ]
    x_max = max(xs) or 1.0
    plot_w = WIDTH - LEFT - RIGHT
    for n, panel in enumerate(panels):
        top = TOP + n * (PANEL_HEIGHT + GAP)
        y_max = _nice(max((max(ys) for ys in panel.series.values() if ys), default=1.0))
        out.append(
            f'<rect x="{LEFT}" y="{top}" width="{plot_w}" height="{PANEL_HEIGHT}" '
            'fill="none" stroke="#999"/>'
        )
        for i in range(5):  # y grid: 0, 1/4 ... of the rounded maximum
            value = y_max * i / 4
            y = top + PANEL_HEIGHT - PANEL_HEIGHT * i / 4
            out.append(
                f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
            )
            out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{value:g}</text>')
        out.append(
            f'<text x="14" y="{top + PANEL_HEIGHT / 2:.0f}" transform="rotate(-90 14 '
            f'{top + PANEL_HEIGHT / 2:.0f})" text-anchor="middle">{escape(panel.unit)}</text>'
        )
        for k, (name, ys) in enumerate(panel.series.items()):
            colour = COLOURS[k % len(COLOURS)]
            points = " ".join(
                f"{LEFT + plot_w * x / x_max:.1f},{top + PANEL_HEIGHT * (1 - y / y_max):.1f}"
                for x, y in zip(xs, ys, strict=True)
            )
            out.append(
                f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.5"/>'
            )
            ly = top + 14 + 16 * k
            out.append(
                f'<line x1="{LEFT + plot_w + 10}" x2="{LEFT + plot_w + 30}" y1="{ly - 4}" '
                f'y2="{ly - 4}" stroke="{colour}" stroke-width="2"/>'
            )
            out.append(f'<text x="{LEFT + plot_w + 35}" y="{ly}">{escape(name)}</text>')
        bottom = top + PANEL_HEIGHT
        for i in range(6):
            x = x_max * i / 5
            px = LEFT + plot_w * i / 5
            out.append(f'<text x="{px:.1f}" y="{bottom + 14}" text-anchor="middle">{x:.3g}</text>')
        out.append(
            f'<text x="{LEFT + plot_w / 2}" y="{bottom + 28}" text-anchor="middle">'
            f"{escape(x_label)}</text>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _nice(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k at or above ``value`` (a round axis top)."""
    if value <= 0:
        return 1.0
    scale = 10.0 ** (len(str(int(value))) - 1) if value >= 1 else 1.0
    for step in (1, 2, 2.5, 5, 10):
        if step * scale >= value:
            return step * scale
    return 10 * scale
