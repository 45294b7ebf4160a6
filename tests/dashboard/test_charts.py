"""The inline SVG charts and the page's time formatting, as units."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from app.dashboard import charts
from app.dashboard.views import age

from .html import parse


def test_bars_scale_to_the_largest_value_and_escape_their_labels() -> None:
    bars = [charts.Bar("a", 2, "two <b>"), charts.Bar("b&c", 4, "four", label="<x>")]
    svg = parse(str(charts.bar_chart(bars, chart_id="c", title="T & U")))
    chart = svg.one("svg", id="c")
    assert chart["role"] == "img" and chart.one("title", id="c-title").text == "T & U"
    first, second = chart.find_all("rect")
    assert (first["data-key"], second["data-key"]) == ("a", "b&c")
    assert float(second["height"]) == 2 * float(first["height"])
    assert first.one("title").text == "two <b>" and not chart.find_all("b") and not chart.find_all("x")
    assert "<x>" in chart.text


def test_an_empty_chart_still_draws_a_baseline() -> None:
    chart = parse(str(charts.bar_chart([], chart_id="e", title="none"))).one("svg")
    assert chart["data-max"] == "1" and chart.find_all("line", cls="baseline") and not chart.find_all("rect")


def time_labels(start: date, count: int) -> list[str]:
    days = [{"day": start + timedelta(days=n), "open": 1} for n in range(count)]
    chart = parse(str(charts.open_over_time(days))).one("svg")  # type: ignore[arg-type]
    return [text.text for text in chart.find_all("text", cls="axis")][2:]  # after the y axis' 0 and top


def test_the_time_chart_labels_month_starts_and_a_first_day_far_from_them() -> None:
    assert time_labels(date(2026, 1, 5), 40) == ["Jan 05", "Feb 01"]
    assert time_labels(date(2026, 1, 30), 5) == ["Feb 01"]  # "Jan 30" would overlap it on a phone
    assert time_labels(date(2026, 2, 2), 5) == ["Feb 02"]


def test_a_label_at_the_chart_edge_ends_there_instead_of_being_cut() -> None:
    healths = [{"sha": f"{n:040x}", "at": datetime(2026, 12, 3 - n % 2, tzinfo=UTC), "suites": 4,
                "accepted": 3, "could_analyse": True} for n in range(90)]
    chart = parse(str(charts.acceptance(healths))).one("svg")  # type: ignore[arg-type]
    first, last = chart.find_all("text", cls="axis")[2:]
    assert (last["text-anchor"], float(last["x"])) == ("end", charts.WIDTH)
    assert first["text-anchor"] == "middle"
    widest = len(first.text) * charts.CHAR_EM * charts.LARGEST_FONT
    assert float(first["x"]) - widest / 2 >= 0


CSS = Path(charts.__file__).with_name("static") / "dashboard.css"


def test_each_width_of_chart_gets_axis_text_of_11_px_or_more() -> None:
    """The stylesheet's tiers: from each tier's narrowest chart (the next tier's bound; the last: a 320 px
    phone's chart, 278 px) to its widest, font-size x width / 640 stays at 11 px or more."""
    tiers = sorted(((float(width), float(size)) for width, size in re.findall(
        r"@container chart \(max-width: ([\d.]+)px\) \{ svg\.chart \.axis, svg\.chart \.value "
        r"\{ font-size: (\d+)px", CSS.read_text())), reverse=True)
    assert len(tiers) >= 3 and tiers[0][0] < charts.WIDTH
    narrowest = [*[width for width, _ in tiers[1:]], 278.0]
    for (_, size), low in zip(tiers, narrowest, strict=True):
        assert size * low / charts.WIDTH >= 11, (size, low)
        assert size <= charts.LARGEST_FONT  # the margins hold it


def test_ages_read_in_the_largest_sensible_unit() -> None:
    now = datetime(2026, 3, 1, tzinfo=UTC)
    deltas = (timedelta(minutes=5), timedelta(hours=30), timedelta(days=12), timedelta(minutes=-5))
    assert [age(now - delta, now) for delta in deltas] == ["5 min", "30 h", "12 days", "0 min"]


def test_the_runs_chart_stacks_each_day_by_outcome_blocked_at_the_bottom() -> None:
    days = [{"day": date(2026, 3, 1), "outcomes": {"success": 1, "failure": 3}},
            {"day": date(2026, 3, 2), "outcomes": {}},
            {"day": date(2026, 3, 3), "outcomes": {"queued": 2, "weird<": 2}}]
    chart = parse(str(charts.runs_over_time(days))).one("svg", id="chart-runs-over-time")  # type: ignore[arg-type]
    assert chart["data-max"] == "4"
    segments = chart.find_all("rect", cls="seg")
    assert [(s["data-key"], s["data-outcome"], s["data-value"]) for s in segments] == [
        ("2026-03-01", "failure", "3"), ("2026-03-01", "success", "1"),
        ("2026-03-03", "queued", "2"), ("2026-03-03", "weird<", "2")]
    failure, success = segments[0], segments[1]
    assert float(failure["y"]) > float(success["y"])  # drawn first, lowest
    assert abs(float(failure["y"]) - (float(success["y"]) + float(success["height"]))) < 0.2  # stacked
    assert abs(float(failure["height"]) - 3 * float(success["height"])) < 0.2
    assert charts.run_outcomes(days) == ["failure", "success", "queued", "weird<"]  # type: ignore[arg-type]
    assert [t.text for t in chart.find_all("text", cls="axis")][2:] == ["Mar 01"]
