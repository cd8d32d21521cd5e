"""A pydantic-ai agent delegated to from a tool, run as an ACP subagent (a child session).

Inside a tool of a served agent, ``await delegate(research_agent, "find ...")`` opens a child session
of the tool's session, runs ``research_agent`` there (its text, thinking and tool calls stream under the
child's id, and its approvals ask the user like the parent's), waits for it and returns its output to
the calling tool. The client may cancel the child alone (``session/cancel`` with its id): the tool then
gets "cancelled" as the answer and the parent's turn goes on.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent as PydanticAgent

from ...session import Session, StopReason
from .bridge import TurnBridge, current_tool
from .permissions import PermissionPolicy
from .presenter import ToolPresenter

__all__ = ["delegate"]


async def delegate(agent: PydanticAgent[Any, Any], prompt: str, *, title: str | None = None,
                   description: str | None = None, deps: Any = None,
                   permission_policy: PermissionPolicy | None = None,
                   tool_presenter: ToolPresenter | None = None, **run_options: Any) -> str:
    """Run ``agent`` on ``prompt`` as a subagent of the current tool's session; its output as text.

    ``run_options`` go to ``agent.iter`` (``model``, ``usage_limits``, ``toolsets``...). Call it from a
    tool's body only (it needs [`current_tool`][acp_agent.integrations.pydantic_ai.current_tool]).
    """
    context = current_tool()
    child = await context.session.spawn_subagent(title or f"Subagent: {agent.name or 'agent'}",
                                                 description=description, detach=False)
    outputs: list[Any] = []

    async def work(session: Session) -> StopReason:
        bridge = TurnBridge(session, presenter=tool_presenter, policy=permission_policy or PermissionPolicy())
        async with agent.iter(prompt, deps=deps, capabilities=[bridge], **run_options) as run:
            async for _ in run:
                pass
        if run.result is not None:
            outputs.append(run.result.output)
        return "end_turn"

    result = await child.run(work)
    if result.stop_reason != "end_turn" or not outputs:
        reason = result.error.message if result.error is not None else result.stop_reason
        return f"The subagent did not finish ({reason})."
    output = outputs[0]
    return output if isinstance(output, str) else repr(output)
