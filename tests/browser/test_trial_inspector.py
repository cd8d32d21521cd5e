"""The inspector as a docs-only trial met it (notes/trial-host.md 5): an agent that dies with a prompt unanswered gets
R8 on that prompt, which now says the agent exited with it in flight (it read as a second bug), and the session
header stops showing the agent's last state. Failed before."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

from tests.helpers.inspector import Page, running_inspector

# Answers initialize and session/new, then dies on the first prompt without answering it.
DIES_ON_PROMPT = textwrap.dedent('''
    import json, os, sys
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("method") == "initialize":
            result = {"protocolVersion": 2, "info": {"name": "dies", "version": "0"}, "capabilities": {}}
        elif message.get("method") == "session/new":
            result = {"sessionId": "sess_dies"}
        else:
            os._exit(3)
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\\n")
        sys.stdout.flush()
''')
R8_TEXTS = ("return acpInspector.model.wire.flatMap(e => e.problems ?? []).filter(p => p.rule === 'R8')"
            ".map(p => p.text)")


def test_r8_after_a_crash_says_the_agent_exited(browser: Any, tmp_path: Path) -> None:
    agent = tmp_path / "dies.py"
    agent.write_text(DIES_ON_PROMPT)
    with running_inspector("--", sys.executable, str(agent)) as inspector:
        page = Page(browser, inspector.url)
        page.prompt("hello")
        page.wait_for(lambda: "exited (status 3)" in page.text("agent-status"), what="the exit status")
        # The session header no longer shows the last state the agent reported.
        page.wait_for(lambda: page.text("state") == "agent exited", what="the header saying the agent exited")
        assert page.text("stop-reason") == ""
        page.wait_for(lambda: page.js(R8_TEXTS), what="R8 on the prompt in flight")
        texts = page.js(R8_TEXTS)
        assert all("the agent exited with it in flight" in text for text in texts), texts
