"""Chart geometry, computed here and drawn as inline SVG by the templates (no script,
no external asset). Only numbers leave this module; every label is escaped by Jinja."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

#: The drawing box of every chart (the SVG scales to its container).
WIDTH = 560
HEIGHT = 170
LEFT, RIGHT, TOP, BOTTOM = 48, 10, 12, 24


@dataclass(frozen=True)
class Tick:
    position: float
    label: str


@dataclass(frozen=True)
class Chart:
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right_edge: int = WIDTH - RIGHT
    top: int = TOP
    bottom_edge: int = HEIGHT - BOTTOM
    #: Polylines ("x,y x,y ..."), one per run of samples without a gap.
    lines: list[str] = field(default_factory=list)
    #: The same runs closed down to the axis, for the shaded area.
    areas: list[str] = field(default_factory=list)
    #: Bars as (x, y, width, height).
    bars: list[tuple[float, float, float, float]] = field(default_factory=list)
    #: The last point of each run, marked with a dot (a one-sample run has no line).
    ends: list[tuple[float, float]] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    empty: bool = True


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``value`` (>= 1)."""
    if value <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return float(step * power)
    return float(10 * power)


def _y_ticks(top_value: float, unit: str, scale_y: float) -> list[Tick]:
    ticks = []
    for fraction in (0.0, 0.5, 1.0):
        value = top_value * fraction
        ticks.append(Tick(HEIGHT - BOTTOM - value * scale_y, f"{short_number(value)}{unit}"))
    return ticks


def short_number(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 10_000:
        return f"{value / 1000:g}k"
    return f"{value:g}" if value == int(value) else f"{value:.1f}"


def ago_label(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def line_chart(
    points: Sequence[tuple[float, float | None]], *, now: float, span_s: float, unit: str = ""
) -> Chart:
    """A time series over the last ``span_s`` seconds; None values leave gaps."""
    values = [v for _, v in points if v is not None]
    top_value = nice_ceiling(max(values, default=0.0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    scale_y = plot_h / top_value
    start = now - span_s
    runs: list[list[tuple[float, float]]] = [[]]
    for at, value in points:
        if at < start:
            continue
        if value is None:
            if runs[-1]:
                runs.append([])
            continue
        x = LEFT + (at - start) / span_s * plot_w
        runs[-1].append((round(x, 1), round(HEIGHT - BOTTOM - value * scale_y, 1)))
    runs = [run for run in runs if run]
    base = HEIGHT - BOTTOM
    lines = [" ".join(f"{x},{y}" for x, y in run) for run in runs]
    areas = [
        f"{run[0][0]},{base} " + " ".join(f"{x},{y}" for x, y in run) + f" {run[-1][0]},{base}"
        for run in runs
    ]
    x_ticks = [
        Tick(LEFT, f"-{ago_label(span_s)}"),
        Tick(LEFT + plot_w / 2, f"-{ago_label(span_s / 2)}"),
        Tick(WIDTH - RIGHT, "now"),
    ]
    return Chart(
        lines=lines,
        areas=areas,
        ends=[run[-1] for run in runs],
        y_ticks=_y_ticks(top_value, unit, scale_y),
        x_ticks=x_ticks,
        empty=not values,
    )


def bar_chart(counts: Sequence[int]) -> Chart:
    """One bar per minute, oldest first; the last bar is the current minute."""
    top_value = nice_ceiling(max(counts, default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    scale_y = plot_h / top_value
    slot = plot_w / max(len(counts), 1)
    bars = []
    for index, count in enumerate(counts):
        if count:
            height = max(1.0, count * scale_y)
            bars.append(
                (
                    round(LEFT + index * slot + slot * 0.15, 1),
                    round(HEIGHT - BOTTOM - height, 1),
                    round(slot * 0.7, 1),
                    round(height, 1),
                )
            )
    n = len(counts)
    x_ticks = [
        Tick(LEFT, f"-{n} min"),
        Tick(LEFT + plot_w / 2, f"-{n // 2} min"),
        Tick(WIDTH - RIGHT, "now"),
    ]
    return Chart(
        bars=bars,
        y_ticks=_y_ticks(top_value, "", scale_y),
        x_ticks=x_ticks,
        empty=not any(counts),
    )


@dataclass(frozen=True)
class Meter:
    label: str
    used: int
    limit: int
    percent: float
    #: "ok" under 70 %, "warn" under 90 %, "high" from there.
    level: str


def meter(label: str, used: int, limit: int) -> Meter:
    percent = min(100.0, 100.0 * used / limit) if limit > 0 else 0.0
    level = "ok" if percent < 70 else "warn" if percent < 90 else "high"
    return Meter(label, used, limit, round(percent, 1), level)
