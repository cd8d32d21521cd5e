from acp_agent import Agent, ContentBlock, PermissionOption, Session, StopReason

OPTIONS = [
    PermissionOption(option_id="allow", name="Run it", kind="allow_once"),
    PermissionOption(option_id="reject", name="Not now", kind="reject_once"),
]

DATABASE_FORM = {
    "type": "object",
    "properties": {"db": {"type": "string", "enum": ["staging", "production"]}},
    "required": ["db"],
}


class MigrationAgent(Agent):
    name = "migration-agent"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        outcome = await session.request_permission("Run the migration?", OPTIONS)
        if not outcome.allowed:
            await session.say("Not migrating.")
            return "end_turn"
        answer = await session.ask("Which database?", DATABASE_FORM)
        if answer.accepted and answer.content is not None:
            db = answer.content["db"]  # checked against the schema you sent
            await session.say(f"Migrating {db}.")
        elif answer.declined:
            await session.say("Not migrating.")
        else:  # cancelled, withdrawn, unknown action, or content that did not fit
            return "cancelled"
        return "end_turn"


class SignInAgent(Agent):
    name = "sign-in-agent"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        answer = await session.ask_url(
            "Sign in to GitHub", "https://github.example/oauth?state=xyz", elicitation_id="gh-7"
        )  # accepted: the user opened it
        if answer.accepted:
            ...  # your side of the flow: the OAuth callback arrives at your server
            session.complete_elicitation("gh-7")  # when your side of the flow finished
            await session.say("Signed in.")
        return "end_turn"
