"""The fixed vocabulary the checker judges against: states, statuses, kinds, methods, required params.

Some values are copied from the reference where it states them in prose; the ones the bundled schema also
states are derived from it in :mod:`acp_agent.testing.checker.schema_terms`, with a test that both agree.
"""

from __future__ import annotations

import re

from ..transcript import Direction

C2A: Direction = "client->agent"
A2C: Direction = "agent->client"
STATES = frozenset({"running", "requires_action", "idle", "unknown"})
STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "error"})
STATUSES = frozenset({"pending", "in_progress", "paused", "completed", "failed", "cancelled"})
FINAL = frozenset({"completed", "failed", "cancelled"})
KINDS = frozenset({"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"})
AGENT_METHODS = frozenset({
    "session/update", "session/request_permission", "elicitation/create", "elicitation/complete",
    "$/cancel_request", "auth/status_update", "mcp/message",
})
UPDATES = frozenset({
    "user_message_chunk", "user_message", "agent_message_chunk", "agent_message", "agent_thought_chunk",
    "agent_thought", "state_update", "tool_call_content_chunk", "tool_call_update", "terminal_update",
    "terminal_output_chunk", "plan_update", "available_commands_update", "config_option_update",
    "session_info_update", "usage_update", "notice", "compaction_update", "compaction_summary_chunk",
    "subagent_update", "session_message", "session_message_chunk", "plan_removed",
})
MESSAGE_KINDS = frozenset({
    "user_message", "user_message_chunk", "agent_message", "agent_message_chunk", "agent_thought",
    "agent_thought_chunk", "session_message", "session_message_chunk",
})
AGENT_OUTPUT = frozenset({"agent_message", "agent_message_chunk", "agent_thought", "agent_thought_chunk"})
USER_MESSAGES = frozenset({"user_message", "user_message_chunk"})
# Updates that only a replay sends (live work streams chunks; user messages come only from prompts).
REPLAY_SHAPED = USER_MESSAGES | {"agent_message", "agent_thought"}
ITEM_ID_FIELD = {"terminal": "terminalId", "tool_call": "toolCallId", "subagent": "sessionId"}
BASELINE = frozenset({"session/new", "session/list", "session/resume", "session/close", "session/prompt"})
OPTIONAL = {
    "session/fork": "fork", "session/delete": "delete", "session/archive": "archive",
    "session/unarchive": "archive", "session/status": "status", "session/set_title": "title",
}
SESSION_SCOPED = frozenset({"session/prompt", "session/set_config_option", "tool_call/cancel", "terminal/cancel"})
REQUIRED: dict[str, dict[str, type]] = {
    "initialize": {"protocolVersion": int},
    "session/new": {"cwd": str},
    "session/resume": {"sessionId": str, "cwd": str},
    "session/close": {"sessionId": str},
    "session/prompt": {"sessionId": str, "prompt": list},
    "session/set_config_option": {"sessionId": str, "configId": str},
    "session/delete": {"sessionId": str},
    "session/fork": {"sessionId": str, "cwd": str},
    "session/list": {},
    "tool_call/cancel": {"sessionId": str, "toolCallId": str},
    "terminal/cancel": {"sessionId": str, "terminalId": str},
    "auth/login": {"methodId": str},
    "auth/logout": {},
}
ABSOLUTE = re.compile(r"^(/|[A-Za-z]:[\\/]|\\\\)")
UNPARSED = "<unparsed>"
QUOTE_LIMIT = 300
