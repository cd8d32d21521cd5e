from acp_agent import Agent, ContentBlock, PermissionOption, PlanEntry, Session, StopReason

OPTIONS = [
    PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]


class ChattyAgent(Agent):
    name = "chatty-agent"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        await session.think("Reading the request")  # agent_thought
        await session.plan([PlanEntry(content="Read the file", priority="high", status="pending")])
        stream = session.message()  # agent_message_chunks sharing one messageId
        await stream.write("Working")
        await stream.write(" on it.")
        await session.update_info(title="Reading files")  # session_info_update
        await session.usage(1200, 200_000)  # usage_update: tokens used, context size
        outcome = await session.request_permission("Edit main.py?", OPTIONS)
        await session.say("Edited." if outcome.allowed else "Left it alone.")
        return "end_turn"
