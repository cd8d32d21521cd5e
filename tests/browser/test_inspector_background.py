"""The inspector in headless Chromium on examples/background_agent.py: background work listed and stopped from
its buttons, subagents as a tree, permission dialogs, a paused workflow; and examples/login_agent.py's login and
form elicitation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.inspector import Page, RunningInspector, css, running_inspector
from tests.helpers.remote import ROOT

EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def background_inspector() -> Iterator[RunningInspector]:
    with running_inspector(str(EXAMPLES / "background_agent.py")) as inspector:
        yield inspector


@pytest.fixture
def page(browser: Any, background_inspector: RunningInspector) -> Page:
    page = Page(browser, background_inspector.url)
    before = len(page.all(css("session-item")))
    page.click(css("new-session"))  # a fresh session for each test, selected
    page.wait_for(lambda: len(page.all(css("session-item"))) == before + 1, 10, "the new session")
    return page


def items(page: Page, kind: str) -> list[Any]:
    return page.all(css("background-item", type=kind))


def sent(page: Page, method: str) -> int:
    return int(page.js("return acpInspector.model.wire.filter(e => e.dir === 'out' && e.msg.method === arguments[0])"
                       ".length", method))


def test_bg_terminal_listed_then_stopped(page: Page) -> None:
    page.prompt("/bg sleep 30")
    page.wait_for(lambda: items(page, "terminal") and items(page, "terminal")[0].find_elements(
        "css selector", css("stop")), what="the terminal listed with a Stop button")
    assert "sleep 30" in items(page, "terminal")[0].text
    items(page, "terminal")[0].find_element("css selector", css("stop")).click()
    page.wait_for(lambda: not items(page, "terminal"), what="the stopped terminal to leave the list")
    assert sent(page, "terminal/cancel") == 1
    assert not page.all(css("violation"))


def test_watch_tool_call_stopped(page: Page) -> None:
    page.prompt("/watch 30")
    page.wait_for(lambda: items(page, "tool_call") and items(page, "tool_call")[0].find_elements(
        "css selector", css("stop")), what="the watcher listed with a Stop button")
    items(page, "tool_call")[0].find_element("css selector", css("stop")).click()
    page.wait_for(lambda: not items(page, "tool_call"), what="the stopped watcher to leave the list")
    assert sent(page, "tool_call/cancel") == 1
    page.wait_for(lambda: any(e.get_attribute("data-status") == "cancelled" for e in page.all(css("tool-call"))),
                  what="the tool call shown cancelled")


def test_subagent_in_the_tree(page: Page) -> None:
    page.prompt("/subagent 4 counting one two three")
    page.wait_for(lambda: items(page, "subagent"), what="the subagent listed")
    child = items(page, "subagent")[0]
    assert child.find_element("css selector", css("item-status")).text in ("running", "idle", "requires_action")
    # The child is not a top-level session: it is shown under its parent.
    ids = [e.get_attribute("data-session-id") for e in page.all(css("session-item"))]
    assert not any(i and i in child.text for i in ids)
    page.wait_for(lambda: not items(page, "subagent"), 20, "the subagent to finish")


def test_subagent_stopped_with_session_cancel(page: Page) -> None:
    page.prompt("/subagent 30 a long answer from a child")
    page.wait_for(lambda: items(page, "subagent") and items(page, "subagent")[0].find_elements(
        "css selector", css("stop")), what="the subagent listed with a Stop button")
    child = page.js("return acpInspector.model.sessions.get(arguments[0]).background[0].sessionId",
                    page.one(".session.selected").get_attribute("data-session-id"))
    items(page, "subagent")[0].find_element("css selector", css("stop")).click()
    page.wait_for(lambda: not items(page, "subagent"), what="the stopped subagent to leave the list")
    cancels = page.js("return acpInspector.model.wire.filter(e => e.dir === 'out' && e.msg.method === "
                      "'session/cancel').map(e => e.msg.params.sessionId)")
    assert cancels == [child]
    assert not page.all(css("violation"))


def test_ask_allow_and_reject(page: Page) -> None:
    for kind, word in (("allow_once", "allowed"), ("reject_once", "rejected")):
        page.prompt(f"/ask deploy {word}")
        dialog = page.one(css("permission-dialog"))
        assert dialog.find_elements("css selector", css("permission-option", kind=kind))
        # The subject reads as the tool call's title, not as the raw {"type": "tool_call", ...} JSON.
        subject = dialog.find_element("css selector", css("permission-subject")).text
        assert f"Ask: deploy {word}" in subject and "toolCallId" not in subject
        page.wait_for(lambda: page.text("state") == "requires_action", what="requires_action while asked")
        page.click(css("permission-option", kind=kind))
        page.wait_for(lambda w=word: f"{w}: deploy {w}" in page.messages(), what=f"the {word} answer")
        page.wait_for(lambda: not page.all(css("permission-dialog")), what="the dialog closed")


def test_workflow_paused(page: Page) -> None:
    page.prompt("/workflow 30")
    page.wait_for(lambda: items(page, "tool_call"), what="the workflow listed")
    page.wait_idle()
    page.prompt("/pause")
    page.wait_for(lambda: any(e.text == "paused" for e in page.all(css("item-status"))), what="the workflow paused")
    page.prompt("/resume")
    page.wait_for(lambda: not any(e.text == "paused" for e in page.all(css("item-status"))), what="resumed")
    items(page, "tool_call")[0].find_element("css selector", css("stop")).click()
    page.wait_for(lambda: not items(page, "tool_call"), what="the stopped workflow to leave the list")


def test_login_then_form_elicitation(browser: Any) -> None:
    with running_inspector(str(EXAMPLES / "login_agent.py")) as inspector:
        page = Page(browser, inspector.url)
        page.click(css("new-session"))
        page.wait_for(lambda: page.all(css("error")), what="session/new refused before login")
        page.click(css("login-method", method_id="agent-login"))
        form = page.one(css("elicitation-form"))
        form.find_element("css selector", "[name=name]").send_keys("Ada")
        page.click(css("elicitation-accept"))
        page.wait_for(lambda: "logged in" in page.text("login-panel"), what="the login")
        page.click(css("new-session"))
        page.wait_for(lambda: page.all(css("session-item")), what="a session after login")
        page.prompt("/ask")
        page.one(css("elicitation-form"))
        page.click(css("elicitation-accept"))  # the required name is empty: refused before sending
        page.wait_for(lambda: "required" in [e.text for e in page.all(css("field-error"))],
                      what="the validation message")
        assert page.all(css("elicitation-form"))
        page.one(css("elicitation-form")).find_element("css selector", "[name=name]").send_keys("Grace")
        page.click(css("elicitation-accept"))
        page.wait_for(lambda: any("Hello, Grace" in m for m in page.messages()), what="the form's answer used")
        assert not page.all(css("violation"))


def test_session_lifecycle_buttons(page: Page) -> None:
    page.prompt("remember this line")
    page.wait_for(lambda: "remember this line" in page.messages(), what="the first turn")
    page.wait_idle()
    original = page.one(".session.selected").get_attribute("data-session-id")
    page.click(css("session-fork"))
    page.wait_for(lambda: page.one(".session.selected").get_attribute("data-session-id") != original,
                  what="the fork selected")
    fork = page.one(".session.selected").get_attribute("data-session-id")
    page.click(css("session-close"))
    page.wait_for(lambda: "closed" in page.one(css("session-item", session_id=fork)).text, what="the fork closed")
    # Resume the closed fork with its history replayed: the copied conversation shows again.
    page.click(css("session-resume"))
    page.wait_for(lambda: "closed" not in page.one(css("session-item", session_id=fork)).text, what="resumed")
    page.wait_for(lambda: "remember this line" in page.messages(), what="the replayed history")
    page.click(css("session-archive"))
    page.wait_for(lambda: "archived" in page.one(css("session-item", session_id=fork)).text, what="archived")
    page.click(css("session-delete"))
    page.wait_for(lambda: not page.all(css("session-item", session_id=fork)), what="the fork deleted")
    page.click(css("list-sessions"))
    page.wait_for(lambda: sent(page, "session/list") >= 1, what="session/list sent")
    assert page.all(css("session-item", session_id=original))
    assert not page.all(css("violation"))


def test_capability_toggles_restart_the_agent(browser: Any) -> None:
    with running_inspector(str(EXAMPLES / "login_agent.py")) as inspector:
        page = Page(browser, inspector.url)
        assert page.one(css("cap-form")).get_attribute("checked") is not None or page.js(
            "return document.querySelector('[data-testid=cap-form]').checked")
        page.js("document.getElementById('caps').open = true")
        page.click(css("cap-form"))
        page.click(css("apply-capabilities"))
        page.wait_for(lambda: page.js("return acpInspector.model.run") == 2, what="the second run")
        page.wait_for(lambda: page.text("agent-status") == "running", what="the restarted agent")
        sent_caps = page.js("return acpInspector.model.wire.filter(e => e.msg.method === 'initialize')"
                            ".map(e => e.msg.params.capabilities)")
        assert sent_caps[-1].get("elicitation", {}).get("form") is None
        # Without forms the login asks nothing.
        page.click(css("login-method", method_id="agent-login"))
        page.wait_for(lambda: "logged in" in page.text("login-panel"), what="the login")
        assert not page.all(css("elicitation-form"))


def test_withdrawn_question_closes_and_bg_output_is_live(page: Page) -> None:
    page.prompt("/bg echo hello-from-bg; sleep 30")
    page.wait_for(lambda: "hello-from-bg" in page.text("terminal-output"), what="the terminal's live output")
    page.prompt("/ask something")
    page.one(css("permission-dialog"))
    page.click(css("cancel"))  # session/cancel: the agent withdraws its question
    page.wait_for(lambda: not page.all(css("permission-dialog")), what="the withdrawn question closed")
    page.wait_for(lambda: page.text("stop-reason") == "stop: cancelled", what="the turn cancelled")
    page.click(css("stop"))
    page.wait_for(lambda: not items(page, "terminal"), what="the terminal stopped")


def test_composer_sends_anything(page: Page) -> None:
    page.js("document.getElementById('composer').open = true")
    page.one(css("composer-method")).send_keys("made/up")
    page.click(css("composer-request"))
    page.wait_for(lambda: page.all(css("wire-entry", method="made/up")), what="the composed request")
    page.wait_for(lambda: page.all(css("error")), what="the agent's error shown")
    answer = page.js("return acpInspector.model.wire.filter(e => e.answers === 'made/up').map(e => e.msg)")
    assert answer[0]["error"]["code"] == -32601
    page.prompt("timed")
    page.wait_idle()
    page.wait_for(lambda: page.all(css("wire-entry", method="session/prompt") + " " + css("latency")),
                  what="the prompt answer's latency")
