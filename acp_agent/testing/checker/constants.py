"""The fixed vocabulary the checker judges against: states, statuses, kinds, methods, required params.

What the bundled official schema (the unstable v2 one, see
[`default_schema_path`][acp_agent.testing.default_schema_path], with the Preview shapes merged in) enumerates is read
from it on first use and cached:
`foreground_states`, `tool_call_statuses`, `tool_kinds`, `update_kinds` and `agent_methods`. The rest is stated by the
reference in prose (or is this checker's own bookkeeping) and is written out here.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from ..schema import packaged_schema
from ..transcript import Direction

C2A: Direction = "client->agent"
A2C: Direction = "agent->client"


@cache
def _schema_defs() -> dict[str, Any]:
    defs: dict[str, Any] = packaged_schema(unstable=True)["$defs"]
    return defs


def _variants(name: str, prop: str | None = None) -> frozenset[str]:
    """The ``const`` values of a schema union: of each variant itself, or of its ``prop`` property."""
    defs = _schema_defs()
    values: set[str] = set()
    for variant in defs[name]["anyOf"]:
        if "$ref" in variant:
            variant = defs[variant["$ref"].rsplit("/", 1)[-1]]
        holder = variant if prop is None else variant.get("properties", {}).get(prop, {})
        if isinstance(holder.get("const"), str):
            values.add(holder["const"])
    return frozenset(values)


@cache
def foreground_states() -> frozenset[str]:
    """The ``state`` values of a ``state_update`` (``StateUpdate`` in the schema)."""
    return _variants("StateUpdate", "state")


@cache
def tool_call_statuses() -> frozenset[str]:
    """The tool call ``status`` values (``ToolCallStatus``)."""
    return _variants("ToolCallStatus")


@cache
def tool_kinds() -> frozenset[str]:
    """The tool call ``kind`` values (``ToolKind``)."""
    return _variants("ToolKind")


@cache
def update_kinds() -> frozenset[str]:
    """The ``sessionUpdate`` discriminators of ``session/update`` (``SessionUpdate``)."""
    return _variants("SessionUpdate", "sessionUpdate")


@cache
def agent_methods() -> frozenset[str]:
    """The methods an agent may send: those the schema assigns to the client side, plus the protocol's own."""
    return frozenset(definition["x-method"] for definition in _schema_defs().values()
                     if definition.get("x-side") in ("client", "protocol") and "x-method" in definition)


STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "error"})
FINAL = frozenset({"completed", "failed", "cancelled"})
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
# ACP v2 Preview (the preview judge).
KEY_LENGTH = range(1, 256)  # an idempotencyKey is 1-255 characters (P2)
# What a replay re-sends as messages: after a session's replay_complete, none of these (P8).
HISTORY_MESSAGES = REPLAY_SHAPED | {"session_message"}
# Updates only live work sends (a replay re-sends whole entities, never these): held back until the marker (P10, P11).
LIVE_KINDS = frozenset({
    "agent_message_chunk", "agent_thought_chunk", "session_message_chunk", "tool_call_content_chunk",
    "terminal_output_chunk", "compaction_summary_chunk", "state_update", "usage_update", "available_commands_update",
    "config_option_update", "session_info_update", "notice", "prompt_suggestions_update",
})
BASELINE_BLOCKS = frozenset({"text", "resource_link"})  # prompt blocks every agent and suggestion client takes
# A suggestion's block type beyond the baseline -> the promptSuggestions field that opts the client in (P17).
SUGGESTION_OPT_IN = {"image": "image", "audio": "audio", "resource": "embeddedContext"}
