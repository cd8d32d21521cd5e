"""The inspector in headless Chromium: a chat turn, the wire log, a remote agent, a broken and a crashing agent."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers.inspector import Page, css, running_inspector
from tests.helpers.remote import ROOT, served_agent

EXAMPLES = ROOT / "examples"
BROKEN = ROOT / "tests" / "helpers" / "broken_agent.py"


def test_chat_turn_on_the_echo_agent(browser: Any) -> None:
    with running_inspector(str(EXAMPLES / "echo_agent.py")) as inspector:
        page = Page(browser, inspector.url)
        page.prompt("hello from the browser")
        page.wait_for(lambda: "hello from the browser" in page.messages(), what="the echoed message")
        page.wait_idle()
        assert page.text("stop-reason") == "stop: end_turn"
        assert len(page.all(css("session-item"))) == 1
        # The wire log pairs the prompt with its answer and shows the raw JSON.
        page.click(css("wire-entry", method="session/prompt"))
        raw = json.loads(page.one(css("wire-raw")).text)
        assert raw["method"] == "session/prompt" and raw["params"]["prompt"][0]["text"] == "hello from the browser"
        page.click(css("wire-pair"))
        answer = json.loads(page.one(css("wire-raw")).text)
        assert answer["id"] == raw["id"] and "messageId" in answer["result"]
        # Filters: only the client's messages.
        page.one(css("filter-dir")).send_keys("client")
        page.wait_for(lambda: all(e.get_attribute("data-dir") == "out" for e in page.all(css("wire-entry"))),
                      what="only client messages listed")
        assert not page.all(css("violation"))


def test_the_page_needs_the_token(browser: Any) -> None:
    with running_inspector(str(EXAMPLES / "echo_agent.py")) as inspector:
        from selenium.webdriver.support.ui import WebDriverWait

        def says(text: str) -> None:
            WebDriverWait(browser, 15, poll_frequency=0.1).until(
                lambda _: text in browser.find_element("tag name", "body").text)

        browser.delete_all_cookies()
        browser.get(inspector.origin + "/")
        says("open the URL")
        browser.get("about:blank")  # (a change of fragment alone does not load the page again)
        browser.get(inspector.origin + "/#token=wrong")
        says("wrong token")
        browser.get("about:blank")
        Page(browser, inspector.url)  # the right token: the page runs, the secret leaves the address bar
        assert browser.current_url == inspector.origin + "/"
        assert browser.get_cookies() == []  # no cookie: cookies ignore ports, other local servers would get it


def test_the_launcher_file_opens_the_page(browser: Any) -> None:
    from acp_agent.dev.command import write_launcher

    with running_inspector(str(EXAMPLES / "echo_agent.py")) as inspector:
        launcher = write_launcher(inspector.url)
        try:
            Page(browser, launcher.as_uri())  # what `dev` hands the browser: a file, not the secret
            assert browser.current_url == inspector.origin + "/"
        finally:
            launcher.unlink()
            launcher.parent.rmdir()


def test_remote_agent_with_connect(browser: Any) -> None:
    with served_agent(EXAMPLES / "echo_agent.py", "--token", "tok3n", "--store", "memory") as served, \
            running_inspector("--connect", served.url, "--token", "tok3n") as inspector:
        page = Page(browser, inspector.url)
        assert served.url in page.text("agent")
        page.prompt("over the network")
        page.wait_for(lambda: "over the network" in page.messages(), what="the echo over HTTP")
        page.wait_idle()
        assert not page.all(css("violation"))


def test_broken_agent_violations_show_on_the_message(browser: Any) -> None:
    with running_inspector("--", "python", str(BROKEN)) as inspector:
        page = Page(browser, inspector.url)
        page.prompt("hi")
        page.wait_for(lambda: "broken echo: hi" in page.messages(), what="the broken agent's echo")
        page.click(css("filter-problems"))
        page.wait_for(lambda: len(page.all(css("wire-entry"))) >= 3, what="the offending messages")
        rows = {e.get_attribute("data-method") or e.find_element("css selector", ".sum").text: e
                for e in page.all(css("wire-entry"))}
        # R84 on the notification of an unknown method, the schema error on the tool_call_update, the
        # non-JSON line flagged (R2) on itself.
        unknown = page.one(css("wire-entry", method="oops/unknown"))
        badges = [v.text for v in unknown.find_elements("css selector", css("violation"))]
        assert badges.count("R84") == 1, badges  # each violation once, on the message that caused it
        updates = page.all(css("wire-entry", method="session/update"))
        assert len(updates) == 1 and "tool_call_update" in updates[0].text
        assert "schema" in [v.text for v in updates[0].find_elements("css selector", css("violation"))]
        not_json = [e for e in page.all(".wire-row.unparsed")]
        assert len(not_json) == 1 and "this line is not JSON" in not_json[0].text
        assert [v.text for v in not_json[0].find_elements("css selector", css("violation"))] == ["R2"]
        assert len(rows) == 3
        # The problem's words in the detail pane.
        unknown.click()
        page.wait_for(lambda: any("R84 [MUST]" in p.text and "_ prefix" in p.text for p in page.all(css("problem"))),
                      what="R84's words in the detail pane")


def test_crash_mid_turn_and_restart(browser: Any) -> None:
    with running_inspector("--", "python", str(BROKEN)) as inspector:
        page = Page(browser, inspector.url)
        page.prompt("crash")
        page.wait_for(lambda: "exited (status 3)" in page.text("agent-status"), what="the exit status")
        banner = page.one(css("exit-banner"))
        assert "exited (status 3)" in banner.text
        assert "boom, crashing mid-turn" in page.text("stderr-tail")
        assert "boom" in page.text("stderr")
        assert "about to crash" in page.messages()
        page.click(css("banner-restart"))
        page.wait_for(lambda: page.text("agent-status") == "running", what="the restarted agent")
        page.prompt("again")
        page.wait_for(lambda: "broken echo: again" in page.messages(), what="a turn after the restart")


def test_record_then_replay(browser: Any, tmp_path: Any) -> None:
    recording = tmp_path / "session.jsonl"
    with running_inspector("--record", str(recording), str(EXAMPLES / "echo_agent.py")) as inspector:
        page = Page(browser, inspector.url)
        page.prompt("keep this for the bug report")
        page.wait_for(lambda: "keep this for the bug report" in page.messages(), what="the echo")
        page.wait_idle()
        live = page.js("return acpInspector.model.wire.length")
    events = [json.loads(line) for line in recording.read_text().splitlines()]
    assert {"status", "wire"} <= {e["type"] for e in events}
    assert sum(e["type"] == "wire" for e in events) >= live
    with running_inspector("--replay", str(recording)) as replay:
        page = Page(browser, replay.url)
        assert page.text("agent-status") == "replay (no agent)"
        page.wait_for(lambda: "keep this for the bug report" in page.messages(), what="the replayed chat")
        assert page.js("return acpInspector.model.wire.length") == sum(e["type"] == "wire" for e in events)
        assert not page.all(css("exit-banner") + ":not([hidden])")


def test_url_elicitation(browser: Any) -> None:
    with running_inspector(str(ROOT / "docs_src" / "asking.py") + ":SignInAgent") as inspector:
        page = Page(browser, inspector.url)
        page.prompt("sign me in")
        link = page.one(css("elicitation-url"))
        assert link.get_attribute("href") == "https://github.example/oauth?state=xyz"
        page.click(css("elicitation-done"))
        page.wait_for(lambda: "Signed in." in page.messages(), what="the answer used")
        page.wait_for(lambda: not page.all(css("url-elicitation")), what="the dialog closed")
        assert not page.all(css("violation"))


def test_permission_then_enum_form(browser: Any) -> None:
    with running_inspector(str(ROOT / "docs_src" / "asking.py") + ":MigrationAgent") as inspector:
        page = Page(browser, inspector.url)
        page.prompt("migrate")
        page.click(css("permission-option", kind="allow_once"))
        form = page.one(css("elicitation-form"))
        from selenium.webdriver.support.ui import Select

        Select(form.find_element("css selector", "[name=db]")).select_by_value("production")
        page.click(css("elicitation-accept"))
        page.wait_for(lambda: "Migrating production." in page.messages(), what="the enum answer used")
        answer = page.js("return acpInspector.model.wire.filter(e => e.dir === 'out' && e.msg.result"
                         " && e.msg.result.action).map(e => e.msg.result)")
        assert answer == [{"action": "accept", "content": {"db": "production"}}]



def test_thought_plan_diff_and_usage(browser: Any) -> None:
    with running_inspector("--", "python", str(BROKEN)) as inspector:
        page = Page(browser, inspector.url)
        page.prompt("show")
        page.wait_for(lambda: "edited app.py" in page.messages(), what="the rich turn")
        assert page.text("thought") == "thinking about the change"
        assert [e.text for e in page.all(css("plan") + " li")] == ["read the file (completed)",
                                                                   "edit the file (in_progress)"]
        call = page.one(css("tool-call"))
        assert "edit app.py" in call.text and call.get_attribute("data-status") == "completed"
        assert [e.text for e in call.find_elements("css selector", ".diff .add")] == ["+print('new')"]
        assert "-print('old')" in [e.text for e in call.find_elements("css selector", ".diff .del")]
        page.wait_idle()
        assert "tokens 120 (in 100, out 20)" in page.text("usage")
        assert not page.all(css("violation"))


def test_cwd_and_env_for_the_agent(browser: Any, tmp_path: Any) -> None:
    with running_inspector("--cwd", str(tmp_path), "--env", "ACP_DEV_TEST=from-the-flag",
                           "--", "python", str(BROKEN)) as inspector:
        page = Page(browser, inspector.url)
        page.prompt("where")
        page.wait_for(lambda: f"cwd={tmp_path} env=from-the-flag" in page.messages(), what="the agent's cwd and env")
        new = page.js("return acpInspector.model.wire.find(e => e.msg.method === 'session/new').msg.params.cwd")
        assert new == str(tmp_path)
