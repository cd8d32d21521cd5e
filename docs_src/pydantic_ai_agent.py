"""A pydantic-ai agent served over ACP: ``python docs_src/pydantic_ai_agent.py`` (an editor starts it).

Set ``ANTHROPIC_API_KEY`` (and ``pip install 'acp-agent-sdk[pydantic-ai]' 'pydantic-ai-slim[anthropic]'``);
``MY_AGENT_MODEL`` picks another model (``test`` is pydantic-ai's offline ``TestModel``).
"""

import os

from pydantic_ai import Agent

from acp_agent import run_stdio
from acp_agent.integrations.pydantic_ai import PydanticAIAgent

MODEL = os.environ.get("MY_AGENT_MODEL", "anthropic:claude-sonnet-4-5")

assistant = Agent(instructions="You help with the project in the current directory. Be concise.")


@assistant.tool_plain(requires_approval=True)  # asks the user first (allow / reject / always)
def deploy(environment: str) -> str:
    """Deploy the project."""
    return f"deployed to {environment}"


agent = PydanticAIAgent(
    assistant,
    name="my-agent",
    models={"default": MODEL},  # the `model` config option (and /model)
)

if __name__ == "__main__":
    run_stdio(agent)
