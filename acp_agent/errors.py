"""JSON-RPC and ACP error codes, and the exception that carries one to the wire."""

from __future__ import annotations

from typing import Any

__all__ = ["ErrorCode", "LimitExceededError", "RequestError", "SessionClosedError"]


class ErrorCode:
    """Error codes used by ACP v2 (JSON-RPC's own, plus ACP's and LSP's cancel code)."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    REQUEST_CANCELLED = -32800
    AUTH_REQUIRED = -32000
    RESOURCE_NOT_FOUND = -32002
    UNSUPPORTED_PROTOCOL_VERSION = -32022


class RequestError(Exception):
    """An error answer to a JSON-RPC request.

    Raise it from an agent hook to answer the client with exactly this code, message
    and data; receive it from :meth:`Connection.request` when the peer answered with an
    error.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def __repr__(self) -> str:
        return f"RequestError({self.code}, {self.message!r}, {self.data!r})"

    def to_dict(self) -> dict[str, Any]:
        """The JSON-RPC error object."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    @classmethod
    def parse_error(cls, detail: str | None = None) -> RequestError:
        """Input that is not valid JSON (``-32700``)."""
        return cls(ErrorCode.PARSE_ERROR, _msg("Parse error", detail))

    @classmethod
    def invalid_request(cls, detail: str | None = None) -> RequestError:
        """Input that is not a valid JSON-RPC message (``-32600``)."""
        return cls(ErrorCode.INVALID_REQUEST, _msg("Invalid request", detail))

    @classmethod
    def method_not_found(cls, method: str) -> RequestError:
        """A request for a method the agent does not implement (``-32601``)."""
        return cls(ErrorCode.METHOD_NOT_FOUND, "Method not found", {"method": method})

    @classmethod
    def invalid_params(cls, detail: str | None = None, data: Any = None) -> RequestError:
        """Params that do not fit the method (``-32602``)."""
        return cls(ErrorCode.INVALID_PARAMS, _msg("Invalid params", detail), data)

    @classmethod
    def internal_error(cls, detail: str | None = None) -> RequestError:
        """An unexpected failure while handling a request (``-32603``)."""
        return cls(ErrorCode.INTERNAL_ERROR, _msg("Internal error", detail))

    @classmethod
    def request_cancelled(cls, detail: str | None = None) -> RequestError:
        """A request abandoned by ``$/cancel_request``, shutdown or a limit (``-32800``)."""
        return cls(ErrorCode.REQUEST_CANCELLED, _msg("Request cancelled", detail))

    @classmethod
    def session_not_found(cls, session_id: str) -> RequestError:
        """A request naming a session that is unknown or not active here (``-32002``)."""
        return cls(ErrorCode.RESOURCE_NOT_FOUND, "Resource not found", {"sessionId": session_id})

    @classmethod
    def auth_required(cls) -> RequestError:
        """An operation that needs ``auth/login`` first (``-32000``)."""
        return cls(ErrorCode.AUTH_REQUIRED, "Authentication required")

    @classmethod
    def unsupported_version(cls, requested: int, supported: list[int]) -> RequestError:
        """``initialize`` asked for a version below every supported one (``-32022``)."""
        return cls(
            ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"requested": requested, "supported": supported},
        )


class SessionClosedError(RuntimeError):
    """Raised when agent code sends something for a session that has been closed."""


class LimitExceededError(RuntimeError):
    """Raised in agent code when a call would go past a configured limit (see :class:`~acp_agent.Limits`).

    Nothing was sent and nothing changed. ``limit`` is the limit's name (a ``Limits`` field)
    and ``value`` its configured value.
    """

    def __init__(self, limit: str, value: int, message: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.value = value


def _msg(base: str, detail: str | None) -> str:
    return f"{base}: {detail}" if detail else base
