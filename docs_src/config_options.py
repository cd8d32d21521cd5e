from typing import Any

from acp_agent import (
    Agent,
    AvailableCommand,
    ContentBlock,
    RequestError,
    Session,
    SessionConfigOption,
    StopReason,
    TextContent,
)
from acp_agent.schema import SessionConfigSelectOption

MODE_OPTION = SessionConfigOption(
    config_id="mode",  # the id the client sends back in session/set_config_option
    name="Mode",
    category="mode",
    type="select",
    current_value="ask",  # must be one of the options' values
    options=[
        SessionConfigSelectOption(value="ask", name="Ask", description="Answer questions, edit nothing"),
        SessionConfigSelectOption(value="code", name="Code", description="Edit files"),
    ],
)


class ModalAgent(Agent):
    name = "modal-agent"

    async def new_session(self, session: Session) -> None:
        session.config_options = [MODE_OPTION]  # goes into the session/new answer
        session.available_commands = [AvailableCommand(name="plan", description="Make a plan")]

    async def set_config_option(self, session: Session, config_id: str, value: Any) -> None:
        # validated already (a known option, one of its values); raise RequestError to refuse
        if config_id == "mode" and value == "code" and session.data.get("read_only"):
            raise RequestError.invalid_params("this session is read-only")

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        text = "".join(block.text for block in prompt if isinstance(block, TextContent))
        command, _, args = text.partition(" ")
        if command == "/plan":  # a slash command arrives as the prompt's text: "/plan fix the login"
            await session.say(f"planning: {args}")
            return "end_turn"
        [mode] = session.config_options
        await session.say(f"mode: {mode.current_value}")
        return "end_turn"
