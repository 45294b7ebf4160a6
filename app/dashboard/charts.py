"""The two charts of the main page as inline SVG built here: no JavaScript and no build step, so they show
with scripts off and in the browser's print. Each bar carries its data in data-* attributes and a <title>
(the tooltip, and what a screen reader reads)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from app.store.shapes import AgeBucket, DayCount, HealthOut

WIDTH, HEIGHT = 640, 180
MARGIN_LEFT, MARGIN_BOTTOM, MARGIN_TOP = 36, 28, 12


@dataclass(frozen=True)
class Bar:
    key: str  # data-key: the day or the bucket label
    value: int
    tooltip: str
    label: str = ""  # written under the bar when not empty
    extra_class: str = ""  # beside the chart's class: a bar that stands apart (a blind health)


def _ceiling(values: Sequence[int]) -> int:
    """The top of the y axis: at least 1, so an empty chart still draws a baseline."""
    return max([1, *values])


def _bar(bar: Bar, x: float, width: float, top: int, css_class: str, value_shown: bool) -> str:
    plot = HEIGHT - MARGIN_BOTTOM - MARGIN_TOP
    height = plot * bar.value / top
    y = MARGIN_TOP + plot - height
    label = ""
    if bar.label:
        label = (f'<text class="axis" x="{x + width / 2:.1f}" y="{HEIGHT - MARGIN_BOTTOM + 16}" '
                 f'text-anchor="middle">{escape(bar.label)}</text>')
    if value_shown:  # inside the top of the bar, or just above an empty one
        inside = height > 18
        label += (f'<text class="value{" inside" if inside else ""}" x="{x + width / 2:.1f}" '
                  f'y="{y + 14 if inside else y - 4:.1f}" text-anchor="middle">{bar.value}</text>')
    classes = f"{css_class} {bar.extra_class}".strip()
    return (f'<rect class="{classes}" x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" '
            f'data-key="{escape(bar.key)}" data-value="{bar.value}"><title>{escape(bar.tooltip)}</title>'
            f"</rect>{label}")


def bar_chart(bars: Sequence[Bar], *, chart_id: str, title: str, css_class: str = "bar",
              values_shown: bool = False) -> Markup:
    """A bar chart scaled to its largest value, with the y axis labelled 0 and that value; `values_shown`
    writes each bar's value on it (for charts of a few bars)."""
    top = _ceiling([bar.value for bar in bars])
    slot = (WIDTH - MARGIN_LEFT) / max(len(bars), 1)
    gap = min(slot * 0.2, 8)
    baseline = HEIGHT - MARGIN_BOTTOM
    parts = [f'<svg id="{chart_id}" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             f'aria-labelledby="{chart_id}-title" data-max="{top}" preserveAspectRatio="xMidYMid meet">',
             f'<title id="{chart_id}-title">{escape(title)}</title>',
             f'<line class="baseline" x1="{MARGIN_LEFT}" y1="{baseline}" x2="{WIDTH}" y2="{baseline}"/>',
             f'<text class="axis" x="{MARGIN_LEFT - 6}" y="{baseline}" text-anchor="end">0</text>',
             f'<text class="axis" x="{MARGIN_LEFT - 6}" y="{MARGIN_TOP + 8}" text-anchor="end">{top}</text>']
    parts += [_bar(bar, MARGIN_LEFT + i * slot + gap / 2, slot - gap, top, css_class, values_shown)
              for i, bar in enumerate(bars)]
    parts.append("</svg>")
    return Markup("".join(parts))


def open_over_time(days: Sequence[DayCount]) -> Markup:
    """Open windows at the end of each day; the first day of each month (and the first shown) labelled."""
    bars = [Bar(key=day["day"].isoformat(), value=day["open"],
                tooltip=f"{day['day']:%Y-%m-%d}: {day['open']} open",
                label=f"{day['day']:%b %d}" if day["day"].day == 1 or i == 0 else "")
            for i, day in enumerate(days)]
    return bar_chart(bars, chart_id="chart-open-over-time", title="Open risk windows per day",
                     css_class="bar day")


def ages(buckets: Sequence[AgeBucket]) -> Markup:
    bars = [Bar(key=bucket["label"], value=bucket["count"], label=bucket["label"],
                tooltip=f"{bucket['count']} open for {bucket['label']}") for bucket in buckets]
    return bar_chart(bars, chart_id="chart-ages", title="Ages of open risk windows", css_class="bar age",
                     values_shown=True)


def acceptance(healths: Sequence[HealthOut]) -> Markup:
    """The share of CI suites the default branch accepted at each health, in percent, oldest first; a blind
    health stands apart (its share says how little the harness saw, not how broken main is)."""
    bars = []
    for i, health in enumerate(healths):
        share = round(100 * health["accepted"] / health["suites"]) if health["suites"] else 0
        seen = health["could_analyse"]
        blind = "" if seen else ", could not analyse"
        bars.append(Bar(key=health["sha"], value=share, extra_class="" if seen else "blind",
                        tooltip=f"{health['at']:%Y-%m-%d %H:%M} {health['sha'][:10]}: {health['accepted']}/"
                                f"{health['suites']} accepted ({share}%){blind}",
                        label=f"{health['at']:%b %d}" if i in (0, len(healths) - 1) else ""))
    return bar_chart(bars, chart_id="chart-acceptance", title="Share of CI suites the default branch accepts",
                     css_class="bar health")
