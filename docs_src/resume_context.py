from acp_agent import Agent, AgentMessage, ContentBlock, Session, StopReason, TextContent, ToolCallUpdate, UserMessage


def text(item: UserMessage | AgentMessage) -> str:
    return "".join(block.text for block in item.content or [] if isinstance(block, TextContent))


class ContextAgent(Agent):
    name = "context-agent"

    def __init__(self) -> None:
        self.contexts: dict[str, list[dict[str, str]]] = {}  # session id -> the model's context

    async def resume_session(self, session: Session) -> None:
        context: list[dict[str, str]] = []
        for item in session.history:
            if isinstance(item, UserMessage):
                context.append({"role": "user", "content": text(item)})
            elif isinstance(item, AgentMessage):
                context.append({"role": "assistant", "content": text(item)})
            elif isinstance(item, ToolCallUpdate):
                context.append({"role": "tool", "content": f"{item.title}: {item.status}"})
        self.contexts[session.id] = context

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        asked = " ".join(b.text for b in prompt if isinstance(b, TextContent))
        await session.say(f"You said: {asked}")
        return "end_turn"
