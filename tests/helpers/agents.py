"""Small agents used by the session and lifecycle tests."""

from __future__ import annotations

from typing import Any

import anyio

from acp_agent import (
    Agent,
    AvailableCommand,
    ContentBlock,
    PermissionOption,
    PlanEntry,
    Session,
    StopReason,
    TextContent,
)
from acp_agent.schema import Content, Cost, SessionConfigOption, SessionConfigSelectOption
from acp_agent.testing import SessionView, connect_agent


def text_of(prompt: list[ContentBlock]) -> str:
    return " ".join(b.text for b in prompt if isinstance(b, TextContent))


async def one_turn(agent: Agent, prompt: str = "go", *, turns: int = 1, capabilities: dict[str, Any] | None = None,
                   **options: Any) -> SessionView:
    """Serve ``agent`` in-process to the checked client, prompt a new session once and wait for ``turns``
    ``idle``s (a follow-up the turn starts is a turn of its own); the session's view."""
    async with connect_agent(agent, **options) as client:
        await client.initialize(capabilities=capabilities or {})
        sid = await client.new_session("/tmp")
        await client.prompt_and_wait(sid, prompt)
        return await client.wait_idle(sid, count=turns)


OPTIONS = [
    PermissionOption(option_id="allow", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="deny", name="Reject", kind="reject_once"),
]


class ScriptedAgent(Agent):
    """Behaviour chosen by the prompt's first word.

    ``echo TEXT`` · ``sleep SECS`` · ``crash`` · ``ask`` (permission, then reports the outcome) ·
    ``wrapcancel`` (turns its cancellation into another exception) · ``print`` (stray stdout) ·
    ``later TEXT`` (starts agent-initiated foreground work) · ``thinkplan``.
    """

    name = "scripted"
    version = "9.9.9"
    accepts_image = False

    def __init__(self) -> None:
        self.outcomes: list[Any] = []
        self.config_calls: list[tuple[str, Any]] = []

    async def new_session(self, session: Session) -> None:
        session.config_options = [
            SessionConfigOption(
                type="select",
                config_id="model",
                name="Model",
                current_value="fast",
                options=[
                    SessionConfigSelectOption(value="fast", name="Fast"),
                    SessionConfigSelectOption(value="smart", name="Smart"),
                ],
            ),
            SessionConfigOption(type="boolean", config_id="verbose", name="Verbose", current_value=False),
        ]

    async def set_config_option(self, session: Session, config_id: str, value: Any) -> None:
        self.config_calls.append((config_id, value))

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        words = text_of(prompt).split(" ", 1)
        command, rest = words[0], (words[1] if len(words) > 1 else "")
        if command == "sleep":
            await session.say("sleeping")
            await anyio.sleep(float(rest))
        elif command == "crash":
            await session.say("about to fail")
            raise RuntimeError("model provider returned HTTP 500")
        elif command == "ask":
            outcome = await session.request_permission("Run it?", OPTIONS)
            self.outcomes.append(outcome)
            await session.say(f"allowed={outcome.allowed}")
        elif command == "wrapcancel":
            try:
                await anyio.sleep(3600)
            except anyio.get_cancelled_exc_class():
                raise RuntimeError("HTTP client aborted") from None
        elif command == "print":
            print("this must not reach the protocol stream")
            await session.say("printed")
        elif command == "later":
            async def follow_up() -> StopReason:
                await session.say(f"follow-up: {rest}")
                return "end_turn"

            session.start_foreground(follow_up)
            await session.say("scheduled")
        elif command == "extras":
            await session.plan([PlanEntry(content="look", priority="high", status="completed"),
                                PlanEntry(content="fix", priority="medium", status="in_progress")])
            await session.usage(1200, 200000, cost=Cost(amount=0.01, currency="USD"))
            await session.notice("heads up", severity="warning", description="just a notice")
            await session.update_info(title="A title", updated_at="2026-11-29T12:00:00Z")
            await session.update_available_commands([AvailableCommand(name="test", description="Run tests")])
            await session.update_config_options(session.config_options)
            await session.update_tool_call("call_x", title="Read file", kind="read", status="in_progress")
            await session.tool_call_content("call_x", Content(content=TextContent(text="contents")))
            await session.update_tool_call("call_x", status="completed", raw_output={"ok": True})
        elif command == "thinkplan":
            await session.think("hmm")
            stream = session.thought()
            await stream.write("a")
            await stream.write("b")
        else:
            await session.say(text_of(prompt))
        return "end_turn"


class ForkingAgent(ScriptedAgent):
    """Also implements fork."""

    async def fork_session(self, source: Session, session: Session) -> None:
        session.data["forked_from"] = source.id
