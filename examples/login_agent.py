"""An agent behind a login that asks the user structured questions.

Run it as an ACP agent process:  python examples/login_agent.py

    initialize       authMethods: [{type: agent, methodId: agent-login}]
    session/new      -32000 until auth/login {methodId: "agent-login"} succeeded
    auth/login       asks for a display name first when the client has forms; else logs in directly
    /ask             (advertised) a form with a required "name": "Hello, <name>" (decline: says so)
    anything else    echoed back
    auth/logout      session methods answer -32000 again
"""

from __future__ import annotations

from typing import Any

from acp_agent import (
    Agent,
    AuthMethodAgent,
    AvailableCommand,
    ContentBlock,
    Login,
    RequestError,
    Session,
    StopReason,
    TextContent,
    run_stdio,
)

NAME_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "title": "Your name"}},
    "required": ["name"],
}

COMMANDS = [AvailableCommand(name="ask", description="Ask your name with a form")]  # advertised: editors offer it


class LoginAgent(Agent):
    """Requires a login; asks questions with forms."""

    name = "login-agent"
    title = "Login Agent"
    version = "1.0.0"
    auth_methods = [AuthMethodAgent(method_id="agent-login", name="Log in", description="Sign in to the agent")]
    require_login = True

    async def login(self, login: Login) -> None:
        if login.method_id != "agent-login":
            raise RequestError.auth_required()
        if login.client.accepts_forms:
            answer = await login.ask("Pick a display name for this login", NAME_FORM)
            if not answer.accepted:
                raise RequestError.auth_required()

    async def logout(self, login: Login) -> None:
        """Nothing is stored; the SDK closes the gate again."""

    async def new_session(self, session: Session) -> None:
        session.available_commands = COMMANDS

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        text = " ".join(b.text for b in prompt if isinstance(b, TextContent)).strip()
        if text != "/ask":
            await session.say(text)
            return "end_turn"
        if not session.client.accepts_forms:
            await session.say("Your client cannot show forms.")
            return "end_turn"
        answer = await session.ask("What is your name?", NAME_FORM)  # requires_action while it waits
        if answer.accepted and answer.content is not None:
            await session.say(f"Hello, {answer.content['name']}")
        elif answer.declined:
            await session.say("You declined to answer.")
        else:
            return "cancelled"
        return "end_turn"


if __name__ == "__main__":
    run_stdio(LoginAgent())
