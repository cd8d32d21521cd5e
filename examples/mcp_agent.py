"""An agent that calls the tools of MCP servers its client hosts (MCP over ACP, unstable).

The client passes ``{"type": "acp", "name": ..., "serverId": ...}`` entries in ``mcpServers``; this
agent finds the tool a prompt names on those servers and calls it, showing the call as a tool call
(with the progress the server reports) and saying the result. A prompt is a tool name and optional
JSON arguments: ``add {"a": 2, "b": 3}``.

Run it as an ACP agent process:  python examples/mcp_agent.py
"""

import json

from acp_agent import (
    AcpMcpServer,
    Agent,
    ContentBlock,
    McpNotification,
    McpServerError,
    McpTool,
    Session,
    StopReason,
    TextContent,
    run_stdio,
)


class McpToolAgent(Agent):
    """Runs the client's MCP tools by name."""

    name = "mcp-tool-agent"
    title = "MCP Tool Agent"
    version = "1.0.0"
    mcp_acp = True  # accept `type: "acp"` MCP servers (advertises session.mcp.acp)

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        text = " ".join(block.text for block in prompt if isinstance(block, TextContent)).strip()
        tool_name, _, raw_arguments = text.partition(" ")
        try:
            arguments = json.loads(raw_arguments) if raw_arguments.strip() else {}
        except json.JSONDecodeError:
            await session.say("Arguments must be a JSON object, as in: add {\"a\": 2, \"b\": 3}")
            return "end_turn"

        # Asking every server for its tools each time keeps up with servers that change them.
        tools: list[tuple[AcpMcpServer, McpTool]] = []
        for server in session.acp_mcp_servers.values():
            tools += [(server, tool) for tool in await server.list_tools()]
        match = next(((server, tool) for server, tool in tools if tool.name == tool_name), None)
        if match is None:
            names = ", ".join(tool.name for _, tool in tools) or "none"
            await session.say(f"No tool named {tool_name!r}. Tools: {names}.")
            return "end_turn"

        server, tool = match
        call = await session.start_tool_call(tool.title or tool.name, kind="other", name=tool.name,
                                             raw_input=arguments)
        await call.start()

        async def show_progress(notification: McpNotification) -> None:
            if notification.method == "notifications/progress" and notification.params is not None:
                await call.append(f"progress: {notification.params.get('progress')}")

        try:
            result = await server.call_tool(tool.name, arguments, on_notification=show_progress)
        except McpServerError as error:  # the server refused the call (an MCP error)
            await call.fail()
            await session.say(f"{tool.name} failed: {error.message}")
            return "end_turn"
        await call.append(result.text)
        if result.is_error:  # the tool ran and reported a failure of its own
            await call.fail()
            await session.say(f"{tool.name} reported an error: {result.text}")
        elif result.structured_content is not None:
            await call.complete(raw_output=result.structured_content)
            await session.say(f"{tool.name} says: {result.text}")
        else:
            await call.complete()
            await session.say(f"{tool.name} says: {result.text}")
        return "end_turn"


if __name__ == "__main__":
    run_stdio(McpToolAgent())
