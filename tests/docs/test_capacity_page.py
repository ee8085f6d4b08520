"""docs/operating/capacity.md against the code: the defaults it quotes are the settings'
defaults, and its example loads, worked example and Redis figures follow from its own
formulas with those defaults (the page's text is read, never a copy of it)."""

from __future__ import annotations

import math
import re

import pytest
from support.markdown import page, section

from sheetsync import redis_keys
from sheetsync.settings import Settings

PAGE = "operating/capacity.md"
NUMBER = r"([\d,]+(?:\.\d+)?)"


def number(text: str) -> float:
    return float(text.replace(",", ""))


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the Markdown tables in ``text``, cell by cell."""
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("|")
    ]
    return [row for row in rows if not set("".join(row)) <= set("-: ")][1:]


def found(pattern: str, text: str) -> float:
    match = re.search(pattern, text)
    assert match, f"the page no longer says {pattern!r}"
    return number(match.group(1))


@pytest.fixture(scope="module")
def text() -> str:
    return page(PAGE)


@pytest.fixture(scope="module")
def defaults() -> Settings:
    return Settings.model_construct()  # the shipped defaults, whatever the environment


def test_the_defaults_it_quotes_are_the_settings_defaults(text, defaults) -> None:
    rows = table_rows(section(text, "## The defaults the model reads"))
    quoted = {row[0].strip("`"): number(row[1]) for row in rows}
    assert set(quoted) >= {
        "SHEETSYNC_RATE_LIMIT_PER_PROJECT",
        "SHEETSYNC_RATE_LIMIT_PER_ACCOUNT",
        "SHEETSYNC_RATE_WINDOW_S",
        "SHEETSYNC_FLUSH_DELAY_S",
        "SHEETSYNC_FLUSH_THRESHOLD",
        "SHEETSYNC_BATCH_SIZE",
    }
    for name, value in quoted.items():
        assert getattr(defaults, name.removeprefix("SHEETSYNC_").lower()) == value, name


def test_the_per_minute_limits_it_derives_are_the_limiters(text, defaults) -> None:
    minutes = defaults.rate_window_s / 60
    model = section(text, "## The model")
    assert (
        found(r"P = (\d+) writes a minute", model)
        == defaults.rate_limit("write", "project") / minutes
    )
    assert (
        found(r"A = (\d+) writes a minute", model)
        == defaults.rate_limit("write", "account") / minutes
    )


class Model:
    """The page's formulas, with the settings' defaults and its stated R, r and L."""

    def __init__(self, defaults: Settings, rows_per_s: float, runs_per_s: float, google_s: float):
        self.delay, self.threshold = defaults.flush_delay_s, defaults.flush_threshold
        self.per_project = defaults.rate_limit("write", "project") * 60 / defaults.rate_window_s
        self.rows_per_s, self.runs_per_s, self.google_s = rows_per_s, runs_per_s, google_s

    def appends(self, answers: float, sheets: float) -> float:
        a = answers / sheets
        return sheets * max(min(a, 60 / self.delay), a / self.threshold)

    def lands_within_s(self, sheets: float) -> float:
        return max(self.delay, 60 * sheets / self.per_project)

    def processes(self, answers: float, sheets: float) -> int:
        runs = min(self.appends(answers, sheets), self.per_project)
        busy = answers / (60 * self.rows_per_s) + runs / 60 * (1 / self.runs_per_s + self.google_s)
        return math.ceil(busy) + 1


def page_model(text: str, defaults: Settings) -> Model:
    loads = section(text, "### Example loads")
    return Model(
        defaults,
        found(rf"R = {NUMBER} rows a second", loads),
        found(rf"r = {NUMBER} runs a second", loads),
        found(rf"L = {NUMBER} second", loads),
    )


def test_the_example_loads_follow_from_the_formulas(text, defaults) -> None:
    model = page_model(text, defaults)
    rows = table_rows(section(text, "### Example loads"))
    assert len(rows) >= 3
    for answers, sheets, appends, share, within, processes in rows:
        n, s = number(answers), number(sheets)
        assert number(appends) == round(model.appends(n, s)), (answers, sheets)
        assert number(share.rstrip(" %")) == round(100 * model.appends(n, s) / model.per_project)
        assert within == f"about {model.lands_within_s(s):,.0f} s", (answers, sheets)
        assert int(processes) == model.processes(n, s), (answers, sheets)


def test_the_worked_example_follows_from_the_formulas(text, defaults) -> None:
    model = page_model(text, defaults)
    worked = section(text, "### A worked example")
    answers = found(rf"\*\*{NUMBER} answers a minute", worked)
    sheets = found(rf"over {NUMBER} active sheets a minute\*\*", worked)
    assert found(rf"W = [\d,]+ \u00d7 \d+ = {NUMBER}", worked) == model.appends(answers, sheets)
    assert found(rf"about max\(\d+, [^)]*\) = {NUMBER} seconds", worked) == (
        model.lands_within_s(sheets)
    )
    assert found(r"= \*\*(\d+)\*\*", worked) == model.processes(answers, sheets)


def measured(figure: str, text: str) -> float:
    """The most a row of the measured table says (the top of a range of runs)."""
    rows = table_rows(section(text, "## What one of each takes"))
    [cell] = [row[1] for row in rows if row[0] == figure]
    leading = re.match(rf"{NUMBER}(?:\u2013{NUMBER})?", cell)
    assert leading, cell
    return number(leading.group(2) or leading.group(1))


def test_its_redis_formulas_use_the_measured_figures(text) -> None:
    model = section(text, "## The model")
    per_emit = found(rf"`N / 60 \u00d7 {NUMBER} µs`", model)
    assert per_emit == math.ceil(measured("Redis CPU per emit", text))
    formula = re.search(
        rf"waiting buffers \u00d7 \({NUMBER} \+ {NUMBER}\) bytes \+\s+waiting ids \u00d7 {NUMBER}",
        model,
    )
    assert formula, "the Redis memory formula moved"
    per_buffer = measured("Redis memory per waiting buffer", text)
    per_task = found(rf"\u2013{NUMBER} more for its flush task", text)
    per_id = measured("Redis memory per waiting answer id", text)
    assert [number(g) for g in formula.groups()] == [per_buffer, per_task, per_id]
    assert found(rf"emits a second Redis's core would take \| about {NUMBER}", text) == round(
        1e6 / measured("Redis CPU per emit", text), -3
    )


def test_its_model_figures_are_at_most_the_measured_ones(text) -> None:
    loads = section(text, "### Example loads")
    rows = table_rows(section(text, "## What one of each takes"))
    lowest = {row[0]: number(re.findall(NUMBER, row[1])[0]) for row in rows}
    assert (
        found(rf"R = {NUMBER} rows a second", loads) <= lowest["rows a second, one worker process"]
    )
    assert (
        found(rf"r = {NUMBER} runs a second", loads) <= lowest["runs a second, one worker process"]
    )


def test_it_says_what_redis_keys_says_about_a_cluster(text) -> None:
    assert "not a Redis Cluster" in (redis_keys.__doc__ or "")
    assert "**Redis Cluster is not supported.**" in text
    assert "one Redis primary" in text and "Sentinel" in text
