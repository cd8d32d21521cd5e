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
    "DIFF_TEXT_META", "STOP_REASONS", "b64", "mode_option", "session_params", "stop_answer", "text_content",
    "text_resources", "v1_commands", "v1_config_options", "v1_modes", "v1_tool_content",
]

DIFF_TEXT_META: Final = "acp-agent/text"
"""The ``_meta`` key of a v2 diff change under which ``acp_agent.text_diff`` keeps ``oldText`` / ``newText``
(v1 shows a diff only from its texts; the same value as ``acp_agent.tool_calls.DIFF_TEXT_META``)."""

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


def text_resources(blocks: list[Any]) -> tuple[list[Any], int]:
    """Prompt blocks with each embedded ``resource`` given as text (a blob one as a link), and how many changed."""
    out: list[Any] = []
    changed = 0
    for block in blocks:
        resource = obj(block.get("resource")) if isinstance(block, dict) and block.get("type") == "resource" else None
        if resource is None:
            out.append(block)
            continue
        changed += 1
        uri = str(resource.get("uri", ""))
        if isinstance(resource.get("text"), str):
            out.append({"type": "text", "text": f"Contents of {uri}:\n```\n{resource['text']}\n```"})
        else:
            link: dict[str, Any] = {"type": "resource_link", "uri": uri, "name": uri.rsplit("/", 1)[-1] or uri}
            if isinstance(resource.get("mimeType"), str):
                link["mimeType"] = resource["mimeType"]
            out.append(link)
    return out, changed


def v1_tool_content(item: dict[str, Any]) -> list[dict[str, Any]]:
    """A v2 tool call content item (not a terminal) as v1 items.

    A diff becomes one v1 ``diff`` per change whose texts it carries (see `DIFF_TEXT_META`); the other
    changes are shown by the diff's patch as a fenced ``diff`` block, or without one as ``operation path``.
    """
    kind = item.get("type")
    if kind == "content" and isinstance(item.get("content"), dict):
        return [{"type": "content", "content": item["content"]}]
    if kind != "diff":
        return []
    out: list[dict[str, Any]] = []
    bare: list[str] = []
    for change in item.get("changes") or []:
        if not isinstance(change, dict):
            continue
        path = change.get("path") or change.get("oldPath")
        texts = obj(obj(change.get("_meta")).get(DIFF_TEXT_META))
        if isinstance(texts.get("newText"), str) and isinstance(path, str):
            diff: dict[str, Any] = {"type": "diff", "path": path,
                                    "oldText": texts["oldText"] if isinstance(texts.get("oldText"), str) else None,
                                    "newText": texts["newText"]}
            out.append(diff)
        else:
            bare.append(f"{change.get('operation', 'change')} {path or ''}".strip())
    patch = obj(item.get("patch")).get("text")
    if bare and isinstance(patch, str) and patch:
        fence = "````" if "```" in patch else "```"
        out.append(text_content(f"{fence}diff\n{patch}{'' if patch.endswith(chr(10)) else chr(10)}{fence}"))
    elif bare:
        out.extend(text_content(text) for text in bare)
    return out


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
