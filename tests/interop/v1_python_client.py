"""The official Python SDK's v1 client (agent-client-protocol, ClientSideConnection) drives an acp-agent example.

Usage: python v1_python_client.py {echo|background} PYTHON AGENT_SCRIPT

The agent runs as a subprocess; a relay between the SDK and the agent's pipes records every line in both
directions (files named by ACP_INTEROP_TRANSCRIPT and ACP_INTEROP_CLIENT_TRANSCRIPT). Anything the SDK logs at
WARNING or above (its reports of messages that do not validate against its v1 models), any failed check or any
error answer makes the run fail. On success one JSON summary line goes to stdout.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import Any

from acp import PROTOCOL_VERSION, ClientSideConnection, RequestError, text_block
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    Implementation,
    RequestPermissionResponse,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)

TIMEOUT = 30.0


class Problems(logging.Handler):
    """Collects what the SDK logs at WARNING or above: its own validation failures end up here."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(self.format(record))


class RecordingClient:
    """The client side: collects session updates, answers permission requests with the first allow option."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.permissions: list[Any] = []
        self.changed = asyncio.Event()

    async def request_permission(self, options: Any, session_id: str, tool_call: Any, **kwargs: Any) -> Any:
        self.permissions.append({"toolCallId": tool_call.tool_call_id, "title": tool_call.title})
        allow = next(o for o in options if o.kind.startswith("allow"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=allow.option_id))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.changed.set()

    async def wait_for(self, predicate: Any) -> None:
        async with asyncio.timeout(TIMEOUT):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()

    def text(self, start: int = 0) -> str:
        return "".join(
            u.content.text for _, u in self.updates[start:]
            if isinstance(u, AgentMessageChunk) and getattr(u.content, "text", None) is not None
        )

    def tool(self, tool_call_id: str) -> dict[str, Any]:
        """The tool call as a v1 client sees it: the tool_call, then each update patched over it."""
        state: dict[str, Any] = {}
        for _, u in self.updates:
            if isinstance(u, (ToolCallStart, ToolCallProgress)) and u.tool_call_id == tool_call_id:
                state.update(u.model_dump(by_alias=True, exclude_unset=True))
        return state

    def tool_ids(self, start: int = 0) -> list[str]:
        return [u.tool_call_id for _, u in self.updates[start:] if isinstance(u, ToolCallStart)]


def content_text(tool: dict[str, Any]) -> str:
    return "".join(c.get("content", {}).get("text", "") for c in tool.get("content") or [])


async def relay(reader: asyncio.StreamReader, writer: Any, log: Any) -> None:
    while line := await reader.readline():
        log.write(line.decode())
        log.flush()
        writer.write(line)
        await writer.drain()
    writer.close()


async def pipe_pair() -> tuple[asyncio.StreamReader, asyncio.StreamWriter, int, int]:
    """A StreamReader fed from one os pipe and a StreamWriter into another, plus the two far ends."""
    loop = asyncio.get_running_loop()
    read_fd, far_write = os.pipe()
    far_read, write_fd = os.pipe()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", 0))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(write_fd, "wb", 0))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer, far_write, far_read


async def echo_scenario(conn: ClientSideConnection, client: RecordingClient, summary: dict[str, Any]) -> None:
    new = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
    sid = new.session_id
    start = len(client.updates)
    reply = await conn.prompt(session_id=sid, prompt=[text_block("hello interop")])
    summary["first"] = {"stopReason": reply.stop_reason, "agentText": client.text(start)}
    pending = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("cancel me")]))
    await asyncio.sleep(0)
    await conn.cancel(session_id=sid)
    summary["cancel"] = {"stopReason": (await pending).stop_reason}
    start = len(client.updates)
    reply = await conn.prompt(session_id=sid, prompt=[text_block("still here after cancel")])
    summary["afterCancel"] = {"stopReason": reply.stop_reason, "agentText": client.text(start)}
    start = len(client.updates)
    await conn.load_session(cwd=os.getcwd(), session_id=sid, mcp_servers=[])
    replayed = client.updates[start:]
    summary["load"] = {
        "userText": "".join(u.content.text for _, u in replayed if isinstance(u, UserMessageChunk)),
        "agentText": client.text(start),
    }
    try:
        await conn.set_session_mode(session_id=sid, mode_id="fast")
        summary["setMode"] = "accepted"
    except RequestError as exc:
        summary["setMode"] = exc.code
    try:
        await conn.authenticate(method_id="none")
        summary["authenticate"] = "accepted"
    except RequestError as exc:
        summary["authenticate"] = exc.code
    await conn.close_session(session_id=sid)
    summary["close"] = {}


async def background_scenario(conn: ClientSideConnection, client: RecordingClient, summary: dict[str, Any]) -> None:
    new = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
    sid = new.session_id

    start = len(client.updates)
    reply = await conn.prompt(session_id=sid, prompt=[text_block("/run echo ran-in-foreground")])
    [tool_id] = client.tool_ids(start)
    tool = client.tool(tool_id)
    summary["run"] = {"stopReason": reply.stop_reason, "status": tool.get("status"), "kind": tool.get("kind"),
                      "output": "ran-in-foreground" in content_text(tool)}

    start = len(client.updates)
    reply = await conn.prompt(session_id=sid, prompt=[text_block("/bg sleep 0.5; echo bg-done")])
    [bg_id] = client.tool_ids(start)
    at_turn_end = client.tool(bg_id).get("status")
    await client.wait_for(lambda: client.tool(bg_id).get("status") in ("completed", "failed"))
    final = client.tool(bg_id)
    summary["bg"] = {"stopReason": reply.stop_reason, "statusAtTurnEnd": at_turn_end,
                     "finalStatus": final["status"], "output": "bg-done" in content_text(final)}

    start = len(client.updates)
    reply = await conn.prompt(session_id=sid, prompt=[text_block("/ask deploy")])
    summary["ask"] = {"stopReason": reply.stop_reason, "permissions": len(client.permissions),
                      "agentText": client.text(start)}

    pending = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("/run sleep 30")]))
    start = len(client.updates)
    await client.wait_for(lambda: bool(client.tool_ids(start)))
    await conn.cancel(session_id=sid)
    summary["cancel"] = {"stopReason": (await pending).stop_reason}

    await conn.close_session(session_id=sid)
    summary["close"] = {}


async def main() -> int:
    scenario_name, python, agent = sys.argv[1], sys.argv[2], sys.argv[3]
    problems = Problems()
    logging.getLogger().addHandler(problems)
    agent_log = open(os.environ.get("ACP_INTEROP_TRANSCRIPT", os.devnull), "w")  # noqa: SIM115
    client_log = open(os.environ.get("ACP_INTEROP_CLIENT_TRANSCRIPT", os.devnull), "w")  # noqa: SIM115
    process = await asyncio.create_subprocess_exec(
        python, agent, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=1 << 24
    )
    assert process.stdin is not None and process.stdout is not None
    sdk_reader, to_sdk, sdk_out_far, sdk_in_far = await pipe_pair()
    # The SDK reads what the relay writes into sdk_out_far, and writes into the pipe the relay reads at sdk_in_far.
    loop = asyncio.get_running_loop()
    far_reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(far_reader), os.fdopen(sdk_in_far, "rb", 0))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                        os.fdopen(sdk_out_far, "wb", 0))
    far_writer = asyncio.StreamWriter(transport, protocol, None, loop)
    relays = [asyncio.ensure_future(relay(process.stdout, far_writer, agent_log)),
              asyncio.ensure_future(relay(far_reader, process.stdin, client_log))]

    client = RecordingClient()
    conn = ClientSideConnection(client, to_sdk, sdk_reader)
    summary: dict[str, Any] = {"sdk": "agent-client-protocol", "scenario": scenario_name}
    try:
        async with asyncio.timeout(TIMEOUT * 2):
            init = await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="v1-python-interop", version="0"),
            )
            summary["protocolVersion"] = init.protocol_version
            summary["agent"] = init.agent_info.name if init.agent_info else None
            summary["loadSession"] = init.agent_capabilities.load_session if init.agent_capabilities else None
            scenario = echo_scenario if scenario_name == "echo" else background_scenario
            await scenario(conn, client, summary)
    finally:
        await conn.close()
        to_sdk.close()
        async with asyncio.timeout(10):
            summary["agentExitCode"] = await process.wait()
        for task in relays:
            task.cancel()
        agent_log.close()
        client_log.close()
    if problems.records:
        print("the SDK reported problems:\n" + "\n".join(problems.records), file=sys.stderr)
        return 1
    summary["ok"] = True
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
