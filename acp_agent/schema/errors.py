"""The JSON-RPC error object, the ACP error codes, and the structured ``data`` of ACP errors."""

from enum import IntEnum
from typing import Any

from .base import Meta, ProtocolVersion, SessionId, WireModel

__all__ = [
    "Error",
    "ErrorCode",
    "SessionNotFoundErrorData",
    "UnsupportedProtocolVersionErrorData",
]


class ErrorCode(IntEnum):
    """The error codes ACP names. Any other integer is also a valid code."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    REQUEST_CANCELLED = -32800
    AUTH_REQUIRED = -32000
    RESOURCE_NOT_FOUND = -32002
    UNSUPPORTED_PROTOCOL_VERSION = -32022


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
