"""The two charts of the main page as inline SVG built here: no JavaScript and no build step, so they show
with scripts off and in the browser's print. Each bar carries its data in data-* attributes and a <title>
(the tooltip, and what a screen reader reads)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from markupsafe import Markup, escape

from app.store.shapes import AgeBucket, DayCount, HealthOut, RunDay

WIDTH, HEIGHT = 640, 190
# Room for the axis text at its largest: dashboard.css scales it up to LARGEST_FONT units as the chart
# narrows, so that it reads at 11 px or more on a phone, where the chart is drawn at about half its size.
MARGIN_LEFT, MARGIN_BOTTOM, MARGIN_TOP = 52, 36, 12
LARGEST_FONT = 28
CHAR_EM = 0.6  # the width of a character of the axis text, in ems (digits and short words of system-ui)
SHORT_AGES = {"under 1 day": "<1 d", "1-7 days": "1-7 d", "7-30 days": "7-30 d", "30-90 days": "30-90 d",
              "over 90 days": ">90 d"}  # five labels under five bars fit a phone only this short
FIRST_LABEL_GAP = 21  # days: the first day is labelled only this far from the next month's start


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
    label = x_label(bar.label, x + width / 2) if bar.label else ""
    if value_shown:  # inside the top of the bar, or just above a short one
        inside = height > LARGEST_FONT + 12
        place = f'y="{y + 4:.1f}" dominant-baseline="hanging"' if inside else f'y="{y - 4:.1f}"'
        label += (f'<text class="value{" inside" if inside else ""}" x="{x + width / 2:.1f}" {place} '
                  f'text-anchor="middle">{bar.value}</text>')
    classes = f"{css_class} {bar.extra_class}".strip()
    return (f'<rect class="{classes}" x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" '
            f'data-key="{escape(bar.key)}" data-value="{bar.value}"><title>{escape(bar.tooltip)}</title>'
            f"</rect>{label}")


def x_label(text: str, centre: float) -> str:
    """A label under the bar centred at CENTRE, moved to end at the chart's edge (or start at its left
    edge) when it would cross it at the largest size the stylesheet gives it: the last one is not cut."""
    half = len(text) * CHAR_EM * LARGEST_FONT / 2
    x, anchor = centre, "middle"
    if centre + half > WIDTH:
        x, anchor = WIDTH, "end"
    elif centre - half < 0:
        x, anchor = 0, "start"
    return (f'<text class="axis" x="{x:.1f}" y="{HEIGHT - MARGIN_BOTTOM + 4}" dominant-baseline="hanging" '
            f'text-anchor="{anchor}">{escape(text)}</text>')


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
             f'<text class="axis" x="{MARGIN_LEFT - 6}" y="{MARGIN_TOP}" dominant-baseline="hanging" '
             f'text-anchor="end">{top}</text>']
    parts += [_bar(bar, MARGIN_LEFT + i * slot + gap / 2, slot - gap, top, css_class, values_shown)
              for i, bar in enumerate(bars)]
    parts.append("</svg>")
    return Markup("".join(parts))


def day_labels(days: Sequence[date]) -> list[str]:
    """The first day of each month labelled, and the first day shown when no month starts soon after it
    (the two labels would overlap)."""
    starts = [i for i, day in enumerate(days) if day.day == 1]
    first_labelled = not starts or starts[0] >= FIRST_LABEL_GAP
    return [f"{day:%b %d}" if day.day == 1 or (i == 0 and first_labelled) else ""
            for i, day in enumerate(days)]


def open_over_time(days: Sequence[DayCount]) -> Markup:
    """Open windows at the end of each day."""
    labels = day_labels([day["day"] for day in days])
    bars = [Bar(key=day["day"].isoformat(), value=day["open"],
                tooltip=f"{day['day']:%Y-%m-%d}: {day['open']} open", label=label)
            for day, label in zip(days, labels, strict=True)]
    return bar_chart(bars, chart_id="chart-open-over-time", title="Open risk windows per day",
                     css_class="bar day")


def ages(buckets: Sequence[AgeBucket]) -> Markup:
    bars = [Bar(key=bucket["label"], value=bucket["count"],
                label=SHORT_AGES.get(bucket["label"], bucket["label"]),
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


# Bottom first: what blocked, then what passed, then the rest (a run that did not conclude).
RUN_OUTCOMES = ("failure", "action_required", "neutral", "success", "failed", "cancelled", "superseded",
                "running", "queued")


def run_outcomes(days: Sequence[RunDay]) -> list[str]:
    """The outcomes the days hold, in the chart's order (the legend)."""
    held = {outcome for day in days for outcome in day["outcomes"]}
    return [o for o in RUN_OUTCOMES if o in held] + sorted(held - set(RUN_OUTCOMES))


def runs_over_time(days: Sequence[RunDay]) -> Markup:
    """Triage runs created each day, one bar a day stacked by outcome, the y axis to the busiest day."""
    top = _ceiling([sum(day["outcomes"].values()) for day in days])
    slot = (WIDTH - MARGIN_LEFT) / max(len(days), 1)
    gap = min(slot * 0.2, 8)
    plot, baseline = HEIGHT - MARGIN_BOTTOM - MARGIN_TOP, HEIGHT - MARGIN_BOTTOM
    order = run_outcomes(days)
    parts = [f'<svg id="chart-runs-over-time" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             f'aria-labelledby="chart-runs-over-time-title" data-max="{top}" '
             f'preserveAspectRatio="xMidYMid meet">',
             '<title id="chart-runs-over-time-title">Triage runs per day by outcome</title>',
             f'<line class="baseline" x1="{MARGIN_LEFT}" y1="{baseline}" x2="{WIDTH}" y2="{baseline}"/>',
             f'<text class="axis" x="{MARGIN_LEFT - 6}" y="{baseline}" text-anchor="end">0</text>',
             f'<text class="axis" x="{MARGIN_LEFT - 6}" y="{MARGIN_TOP}" dominant-baseline="hanging" '
             f'text-anchor="end">{top}</text>']
    for i, (day, label) in enumerate(zip(days, day_labels([d["day"] for d in days]), strict=True)):
        x, bottom = MARGIN_LEFT + i * slot + gap / 2, float(baseline)
        for outcome in (o for o in order if day["outcomes"].get(o)):
            count = day["outcomes"][outcome]
            height = plot * count / top
            bottom -= height
            when = day["day"]
            parts.append(f'<rect class="bar seg run-{escape(outcome)}" x="{x:.1f}" y="{bottom:.1f}" '
                         f'width="{slot - gap:.1f}" height="{height:.1f}" data-key="{when.isoformat()}" '
                         f'data-outcome="{escape(outcome)}" data-value="{count}">'
                         f'<title>{when:%Y-%m-%d}: {count} {escape(outcome)}</title></rect>')
        if label:
            parts.append(x_label(label, x + (slot - gap) / 2))
    parts.append("</svg>")
    return Markup("".join(parts))
