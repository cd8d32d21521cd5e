"""Serve any pydantic-ai agent over ACP v2: ``PydanticAIAgent(agent)`` is an [`Agent`][acp_agent.Agent].

Install the extra (``pip install 'acp-agent-sdk[pydantic-ai]'``), then::

    from pydantic_ai import Agent
    from acp_agent import run_stdio
    from acp_agent.integrations.pydantic_ai import PydanticAIAgent

    run_stdio(PydanticAIAgent(Agent("anthropic:claude-sonnet-4-5")))

Modules: ``agent`` (the ACP agent and its options), ``bridge`` (a run's events as ACP updates,
approvals), ``content`` (prompts and the stored model history), ``permissions``, ``presenter``,
``mcp`` (the client's MCP servers as toolsets), ``coding`` (a shell-and-files toolset on ACP
terminals and diffs) and ``subagents`` (a delegated pydantic-ai agent as an ACP subagent).
"""

from .agent import Command, ProviderModels, PydanticAIAgent, model_error
from .bridge import BACKGROUND_METADATA_KEY, FollowUp, ToolContext, TurnBridge, background_tool, current_tool
from .coding import CodingTools
from .permissions import PERMISSION_OPTIONS, Decision, PermissionPolicy
from .presenter import ToolPresentation, ToolPresenter, guess_kind, present_tool
from .subagents import delegate

__all__ = [
    "BACKGROUND_METADATA_KEY",
    "PERMISSION_OPTIONS",
    "CodingTools",
    "Command",
    "Decision",
    "FollowUp",
    "PermissionPolicy",
    "ProviderModels",
    "PydanticAIAgent",
    "ToolContext",
    "ToolPresentation",
    "ToolPresenter",
    "TurnBridge",
    "background_tool",
    "current_tool",
    "delegate",
    "guess_kind",
    "model_error",
    "present_tool",
]
