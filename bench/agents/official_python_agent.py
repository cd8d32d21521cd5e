"""The bench workload written with the official Python SDK, ``agent-client-protocol==0.12.1`` (ACP v1).

Written the way its examples are: an ``acp.Agent`` subclass whose ``on_connect`` keeps the client
connection, ``session_update`` for every update, ``run_agent`` on stdio.

    stream N   -> N ``agent_message_chunk`` updates sharing one ``messageId``; the prompt response ends the turn
    echo TEXT  -> one ``agent_message_chunk`` with TEXT; the prompt response ends the turn

Run: ``bench/.venv-anchors/bin/python bench/agents/official_python_agent.py`` (ACP v1 on stdio).
"""

import asyncio
from itertools import count
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    Agent,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    run_agent,
    text_block,
)
from acp.interfaces import Client
from acp.schema import (
    AgentMessageChunk,
    AudioContentBlock,
    ClientCapabilities,
    EmbeddedResourceContentBlock,
    HttpMcpServer,
    ImageContentBlock,
    Implementation,
    McpServerStdio,
    ResourceContentBlock,
    SseMcpServer,
    TextContentBlock,
)


class BenchAgent(Agent):
    """Streams or echoes, as the prompt says."""

    _conn: Client
    _ids = count(1)  # short ids (sess_1, msg_2, ...) keep the lines the same size as the other agents'

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_info=Implementation(name="bench-official-python-agent", version="1.0.0"),
        )

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[HttpMcpServer | SseMcpServer | McpServerStdio] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"sess_{next(self._ids)}")

    async def prompt(
        self,
        session_id: str,
        prompt: list[
            TextContentBlock
            | ImageContentBlock
            | AudioContentBlock
            | ResourceContentBlock
            | EmbeddedResourceContentBlock
        ],
        **kwargs: Any,
    ) -> PromptResponse:
        text = " ".join(block.text for block in prompt if isinstance(block, TextContentBlock))
        command, _, argument = text.partition(" ")
        message_id = f"msg_{next(self._ids)}"
        if command == "stream":
            for i in range(int(argument)):
                chunk = AgentMessageChunk(
                    session_update="agent_message_chunk", content=text_block(f"chunk {i} "), message_id=message_id
                )
                await self._conn.session_update(session_id=session_id, update=chunk)
        else:
            reply = argument if command == "echo" else f"unknown command: {command}"
            chunk = AgentMessageChunk(
                session_update="agent_message_chunk", content=text_block(reply), message_id=message_id
            )
            await self._conn.session_update(session_id=session_id, update=chunk)
        return PromptResponse(stop_reason="end_turn")


async def main() -> None:
    await run_agent(BenchAgent())


if __name__ == "__main__":
    asyncio.run(main())
