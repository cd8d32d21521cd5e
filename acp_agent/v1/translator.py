"""The translator of one v1 connection: routes each message to the module that translates it.

Pure bookkeeping, no I/O, one instance per connection: `V1Translator.incoming` takes a
client message and returns what goes to the runtime and what the bridge answers the client
itself; `V1Translator.outgoing` takes a runtime message and returns what the client gets.
Messages the bridge does not translate pass unchanged in both directions, so the runtime still
judges (and answers) malformed input, and the client sees any message v1 and v2 share as is.
"""

from __future__ import annotations

from typing import Any

from .answers import runtime_answer
from .messages import Message, error, key, obj, result
from .permissions import REQUEST_PERMISSION, permission_answered, permission_request
from .requests import HANDLERS, Answer, Handle, Refuse, Unchanged
from .state import Session, TranslatorState
from .tools import flush_terminals, terminal_due
from .updates import session_update

__all__ = ["V1Translator"]


class V1Translator:
    """Translates one v1 connection: client messages to v2 calls, runtime messages to v1 shapes.

    Pure bookkeeping (no I/O): `incoming` returns what goes to the runtime and what the
    bridge answers the client itself; `outgoing` returns what the client gets.
    """

    def __init__(self) -> None:
        self.state = TranslatorState()
        """Everything the translator remembers about the connection."""

    # -- client -> runtime ------------------------------------------------------------------

    def incoming(self, message: Any) -> tuple[list[Message], list[Message]]:
        """Translate one client message: (messages for the runtime, answers for the client)."""
        if isinstance(message, list):
            runtime: list[Message] = []
            client: list[Message] = []
            for entry in message:
                r, c = self.incoming(entry)
                runtime.extend(r)
                client.extend(c)
            return runtime, client
        if not isinstance(message, dict):
            return [message], []
        method = message.get("method")
        if method is None:
            return self._client_response(message)
        params = message.get("params")
        if not isinstance(params, dict) or not isinstance(method, str):
            return [message], []
        request_id = message.get("id")
        is_request = "id" in message
        handler = HANDLERS.get(method)
        if handler is None:
            return [message], []
        handled = handler(self.state, params)
        if isinstance(handled, Unchanged):
            return [message], []
        if isinstance(handled, Answer):
            return [], [result(request_id, handled.result)] if is_request else []
        if isinstance(handled, Refuse):
            return [], [error(request_id, handled.code, handled.message, handled.data)] if is_request else []
        if isinstance(handled, Handle):
            answered = [result(request_id, handled.result)] if is_request and handled.result is not None else []
            return handled.runtime, [*handled.client, *answered]
        if is_request:
            self.state.requests[key(request_id)] = (method, handled.context)
        out: Message = {"jsonrpc": "2.0", "method": handled.method, "params": handled.params}
        if is_request:
            out["id"] = request_id
        return [out], []

    def _client_response(self, message: Message) -> tuple[list[Message], list[Message]]:
        entry = self.state.agent_requests.pop(key(message.get("id")), None)
        client: list[Message] = []
        if entry is not None and entry[0] == REQUEST_PERMISSION:
            client = permission_answered(self.state, entry[1], message)
        return [message], client

    # -- runtime -> client ------------------------------------------------------------------

    def outgoing(self, message: Any) -> list[Message]:
        """Translate one runtime message into what the v1 client gets (possibly nothing)."""
        if not isinstance(message, dict):
            return [message]
        method = message.get("method")
        if method is None:
            return runtime_answer(self.state, message)
        params = obj(message.get("params"))
        if method == "session/update":
            return session_update(self.state, params)
        if method == REQUEST_PERMISSION and "id" in message:
            return permission_request(self.state, message["id"], params)
        return [message]

    # -- held terminal output ---------------------------------------------------------------

    def due(self) -> float | None:
        """When held terminal output is next due (``time.monotonic`` seconds), or ``None``."""
        return terminal_due(self.state)

    def flush(self) -> list[Message]:
        """The updates of the terminal output now due (call at `due`)."""
        return flush_terminals(self.state)

    def _session(self, session_id: str) -> Session:
        """The books of a session, opened on first use."""
        return self.state.session(session_id)
