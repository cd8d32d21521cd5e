"""Regenerate the inspector's screenshots for the docs (docs/images/inspector-*.png).

    .venv/bin/python tools/inspector_screenshots.py      # or: make inspector-screenshots

Each view is driven the way a person would: the inspector runs an example agent, headless Chromium (Debian's
``chromium`` and ``chromium-driver``) opens the printed URL, types prompts and presses the buttons, and the
page is captured at 1400x900.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers.inspector import Page, chromium, css, running_inspector  # noqa: E402

IMAGES = ROOT / "docs" / "images"
EXAMPLES = ROOT / "examples"


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    with chromium() as driver:
        with running_inspector(str(EXAMPLES / "background_agent.py")) as inspector:
            page = Page(driver, inspector.url)
            page.prompt("hello inspector")
            page.wait_idle()
            page.prompt("/bg for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 1; done")
            page.wait_for(lambda: page.all(css("background-item", type="terminal")))
            page.prompt("/watch 20")
            page.wait_for(lambda: page.all(css("background-item", type="tool_call")))
            page.prompt("/subagent 6 a child session streaming its answer word by word")
            page.wait_for(lambda: page.all(css("background-item", type="subagent")))
            page.wait_for(lambda: "tick 3" in page.text("terminal-output"), 20)
            driver.save_screenshot(str(IMAGES / "inspector-chat.png"))
            page.prompt("/ask deploy to production")
            page.one(css("permission-dialog"))
            driver.save_screenshot(str(IMAGES / "inspector-permission.png"))
        with running_inspector(str(EXAMPLES / "login_agent.py")) as inspector:
            page = Page(driver, inspector.url)
            page.click(css("login-method", method_id="agent-login"))
            page.one(css("elicitation-form"))
            page.click(css("elicitation-accept"))  # the required name is empty: the form says so
            page.wait_for(lambda: page.all(css("field-error")) and page.text("field-error"))
            driver.save_screenshot(str(IMAGES / "inspector-form.png"))
        broken = ROOT / "tests" / "helpers" / "broken_agent.py"
        with running_inspector("--", sys.executable, str(broken)) as inspector:
            page = Page(driver, inspector.url)
            page.prompt("hi")
            page.wait_for(lambda: "broken echo: hi" in page.messages())
            page.click(css("wire-entry", method="oops/unknown"))
            page.one(css("problem"))
            driver.save_screenshot(str(IMAGES / "inspector-wire.png"))
            page.prompt("crash")
            page.wait_for(lambda: "exited" in page.text("agent-status"))
            page.one(css("stderr-tail"))
            driver.save_screenshot(str(IMAGES / "inspector-crash.png"))
    for image in sorted(IMAGES.glob("inspector-*.png")):
        print(image.relative_to(ROOT))


if __name__ == "__main__":
    main()
