"""Pages refresh themselves: the figures change without a reload, a form being filled in
stays as it is, and the header's control pauses it (for the next pages too)."""

from __future__ import annotations

import time

import pytest
from selenium.webdriver.common.by import By
from support.browser import chromium, script_errors
from support.console import REFRESH_S, park, running_console
from support.waiting import wait_until

from sheetsync.models import DeadLetterReason

#: Set on the page before the data changes: still there after, so nothing reloaded it.
MARK = "window.sheetsyncTestMark"


def _state(browser) -> str:
    return browser.find_element(By.ID, "refresh").text


def _dead_letters_tile(browser) -> str:
    """The overview's tile of PENDING and FAILED dead letters (read in one script: a
    refresh may replace the tile between two WebDriver calls)."""
    return browser.execute_script(
        "const label = [...document.querySelectorAll('.tile .label')]"
        ".find((e) => e.textContent.trim() === 'Dead letters');"
        "return label.parentElement.querySelector('.value').textContent.trim();"
    )


def _has_entry(browser, entry_id: int) -> bool:
    return bool(browser.find_elements(By.CSS_SELECTOR, f"tr[data-entry='{entry_id}']"))


@pytest.mark.browser
def test_pages_refresh_in_place_and_keep_what_is_being_typed(world, pipeline_env):
    env = pipeline_env()
    form = world.form("owner_live")
    sheet = world.sheet(form)
    first = park(world, form, sheet, world.answers(form, 2), DeadLetterReason.TRANSIENT_EXHAUSTED)

    with running_console(env, refresh_s=REFRESH_S) as console, chromium() as browser:
        console.authorize(browser)
        # The CSP lets the console's own script run, and nothing else.
        policy = console.request("/").headers["content-security-policy"]
        assert "script-src 'self';" in policy and "unsafe-inline" not in policy

        browser.get(console.url + "/")
        wait_until(lambda: "updated" in _state(browser), timeout=10)
        assert f"every {REFRESH_S} s" in _state(browser)
        assert _dead_letters_tile(browser) == "1"
        browser.execute_script(f"{MARK} = 1")
        second = park(
            world, form, sheet, world.answers(form, 1, prefix="b"), DeadLetterReason.PERMANENT
        )
        wait_until(lambda: _dead_letters_tile(browser) == "2", timeout=10)
        assert browser.execute_script(f"return {MARK}") == 1

        # A filter being typed in survives the refreshes, focus and all.
        browser.get(console.url + "/dead-letters")
        assert _has_entry(browser, first) and _has_entry(browser, second)
        browser.execute_script(f"{MARK} = 1")
        owner = browser.find_element(By.NAME, "user")
        owner.send_keys("owner_li")
        third_form = world.form("owner_third")
        third_sheet = world.sheet(third_form)
        third = park(
            world, third_form, third_sheet, world.answers(third_form, 1, prefix="c"),
            DeadLetterReason.CONFIGURATION,
        )  # fmt: skip
        wait_until(lambda: _has_entry(browser, third), timeout=10)
        assert browser.execute_script(f"return {MARK}") == 1
        assert browser.find_element(By.NAME, "user").get_attribute("value") == "owner_li"
        assert browser.switch_to.active_element.get_attribute("name") == "user"
        owner.send_keys("ve")  # typing goes on where it was
        browser.find_element(By.ID, "filters").submit()
        wait_until(lambda: "user=owner_live" in browser.current_url)
        assert _has_entry(browser, first) and not _has_entry(browser, third)

        # Paused: nothing changes, on this page and the next; resumed: it catches up.
        browser.get(console.url + "/dead-letters")
        browser.find_element(By.ID, "refresh-toggle").click()
        assert "paused" in _state(browser) and "Resume" in _state(browser)
        fourth = park(
            world, third_form, third_sheet, world.answers(third_form, 1, prefix="d"),
            DeadLetterReason.UNEXPECTED,
        )  # fmt: skip
        time.sleep(REFRESH_S * 4)  # four refreshes' worth, none of which may happen
        assert not _has_entry(browser, fourth)
        browser.get(console.url + "/links")
        assert "paused" in _state(browser)
        browser.get(console.url + "/dead-letters")
        assert _has_entry(browser, fourth)  # a reload still reads afresh
        fifth = park(
            world, third_form, third_sheet, world.answers(third_form, 1, prefix="e"),
            DeadLetterReason.SHEET_FULL,
        )  # fmt: skip
        browser.find_element(By.ID, "refresh-toggle").click()
        wait_until(lambda: _has_entry(browser, fifth), timeout=10)
        assert "every" in _state(browser) and "Pause" in _state(browser)

        # A confirmation page never refreshes: what it counted is what its form posts.
        browser.get(f"{console.url}/dead-letters/{first}/purge")
        assert browser.find_element(By.ID, "confirm").is_displayed()
        assert browser.find_elements(By.ID, "refresh") == []
        assert script_errors(browser) == []
