from acp_agent import Agent, AuthMethodAgent, ContentBlock, Login, RequestError, Session, StopReason

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


class LoginAgent(Agent):
    name = "login-agent"
    auth_methods = [AuthMethodAgent(method_id="agent-login", name="Log in with your API key")]
    require_login = True  # session methods answer -32000 until a login succeeded

    def __init__(self) -> None:
        self.user: str | None = None

    async def login(self, login: Login) -> None:
        if login.client.accepts_forms:  # the client sent capabilities.elicitation.form
            name = await login.ask("Pick a display name", NAME_FORM)
            if not name.accepted or name.content is None:
                raise RequestError.auth_required()
            self.user = name.content["name"]
        if not login.client.accepts_urls:
            raise RequestError.auth_required()
        answer = await login.ask_url("Create an API key", "https://example.com/keys")  # never a form for secrets
        if not answer.accepted:
            raise RequestError.auth_required()
        ...  # store the credentials; returning accepts the login

    async def logout(self, login: Login) -> None:
        self.user = None  # forget them; the gate closes again

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        await session.say(f"Hello, {self.user or 'you'}.")
        return "end_turn"
