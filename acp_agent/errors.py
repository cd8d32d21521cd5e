"""Every exception acp-agent raises, under one root, and the JSON-RPC / ACP error codes.

Catch [`AcpAgentError`][acp_agent.AcpAgentError] to catch anything the SDK raises on purpose. Each class says
when it is raised, whether anything was sent to the client, and what to do about it.
"""

from __future__ import annotations

from typing import Any

from ._util.base_error import AcpAgentError
from ._util.environment import EnvironmentVariableError

__all__ = [
    "AcpAgentError",
    "ElicitationUnsupportedError",
    "EnvironmentVariableError",
    "ErrorCode",
    "InvalidArgumentError",
    "LimitExceededError",
    "McpServerError",
    "McpTransportError",
    "NotInTurnError",
    "ProcessStartError",
    "RequestError",
    "SessionClosedError",
    "SessionNotOpenError",
    "StoreError",
    "StoreUnusableError",
    "ToolCallStateError",
    "UnknownMcpServerError",
]


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


class RequestError(AcpAgentError):
    """An error answer to a JSON-RPC request, or the error that ends a turn.

    Raise it from an agent hook to answer the client with exactly this code, message and
    data (from [`Agent.prompt`][acp_agent.Agent.prompt] it becomes the ``error`` of the turn's ``idle``
    snapshot, code and data kept). Any other exception reaches the client only as
    ``-32603`` "Internal error", with the traceback logged on stderr: raising a
    ``RequestError`` is how an agent chooses to show a message. Also raised by
    `Connection.request` when the peer answered with an error.
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
    def store_unavailable(cls, retry_after: float = 1.0) -> RequestError:
        """The session store cannot be reached now (``-32603``, ``data.retryable``): nothing was done; send the
        request again after ``data.retryAfter`` seconds."""
        return cls(ErrorCode.INTERNAL_ERROR, "Session store unavailable, retry",
                   {"retryable": True, "retryAfter": retry_after})

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


class SessionClosedError(AcpAgentError, RuntimeError):
    """Agent code tried to send or start something for a session that was closed.

    Nothing was sent. Raised once ``session/close``, ``session/delete`` or the end of the
    connection began for that session; background tasks started with ``session.spawn``
    end quietly on it, so there is usually nothing to do.
    """


class SessionNotOpenError(AcpAgentError, RuntimeError):
    """A request to the client was made for a session the client has not been told about yet.

    Raised, with nothing sent, by a permission request made inside ``new_session`` or
    ``fork_session``: the client learns the session id from the answer to that request, so
    it could not place a question about it. Ask from the first prompt instead. (Updates
    sent from those hooks are held and go out right after the answer.)
    """


class NotInTurnError(AcpAgentError, RuntimeError):
    """An agent message or thought was sent while the session is ``idle``.

    Nothing was sent. Messages belong to foreground work, which the client sees between
    ``running`` and ``idle``; after the turn ended (from a task, a callback, a tool call's
    body) wrap the talking in foreground work of its own:
    ``session.start_foreground(work)``, where ``work`` says what it has to say.
    """


class ElicitationUnsupportedError(AcpAgentError, RuntimeError):
    """The client did not advertise the elicitation mode asked for (``form`` or ``url``).

    Nothing was sent. Check ``session.client.accepts_forms`` / ``accepts_urls`` first and fall
    back to something else (a permission request, a message); never fall back from a URL flow
    to a form for a secret.
    """


class LimitExceededError(AcpAgentError, RuntimeError):
    """Raised in agent code when a call would go past a configured limit (see [`Limits`][acp_agent.Limits]).

    Nothing was sent and nothing changed. ``limit`` is the limit's name (a ``Limits`` field)
    and ``value`` its configured value.
    """

    def __init__(self, limit: str, value: int, message: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.value = value


class InvalidArgumentError(AcpAgentError, ValueError):
    """Agent code passed the SDK an argument it refuses (a relative ``cwd``, another session's handle, ...).

    Raised where the argument is passed, before anything is sent or started. It is a
    `ValueError` too, so code written against the plain `ValueError` keeps catching it.
    """


class ToolCallStateError(AcpAgentError, ValueError):
    """An update that would break the tool call / terminal lifecycle rules (R97).

    Nothing was sent. Raised for a status that moves backwards (``pending`` after work
    began), any change after a final status, or an update for an unknown or ended item.
    """


class ProcessStartError(AcpAgentError, OSError):
    """[`Session.start_terminal`][acp_agent.Session.start_terminal] could not start the process (missing command, bad
    cwd, ...).

    Nothing was sent: the terminal was never announced and no tool call changed. ``errno``,
    ``strerror`` and ``filename`` are those of the underlying `OSError`, which is also
    the ``__cause__``.
    """


class StoreError(AcpAgentError, RuntimeError):
    """A session store could not read or write (I/O error, lock held too long, lost connection).

    Nothing was sent because of it. The runtime logs it on stderr and keeps serving: a save
    that failed is retried in full at the next save of that session.
    """


class StoreUnusableError(StoreError):
    """A session store cannot be opened: the file is corrupt, not a database, or was written by a
    newer acp-agent (its schema version is above the newest this version knows).

    Raised by ``SessionStore.open``; nothing in the store was changed. ``run_stdio`` logs it on
    stderr and serves with a fresh in-memory store instead (see the guide "Sessions on disk and the crash
    contract").
    """


class McpServerError(AcpAgentError):
    """[unstable] A client-hosted MCP server answered a request with an MCP error.

    Raised by [`AcpMcpServer`][acp_agent.AcpMcpServer] calls (also for a result that does not fit
    MCP). ``server`` is the server's name; ``code``, ``message`` and ``data`` are the MCP
    error's, which are MCP codes, never ACP ones. The request is over: nothing to withdraw.
    """

    def __init__(self, server: str, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"MCP server {server!r}: {message} ({code})")
        self.server = server
        self.code = code
        self.message = message
        self.data = data


class McpTransportError(RequestError):
    """[unstable] A request to a client-hosted MCP server got no MCP answer.

    The client answered the ``mcp/message`` request with an ACP error (the codes below, or
    ``-32601`` from a client without MCP over ACP), it timed out (``-32800``, withdrawn with
    ``$/cancel_request``), or the connection ended. ``server`` is the server's name. As a
    [`RequestError`][acp_agent.RequestError], raising it on from a prompt ends the turn with this code.
    """

    RESOURCE_LIMIT = -33000
    """The client has too many MCP requests in flight for the server."""
    SERVER_UNAVAILABLE = -33001
    """The client has no MCP server with that id (any more) on this connection."""
    BACKEND_FAILED = -33002
    """The server failed without an MCP answer, or the answer carried none."""
    REQUEST_CANCELLED = ErrorCode.REQUEST_CANCELLED

    def __init__(self, server: str, code: int, message: str, data: Any = None) -> None:
        super().__init__(code, message, data)
        self.server = server


class UnknownMcpServerError(AcpAgentError, KeyError):
    """[unstable] No client-hosted MCP server of that name is given to the session.

    Raised, with nothing sent, by ``session.acp_mcp_servers[name]`` for a name the client did
    not give, and by calls on a server a later ``session/resume`` left out of ``mcpServers``.
    """

    def __init__(self, name: str, reason: str = "not given to this session") -> None:
        super().__init__(f"MCP server {name!r} is {reason}")
        self.name = name

    def __str__(self) -> str:
        return str(self.args[0])


def _msg(base: str, detail: str | None) -> str:
    return f"{base}: {detail}" if detail else base
