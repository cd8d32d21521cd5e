from acp_agent import Agent, ContentBlock, McpServerError, Session, StopReason


class ToolAgent(Agent):
    name = "tool-agent"
    mcp_acp = True

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        calc = session.acp_mcp_servers["calc"]  # UnknownMcpServerError (a KeyError) if not given
        tools = await calc.list_tools()  # [McpTool(name, title, description, input_schema, ...)]
        assert any(tool.name == "add" for tool in tools)
        try:
            result = await calc.call_tool("add", {"a": 2, "b": 3}, timeout=30)  # an McpToolResult
        except McpServerError as error:  # the server answered with an MCP error
            await session.say(f"add failed: {error.message} ({error.code})")
            return "end_turn"
        await session.say(result.text if not result.is_error else f"the tool failed: {result.text}")
        return "end_turn"
