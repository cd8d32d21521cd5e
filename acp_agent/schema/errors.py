"""The JSON-RPC error object and the structured ``data`` of ACP errors.

The named error codes are in [`acp_agent.errors.ErrorCode`][acp_agent.ErrorCode]; any integer is a valid ``code``.
"""

from typing import Any

from .base import Meta, ProtocolVersion, SessionId, WireModel

__all__ = [
    "Error",
    "SessionNotFoundErrorData",
    "UnsupportedProtocolVersionErrorData",
]


class Error(WireModel):
    """A JSON-RPC error object (also used as ``IdleStateUpdate.error``). ``data`` is any JSON value."""

    code: int
    message: str
    data: Any = None


class SessionNotFoundErrorData(WireModel):
    """``data`` of a ``-32002`` error: the session id the request named."""

    session_id: SessionId
    meta: Meta = None


class UnsupportedProtocolVersionErrorData(WireModel):
    """``data`` of a ``-32022`` error: the version asked for and every version the Agent supports."""

    requested: ProtocolVersion
    supported: list[ProtocolVersion]
    meta: Meta = None
