"""Pure conversions between v1 and v2 shapes: content, commands, config options, modes, outcomes.

No state and no I/O: every function builds new values from its arguments and never changes
them. Input is untrusted (it is what the client or the agent sent), so anything malformed is
left out rather than raised on.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any, Final

from ..schema.state import STOP_REASONS as V2_STOP_REASONS
from .messages import Message, obj

__all__ = [
    "STOP_REASONS", "b64", "mode_option", "session_params", "stop_answer", "text_content", "v1_commands",
    "v1_config_options", "v1_modes", "v1_tool_content",
]

STOP_REASONS: Final = V2_STOP_REASONS - {"error"}
"""The stop reasons v1 knows: v2's without ``error``."""


def session_params(params: dict[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """v2 params of a session request: ``keys`` and ``_meta`` when set, v1 stdio MCP servers typed ``stdio``."""
    v2 = {k: params[k] for k in (*keys, "_meta") if params.get(k) is not None}
    servers = params.get("mcpServers")
    if isinstance(servers, list) and servers:
        v2["mcpServers"] = [
            {"type": "stdio", **s} if isinstance(s, dict) and "type" not in s else s for s in servers
        ]
    return v2


def stop_answer(update: Message) -> Message:
    """How a v1 prompt is answered for an ``idle`` state: ``{stopReason}``, or ``{error}`` for a failed turn."""
    reason = update.get("stopReason")
    if reason == "error":
        error = obj(update.get("error"))
        code = error.get("code") if isinstance(error.get("code"), int) else -32603
        body: dict[str, Any] = {"code": code, "message": str(error.get("message") or "Internal error: the turn failed")}
        if error.get("data") is not None:
            body["data"] = error["data"]
        return {"error": body}
    return {"stopReason": reason if reason in STOP_REASONS else "end_turn"}


def v1_commands(commands: Any) -> list[dict[str, Any]]:
    """Available commands in v1 form (``name``, ``description``, ``input.hint``)."""
    out: list[dict[str, Any]] = []
    for command in commands if isinstance(commands, list) else []:
        if not isinstance(command, dict) or not isinstance(command.get("name"), str):
            continue
        v1: dict[str, Any] = {"name": command["name"], "description": str(command.get("description", ""))}
        given = command.get("input")
        if isinstance(given, dict) and isinstance(given.get("hint"), str):
            v1["input"] = {"hint": given["hint"]}
        out.append(v1)
    return out


def text_content(text: str) -> dict[str, Any]:
    """A v1 tool call content item showing ``text``."""
    return {"type": "content", "content": {"type": "text", "text": text}}


def v1_tool_content(item: dict[str, Any]) -> list[dict[str, Any]]:
    """A v2 tool call content item (not a terminal) as v1 items: one ``diff`` per change that carries text."""
    kind = item.get("type")
    if kind == "content" and isinstance(item.get("content"), dict):
        return [{"type": "content", "content": item["content"]}]
    if kind == "diff":
        out: list[dict[str, Any]] = []
        for change in item.get("changes") or []:
            if not isinstance(change, dict):
                continue
            path = change.get("path") or change.get("newPath") or change.get("oldPath")
            if isinstance(change.get("newText"), str) and isinstance(path, str):
                diff: dict[str, Any] = {"type": "diff", "path": path, "newText": change["newText"]}
                if isinstance(change.get("oldText"), str):
                    diff["oldText"] = change["oldText"]
                out.append(diff)
            else:
                text = f"{change.get('operation', 'change')} {path or ''}".strip()
                out.append({"type": "content", "content": {"type": "text", "text": text}})
        return out
    return []


def v1_config_options(options: list[Any]) -> list[dict[str, Any]]:
    """v2 config options in v1 form (``configId`` is ``id``, ``groupId`` is ``group``); other types are left out."""
    out: list[dict[str, Any]] = []
    for option in options:
        if not isinstance(option, dict) or option.get("type") not in ("select", "boolean"):
            continue
        v1 = {("id" if k == "configId" else k): v for k, v in option.items()}
        if option.get("type") == "select":
            v1["options"] = [
                {("group" if k == "groupId" else k): v for k, v in entry.items()} if isinstance(entry, dict) else entry
                for entry in option.get("options") or []
            ]
        out.append(v1)
    return out


def mode_option(options: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The ``select`` config option of category ``mode`` (shown to v1 as session modes), if any."""
    for option in options:
        if isinstance(option, dict) and option.get("category") == "mode" and option.get("type") == "select":
            return option
    return None


def v1_modes(option: dict[str, Any]) -> dict[str, Any]:
    """The v1 ``modes`` of a mode config option: its current value and every value it offers (groups flattened)."""
    available: list[dict[str, Any]] = []
    for entry in option.get("options") or []:
        nested = entry.get("options") if isinstance(entry, dict) and "value" not in entry else None
        for value in nested if isinstance(nested, list) else [entry]:
            if isinstance(value, dict) and isinstance(value.get("value"), str):
                mode = {"id": value["value"], "name": str(value.get("name", value["value"]))}
                if isinstance(value.get("description"), str):
                    mode["description"] = value["description"]
                available.append(mode)
    return {"currentModeId": option.get("currentValue"), "availableModes": available}


def b64(data: str) -> bytes:
    """Decoded base64, or no bytes when it is not valid base64."""
    try:
        return base64.b64decode(data)
    except ValueError:
        return b""
