"""examples/coding_agent.py (pydantic-ai behind the bridge, offline model) in the inspector (`python -m acp_agent dev`)
in headless Chromium: a chat turn and a command that asks permission first."""

from __future__ import annotations

from typing import Any

from tests.helpers.inspector import Page, css, running_inspector
from tests.helpers.remote import ROOT

CODING_AGENT = ROOT / "examples" / "coding_agent.py"


def test_the_pydantic_ai_coding_agent_runs_in_the_inspector(browser: Any) -> None:
    with running_inspector(str(CODING_AGENT), env={"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": ""}) as inspector:
        page = Page(browser, inspector.url)
        page.prompt("hello")
        page.wait_for(lambda: "(offline model) You said: hello. Prompts so far: 1." in page.messages(),
                      what="the offline model's reply")
        page.wait_idle()
        page.prompt("run true")
        dialog = page.one(css("permission-dialog"))
        assert dialog.find_elements("css selector", css("permission-option", kind="allow_always"))
        page.wait_for(lambda: page.text("state") == "requires_action", what="requires_action while asked")
        page.click(css("permission-option", kind="allow_once"))
        page.wait_for(lambda: "run_command: exit code 0" in page.messages(), what="the command's result")
        page.wait_idle()
        assert not page.all(css("violation"))
