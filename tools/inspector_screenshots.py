"""Regenerate the inspector's screenshots for the docs (docs/images/inspector-*.png).

    .venv/bin/python tools/inspector_screenshots.py      # or: make inspector-screenshots

Each view is driven the way a person would: the inspector runs an example agent, headless Chromium (Debian's
``chromium`` and ``chromium-driver``) opens the printed URL, types prompts and presses the buttons, and the
page is captured at 1400x900.

The images must not show a path of the machine that made them (tests/unit/test_machine_paths.py reads text,
not pixels). So the agents are copied into a fresh folder that is their working directory (``--cwd``), the
inspector runs each one as a relative command (``-- python background_agent.py``: a FILE argument would be
shown resolved), and before each capture the page's visible text is checked for the checkout, its parent, the
home folder, the interpreter's folders and that working folder.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers.inspector import Page, chromium, css, running_inspector  # noqa: E402

IMAGES = ROOT / "docs" / "images"
AGENTS = (ROOT / "examples" / "background_agent.py", ROOT / "examples" / "login_agent.py",
          ROOT / "tests" / "helpers" / "broken_agent.py")


def machine_folders(work: Path) -> list[str]:
    """Folders of this machine that the page must not show (longest first)."""
    folders = {ROOT, ROOT.parent, Path.home(), Path(sys.prefix), Path(sys.base_prefix),
               Path(sys.executable).parent, work}
    folders |= {folder.resolve() for folder in folders}
    return sorted({str(f) for f in folders if len(f.parts) >= 2}, key=len, reverse=True)


def capture(driver: Any, name: str, work: Path) -> None:
    """Save the page as ``docs/images/NAME``, after checking its text shows no folder of this machine."""
    text = driver.find_element("tag name", "body").text
    shown = [folder for folder in machine_folders(work) if folder + "/" in text or text.endswith(folder)]
    if shown:
        raise SystemExit(f"{name}: the page shows a path of this machine ({shown[0]}); not saved")
    driver.save_screenshot(str(IMAGES / name))


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="acp-screens-"))
    for agent in AGENTS:
        shutil.copy(agent, work / agent.name)
    # the agents' `python` is this interpreter (the inspector's PYTHONPATH names this checkout)
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    try:
        shoot(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for image in sorted(IMAGES.glob("inspector-*.png")):
        print(image.relative_to(ROOT))


def shoot(work: Path) -> None:
    """Drive the three agents through the five views and capture each."""
    with chromium() as driver:
        with running_inspector("--cwd", str(work), "--", "python", "background_agent.py") as inspector:
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
            capture(driver, "inspector-chat.png", work)
            page.prompt("/ask deploy to production")
            page.one(css("permission-dialog"))
            capture(driver, "inspector-permission.png", work)
        with running_inspector("--cwd", str(work), "--", "python", "login_agent.py") as inspector:
            page = Page(driver, inspector.url)
            page.click(css("login-method", method_id="agent-login"))
            page.one(css("elicitation-form"))
            page.click(css("elicitation-accept"))  # the required name is empty: the form says so
            page.wait_for(lambda: page.all(css("field-error")) and page.text("field-error"))
            capture(driver, "inspector-form.png", work)
        with running_inspector("--cwd", str(work), "--", "python", "broken_agent.py") as inspector:
            page = Page(driver, inspector.url)
            page.prompt("hi")
            page.wait_for(lambda: "broken echo: hi" in page.messages())
            page.click(css("wire-entry", method="oops/unknown"))
            page.one(css("problem"))
            capture(driver, "inspector-wire.png", work)
            page.prompt("crash")
            page.wait_for(lambda: "exited" in page.text("agent-status"))
            page.one(css("stderr-tail"))
            capture(driver, "inspector-crash.png", work)


if __name__ == "__main__":
    main()
