"""The inline SVG charts and the page's time formatting, as units."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

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


def test_the_time_chart_labels_month_starts() -> None:
    start = date(2026, 1, 30)
    days = [{"day": start + timedelta(days=n), "open": n} for n in range(5)]
    chart = parse(str(charts.open_over_time(days))).one("svg")  # type: ignore[arg-type]
    labels = [text.text for text in chart.find_all("text") if text.text not in ("0", "4")]
    assert labels == ["Jan 30", "Feb 01"]


def test_ages_read_in_the_largest_sensible_unit() -> None:
    now = datetime(2026, 3, 1, tzinfo=UTC)
    deltas = (timedelta(minutes=5), timedelta(hours=30), timedelta(days=12), timedelta(minutes=-5))
    assert [age(now - delta, now) for delta in deltas] == ["5 min", "30 h", "12 days", "0 min"]
