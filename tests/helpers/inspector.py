"""Driving ``python -m acp_agent dev`` in a real headless Chromium (Debian's ``chromium`` + ``chromium-driver``).

:func:`running_inspector` starts the inspector on a free loopback port and waits for the URL it prints;
:func:`chromium` starts one headless browser with a fresh profile; :class:`Page` wraps the few things a
test does on the page (type a prompt, wait for an element by ``data-testid``, click a button that the
page may be re-rendering), always with a deadline.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.helpers.remote import PrintedUrl, printing_process

URL_LINE = re.compile(r"acp: inspector at (http://\S+)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
INSTALL_HINT = "headless Chromium is missing: apt-get install -y chromium chromium-driver (make test's CI does this)"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1400,900")


def browser_missing() -> str | None:
    """Why the browser tests cannot run here (``None`` when they can)."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        return INSTALL_HINT
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is missing: pip install -e '.[test]'"
    return None


@dataclass
class RunningInspector(PrintedUrl):
    """A ``python -m acp_agent dev`` process and the URL it printed."""

    @property
    def origin(self) -> str:
        return self.url.split("/#", 1)[0]


@contextmanager
def running_inspector(*args: str, env: dict[str, str] | None = None) -> Iterator[RunningInspector]:
    """Run the inspector with ``args`` for the block; on exit SIGTERM it and check its agents are gone."""
    command = [sys.executable, "-m", "acp_agent", "dev", "--no-open", "--port", "0", *args]
    with printing_process(command, URL_LINE, "inspector", env) as (proc, url, lines):
        yield RunningInspector(proc, url, lines)


@contextmanager
def chromium(extra_flags: Sequence[str] = ()) -> Iterator[Any]:
    """One headless Chromium (fresh profile, no network of its own) driven by selenium."""
    from selenium import webdriver

    profile = tempfile.mkdtemp(prefix="acp-inspector-chromium-")
    options = webdriver.ChromeOptions()
    for flag in (*CHROMIUM_FLAGS, *extra_flags):
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.binary_location = CHROMIUM or ""
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def css(testid: str, **attrs: str) -> str:
    """The CSS selector of an element by ``data-testid`` (and other ``data-*`` attributes)."""
    return f'[data-testid="{testid}"]' + "".join(f'[data-{k.replace("_", "-")}="{v}"]' for k, v in attrs.items())


class Page:
    """The inspector page in the browser."""

    def __init__(self, driver: Any, url: str) -> None:
        self.driver = driver
        driver.get(url)
        self.wait_for(lambda: self.text("agent-status") in ("running", "replay (no agent)"), 20, "the agent to run")

    def wait_for(self, condition: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
        """Poll ``condition()`` (re-rendered elements may go stale meanwhile) until it is truthy."""
        from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
        from selenium.webdriver.support.ui import WebDriverWait

        def attempt(_: Any) -> Any:
            try:
                return condition()
            except (StaleElementReferenceException, IndexError):
                return False

        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(attempt)
        except WebDriverException as exc:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; page says:\n"
                                 f"{self.driver.find_element('tag name', 'body').text[:3000]}") from exc

    def all(self, selector: str) -> list[Any]:
        return list(self.driver.find_elements("css selector", selector))

    def one(self, selector: str, timeout: float = 15.0) -> Any:
        return self.wait_for(lambda: (self.all(selector) or [None])[0], timeout, selector)

    def text(self, testid: str) -> str:
        found = self.all(css(testid))
        return str(found[0].text) if found else ""

    def click(self, selector: str, timeout: float = 15.0) -> None:
        """Click the first element matching ``selector`` once it exists (retried while it re-renders)."""

        def press() -> bool:
            found = self.all(selector)
            if not found:
                return False
            found[0].click()
            return True

        self.wait_for(press, timeout, f"{selector} to click")

    def prompt(self, text: str) -> None:
        box = self.one(css("prompt-input"))
        box.clear()
        box.send_keys(text)
        self.click(css("send"))

    def messages(self) -> list[str]:
        return [str(e.text) for e in self.all(css("message"))]

    def wait_idle(self, timeout: float = 15.0) -> None:
        self.wait_for(lambda: self.text("state") == "idle" and self.text("stop-reason"), timeout, "an idle session")

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)
