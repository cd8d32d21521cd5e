"""Tools for testing an ACP v2 agent: a scripted client, a wire-rule checker and schema validation.

- [`Client`][acp_agent.testing.Client] drives one agent connection and records every message in both directions
  ([`TranscriptEntry`][acp_agent.testing.TranscriptEntry]); [`connect_agent`][acp_agent.testing.connect_agent] serves an
  [`Agent`][acp_agent.Agent] in this process, [`spawn_agent`][acp_agent.testing.spawn_agent] launches an agent command
  and talks to it over its pipes (an agent process that dies raises
  [`AgentExitedError`][acp_agent.testing.AgentExitedError], with its exit status and stderr tail);
  [`connect_remote`][acp_agent.testing.connect_remote] reaches an agent served over WebSocket or Streamable HTTP (needs
  ``httpx`` and ``httpx-ws``, imported when it connects).
- [`WireChecker`][acp_agent.testing.WireChecker] and [`check_transcript`][acp_agent.testing.check_transcript] judge a
  transcript against the protocol's wire rules ([`RULES`][acp_agent.testing.RULES]), reporting each broken rule as a
  [`RuleViolation`][acp_agent.testing.RuleViolation].
- [`SchemaValidator`][acp_agent.testing.SchemaValidator] checks agent-sent messages against the official v2 JSON Schema,
  which ships inside this package ([`default_schema_path`][acp_agent.testing.default_schema_path]); it needs
  ``jsonschema``, imported only when a validator is built.
- [`Client.host_mcp_server`][acp_agent.testing.Client.host_mcp_server] (unstable) hosts MCP servers for an agent that
  calls them over ACP (``mcp/message``): a handler gets each [`HostedMcpRequest`][acp_agent.testing.HostedMcpRequest]
  and returns its MCP result or raises [`McpErrorAnswer`][acp_agent.testing.McpErrorAnswer].
- [`monitor_event_loop`][acp_agent.testing.monitor_event_loop] watches the event loop of a test that serves its agent
  in-process and warns when agent code blocks it (``run_stdio`` does this by itself).
- The pytest plugin (``acp_agent.testing.pytest_plugin``, registered on install) adds the
  ``acp_client`` and ``acp_connect`` fixtures.

The runtime never imports this package: ``import acp_agent`` leaves it unloaded.
"""

from __future__ import annotations

from .._util.lazy import publish
from .._util.loop_monitor import monitor_event_loop
from .checker import RULES, SHOULD_RULES, RuleViolation, WireChecker, check_transcript
from .client import (
    AgentExitedError,
    Client,
    PermissionPolicy,
    SessionView,
    TranscriptEntry,
    allow_first,
    connect_agent,
    spawn_agent,
)
from .mcp import HostedMcpRequest, McpErrorAnswer
from .remote import RemoteTransport, connect_remote, retry_prompt
from .schema import SchemaValidator, default_schema_path
from .streams import byte_pipe

__all__ = [
    "RULES",
    "SHOULD_RULES",
    "AgentExitedError",
    "Client",
    "HostedMcpRequest",
    "McpErrorAnswer",
    "PermissionPolicy",
    "RemoteTransport",
    "RuleViolation",
    "SchemaValidator",
    "SessionView",
    "TranscriptEntry",
    "WireChecker",
    "allow_first",
    "byte_pipe",
    "check_transcript",
    "connect_agent",
    "connect_remote",
    "default_schema_path",
    "monitor_event_loop",
    "retry_prompt",
    "spawn_agent",
]

publish(__name__, __all__)
