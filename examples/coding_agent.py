"""A coding agent built with pydantic-ai and served over ACP: read, search, edit and run, with approval.

Run it as an ACP agent process (e.g. from Zed), or try it in the inspector:

    python examples/coding_agent.py
    python -m acp_agent dev examples/coding_agent.py

It needs the extra: ``pip install 'acp-agent-sdk[pydantic-ai]'``. With ``ANTHROPIC_API_KEY`` or
``OPENAI_API_KEY`` set (and ``pip install 'pydantic-ai-slim[anthropic]'`` / ``[openai]``) it offers those
models; the ``offline`` model always works without a network (a scripted model for demos and tests):

    read PATH            read a file              search PATTERN       search the project
    write PATH: TEXT     write a file (asks)      edit PATH: OLD => NEW   edit a file (asks)
    run COMMAND          run a command (asks)     serve COMMAND        leave it running in the background
    test                 run the tests (asks) as a background tool; the result comes back in a later turn
    research QUESTION    a research subagent searches the project and answers
    anything else        a reply that shows the model sees the whole conversation

Slash commands: ``/model`` (switch models), ``/clear`` (forget the conversation), ``/explain PATH``.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from acp_agent import Session, run_stdio
from acp_agent.integrations.pydantic_ai import (
    CodingTools,
    Command,
    PydanticAIAgent,
    background_tool,
    current_tool,
    delegate,
)

INSTRUCTIONS = """You are a careful coding agent working in the user's project directory.
Read before you edit; keep edits small; run the tests after a change. Use `serve` style background
commands for servers and watchers, and `research` for questions that need a look around the code."""

# -- the offline model: a scripted FunctionModel (no network) --------------------------------------

SCRIPT = [
    (re.compile(r"read (?P<path>\S+)"), "read_file", lambda m: {"path": m["path"]}),
    (re.compile(r"search (?P<pattern>.+)"), "search", lambda m: {"pattern": m["pattern"]}),
    (re.compile(r"write (?P<path>[^:]+): (?P<content>.*)", re.S), "write_file",
     lambda m: {"path": m["path"], "content": m["content"]}),
    (re.compile(r"edit (?P<path>[^:]+): (?P<old>.*) => (?P<new>.*)", re.S), "edit_file",
     lambda m: {"path": m["path"], "old_text": m["old"], "new_text": m["new"]}),
    (re.compile(r"run (?P<command>.+)", re.S), "run_command", lambda m: {"command": m["command"]}),
    (re.compile(r"serve (?P<command>.+)", re.S), "run_command",
     lambda m: {"command": m["command"], "background": True, "notify_on_exit": True}),
    (re.compile(r"test$"), "run_tests", lambda m: {}),
    (re.compile(r"research (?P<question>.+)", re.S), "research", lambda m: {"question": m["question"]}),
    (re.compile(r"Research: (?P<pattern>.+)", re.S), "search", lambda m: {"pattern": m["pattern"]}),
]


def _prompts(messages: list[ModelMessage]) -> list[str]:
    return [_text(p.content) for m in messages if isinstance(m, ModelRequest)
            for p in m.parts if isinstance(p, UserPromptPart)]


def _text(content: Any) -> str:
    """A prompt's text; an image or other attachment in it is named (the offline model cannot look)."""
    if isinstance(content, str):
        return content
    return " ".join(c if isinstance(c, str) else "[image]" if getattr(c, "is_image", False) else "[attachment]"
                    for c in content)


async def offline(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | dict[int, DeltaToolCall]]:
    """Call the tool the last prompt names; after a tool, report its result; else talk."""
    last = messages[-1]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
    if returns:
        result = str(returns[0].content)
        first_line = result.strip().splitlines()[0] if result.strip() else "(nothing)"
        yield f"{returns[0].tool_name}: {first_line}"
        return
    prompts = _prompts(messages)
    prompt = prompts[-1] if prompts else ""
    tools = {tool.name for tool in info.function_tools}
    for pattern, tool, args in SCRIPT:
        match = pattern.match(prompt.strip())
        if match and tool in tools:
            yield {0: DeltaToolCall(name=tool, json_args=_json(args(match)))}
            return
    if prompt.startswith("[background]"):
        yield "Noted: " + prompt.removeprefix("[background] ").splitlines()[0]
        return
    for i, word in enumerate(f"(offline model) You said: {prompt}. Prompts so far: {len(prompts)}.".split(" ")):
        yield word if i == 0 else " " + word


def _json(value: dict[str, Any]) -> str:
    import json

    return json.dumps(value)


def available_models() -> dict[str, Model | str]:
    """The offline model, and the real providers configured here (a key and the provider's package)."""
    models: dict[str, Model | str] = {}
    if os.environ.get("ANTHROPIC_API_KEY") and importlib.util.find_spec("anthropic"):
        models["claude-sonnet"] = "anthropic:claude-sonnet-4-5"
    if os.environ.get("OPENAI_API_KEY") and importlib.util.find_spec("openai"):
        models["gpt"] = "openai:gpt-5"
    models["offline"] = FunctionModel(stream_function=offline, model_name="offline")
    return models


# -- the agent -------------------------------------------------------------------------------------

tools = CodingTools()
MODELS = available_models()
coder = Agent(next(iter(MODELS.values())), instructions=INSTRUCTIONS, name="coder")
researcher = Agent(instructions="Answer the question by searching and reading the project. Be brief.",
                   name="researcher")


@coder.tool
async def research(ctx: RunContext[Any], question: str) -> str:
    """Ask a research subagent, which searches and reads the project (read-only), to answer a question."""
    session = current_tool().session
    read_only = tools.toolset(session).filtered(lambda _, tool: tool.name in {"read_file", "list_files", "search"})
    prompt = f"Research: {question}" if ctx.model.model_name == "offline" else question
    return await delegate(researcher, prompt, title=f"Research: {question}", model=ctx.model, toolsets=[read_only])


@coder.tool_plain(metadata=background_tool(), requires_approval=True)
async def run_tests() -> str:
    """Run the project's tests in the background; the result arrives in a later message.

    The tests run a repository's own code (``conftest.py``), so the user approves it first, and it runs as an SDK
    terminal: shown live, stoppable, counted against the process quota, reaped with the agent, with the agent's
    environment minus its secrets (never ``ACP_AGENT_*``, nor what ``ACP_AGENT_WITHHOLD_ENV`` names).
    """
    context = current_tool()
    command = os.environ.get("CODING_AGENT_TEST_COMMAND", "python -m pytest -q")
    terminal = await context.session.start_terminal(command, tool_call=context.tool_call, detach=False)
    status = await terminal.wait()
    tail = terminal.tail().decode(errors="replace")[-2000:]
    return f"`{command}` exited {status.exit_code if status.signal is None else status.signal}\n{tail}"


async def explain(session: Session, args: str) -> str | None:
    """``/explain PATH``: a prompt template (the model gets "read PATH")."""
    if not args.strip():
        await session.say("Usage: /explain PATH")
        return None
    return f"read {args.strip()}"


agent = PydanticAIAgent(
    coder,
    name="coding-agent",
    title="Coding Agent (pydantic-ai)",
    version="1.0.0",
    toolsets=tools.toolsets,
    tool_presenter=tools.presenter,  # "Edit src/a.py" with its diff, shown before the user approves it
    models=MODELS,
    commands={"explain": Command("Explain a file", explain, hint="path")},
    accept_system_prompt=True,
    accepts_embedded_context=True,
    accepts_image=True,  # the real models look at it; the offline one says it got one
)

if __name__ == "__main__":
    run_stdio(agent)
